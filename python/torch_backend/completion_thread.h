// CompletionThread: completes the TesseraWorks whose Future was asked for
// (DDP's reducer, comm hooks, get_future()), in the order they were handed
// over (a process group's operations finish in issue order), so Future
// callbacks run even when nobody calls wait(). One per process group;
// the destructor completes what is queued (each bounded by its operation's
// deadline) and joins. Thread-safe.
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

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<TesseraWork>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::torch_backend
