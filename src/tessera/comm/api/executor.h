// Executor: runs a communicator's operations one at a time, in issue order,
// on a library progress thread (started on the first asynchronous
// submission), so callers compute while operations progress. A blocking
// call made while nothing is queued or running runs inline on the caller's
// thread instead (no thread hand-off: the small-message latency path), which
// keeps the issue order. The progress thread sleeps on a condition variable
// when idle. With `batch_progress` it runs under SCHED_BATCH: when it wakes
// it does not preempt a running computation but takes its turn (at once on
// an idle core) -- for transports whose data the kernel buffers (tcp:
// socket buffers hold tens of milliseconds of a link), where a late turn
// costs no bandwidth and each preemption costs the computation its caches.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tessera/base/status.h"
#include "tessera/comm/api/work.h"

namespace tessera::comm {

class Executor {
 public:
  using Runner = std::function<Status(const CollectiveArgs&)>;
  explicit Executor(Runner runner, bool batch_progress = false);
  ~Executor();  // finishes queued work, then stops the thread
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues `state` (its args set); completes it when run.
  void Submit(std::shared_ptr<WorkState> state);
  // Runs inline when idle, else queues and waits.
  Status RunBlocking(const CollectiveArgs& args);
  // Completes every queued (not yet running) work with `status` and refuses
  // new submissions with it; the running one finishes on its own.
  void Cancel(const Status& status);
  // Waits until nothing is queued or running.
  void Drain();

 private:
  void Loop();

  Runner runner_;
  bool batch_progress_ = false;
  std::mutex mu_;
  std::condition_variable cv_;       // work arrived / stop
  std::condition_variable idle_cv_;  // became idle
  std::deque<std::shared_ptr<WorkState>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  int idle_waiters_ = 0;  // threads in Drain()
  Status cancelled_;
  std::thread thread_;
};

}  // namespace tessera::comm
