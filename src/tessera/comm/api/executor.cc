#include "tessera/comm/api/executor.h"

#include <sched.h>

#include <utility>

#include "tessera/base/logging.h"

namespace tessera::comm {

Executor::Executor(Runner runner, bool batch_progress)
    : runner_(std::move(runner)), batch_progress_(batch_progress) {}

Executor::~Executor() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Without a thread, nothing can be queued (Submit starts it).
}

void Executor::Submit(std::shared_ptr<WorkState> state) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cancelled_.ok() || stop_) {
      state->Complete(cancelled_.ok() ? Aborted("communicator is shutting down") : cancelled_);
      return;
    }
    queue_.push_back(std::move(state));
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }
  cv_.notify_one();
}

Status Executor::RunBlocking(const CollectiveArgs& args) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cancelled_.ok()) return cancelled_;
    if (queue_.empty() && !busy_) {
      busy_ = true;
      lock.unlock();
      Status st = runner_(args);
      lock.lock();
      busy_ = false;
      const bool wake_thread = thread_.joinable();
      const bool wake_idle = queue_.empty() && idle_waiters_ > 0;
      lock.unlock();
      if (wake_thread) cv_.notify_all();
      if (wake_idle) idle_cv_.notify_all();
      return st;
    }
  }
  auto state = std::make_shared<WorkState>();
  state->args = args;
  Work work(state);
  Submit(std::move(state));
  return work.Wait();
}

void Executor::Cancel(const Status& status) {
  std::deque<std::shared_ptr<WorkState>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_.ok()) cancelled_ = status;
    dropped.swap(queue_);
  }
  for (auto& w : dropped) w->Complete(status);
  cv_.notify_all();
  idle_cv_.notify_all();
}

void Executor::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  ++idle_waiters_;
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  --idle_waiters_;
}

void Executor::Loop() {
  if (batch_progress_) {
    const sched_param param{};
    // (this thread; unprivileged, and harmless if refused: normal policy)
    if (sched_setscheduler(0, SCHED_BATCH, &param) != 0) TLOG(WARN, "progress thread: SCHED_BATCH refused");
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return !busy_ && (stop_ || !queue_.empty()); });
    if (queue_.empty()) return;  // stopping and drained
    std::shared_ptr<WorkState> w = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    {
      std::lock_guard<std::mutex> wl(w->mu);
      w->started = std::chrono::steady_clock::now();
    }
    Status st = runner_(w->args);
    w->Complete(std::move(st));
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace tessera::comm
