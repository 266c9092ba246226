// CompletionThread: completes the TesseraWorks whose Future was asked for
// (DDP's reducer, comm hooks, get_future()), in the order they were handed
// over (a process group's operations finish in issue order), so Future
// callbacks run even when nobody calls wait(). One per process group;
// the destructor completes what is queued (each bounded by its operation's
// deadline) and joins.
// This thread never drops the last reference to a completed work: the
// work holds tensors whose Python objects need the GIL to die, and a thread
// that takes the GIL while the interpreter finalizes is ended with a forced
// unwind (std::terminate through a noexcept destructor). Completed works
// are retired instead and released by ReleaseRetired on a caller's thread
// (each new operation) or by the destructor. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <c10/util/intrusive_ptr.h>

namespace tessera::torch_backend {

class TesseraWork;

class CompletionThread {
 public:
  CompletionThread();
  ~CompletionThread();
  CompletionThread(const CompletionThread&) = delete;
  CompletionThread& operator=(const CompletionThread&) = delete;

  void Enqueue(c10::intrusive_ptr<TesseraWork> work);
  // Drops the works this thread completed (call from a Python-side thread).
  void ReleaseRetired();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<TesseraWork>> queue_;
  std::deque<c10::intrusive_ptr<TesseraWork>> retired_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::torch_backend
