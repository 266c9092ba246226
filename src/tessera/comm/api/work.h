// Work: the handle of one asynchronous communication operation. Every
// Communicator operation is asynchronous underneath; *Async calls return a
// Work at once and the communicator's progress thread runs the operation
// (operations of one communicator run one at a time, in issue order) while
// the caller computes. Buffers passed to an operation must stay valid and
// untouched until its Work completes.
//   Wait(timeout): blocks until the operation completes and returns its
//     Status, or returns DeadlineExceeded if `timeout` passes first (the
//     operation keeps running; Communicator::Abort() stops it).
//   Test(): true once complete (never blocks).
//   run_seconds(): once complete, the time the progress thread spent on the
//     operation (start to completion, not the time queued behind earlier
//     ones): with the caller's wait time it says how much of the
//     communication was hidden behind computation.
// A default-constructed Work is complete with OK. Copies share the state.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tessera/base/status.h"
#include "tessera/comm/api/types.h"

namespace tessera::comm {

inline constexpr std::chrono::milliseconds kWaitForever = std::chrono::milliseconds::max();

struct WorkState {
  CollectiveArgs args;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::chrono::steady_clock::time_point started{}, finished{};  // set by the executor

  void Complete(Status st);
};

class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  // A Work that is already complete with `status`.
  static Work Done(Status status);

  Status Wait(std::chrono::milliseconds timeout = kWaitForever) const;
  bool Test() const;
  bool valid() const { return state_ != nullptr; }
  // 0 until complete (and for Work::Done / default Works).
  double run_seconds() const;

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace tessera::comm
