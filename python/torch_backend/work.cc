// TesseraWork and CompletionThread: see work.h and completion_thread.h.
#include "python/torch_backend/work.h"

#include <exception>
#include <stdexcept>
#include <utility>

#include <ATen/core/jit_type.h>
#include <fmt/format.h>

#include "python/torch_backend/completion_thread.h"

namespace tessera::torch_backend {

namespace {

// Slack beyond the operation's own deadline before a default wait gives up
// (the communicator fails the operation at its deadline; this only guards
// against a missed wake-up).
constexpr std::chrono::milliseconds kSlack{30000};

}  // namespace

TesseraWork::TesseraWork(int rank, ::c10d::OpType type, std::string what, comm::Work work, FinishFn finish,
                         std::vector<at::Tensor> outputs, std::chrono::milliseconds op_timeout,
                         CompletionThread* completer)
    : ::c10d::Work(rank, type),
      what_(std::move(what)),
      work_(std::move(work)),
      finish_(std::move(finish)),
      outputs_(std::move(outputs)),
      op_timeout_(op_timeout),
      completer_(completer) {}

TesseraWork::~TesseraWork() {
  // The communicator may still write into buffers this work keeps alive
  // (staging copies held by finish_): never free them under it.
  if (!work_.Test()) (void)work_.Wait(op_timeout_ + kSlack);
}

bool TesseraWork::Complete(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  const std::chrono::milliseconds limit = timeout.count() > 0 ? timeout : op_timeout_ + kSlack;
  Status st = work_.Wait(limit);
  if (!st.ok() && !work_.Test()) return false;  // our wait ran out, the operation still runs
  std::call_once(once_, [&] {
    std::exception_ptr error;
    if (st.ok()) {
      try {
        if (finish_) finish_();
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(
            std::runtime_error(fmt::format("tessera backend: {} failed after the transfer: {}", what_, e.what())));
      }
    } else {
      error = std::make_exception_ptr(std::runtime_error(fmt::format("tessera backend: {}: {}", what_, st.ToString())));
    }
    finish_ = nullptr;  // releases staging buffers
    finish(error);
    c10::intrusive_ptr<c10::ivalue::Future> future;
    {
      std::lock_guard<std::mutex> lock(future_mu_);
      future = future_;
      future_done_ = true;
    }
    if (future) {
      if (error) {
        future->setError(error);
      } else {
        future->markCompleted(c10::IValue(outputs_));
      }
    }
  });
  return true;
}

bool TesseraWork::isCompleted() {
  if (work_.Test()) Complete(std::chrono::milliseconds(1));
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool TesseraWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr TesseraWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

bool TesseraWork::wait(std::chrono::milliseconds timeout) {
  if (!Complete(timeout)) {
    throw std::runtime_error(fmt::format(
        "tessera backend: {} did not finish within the {} ms wait (it keeps running until the process group's "
        "timeout of {} ms)",
        what_, timeout.count(), op_timeout_.count()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TesseraWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  bool mark_now = false, hand_over = false;
  {
    std::lock_guard<std::mutex> lock(future_mu_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
      mark_now = future_done_;
      hand_over = !future_done_;
    }
    future = future_;
  }
  if (mark_now) {
    std::exception_ptr error = exception();
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(outputs_));
    }
  }
  if (hand_over) completer_->Enqueue(c10::intrusive_ptr<TesseraWork>::reclaim_copy(this));
  return future;
}

CompletionThread::CompletionThread() : thread_([this] { Loop(); }) {}

CompletionThread::~CompletionThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ReleaseRetired();
}

void CompletionThread::Enqueue(c10::intrusive_ptr<TesseraWork> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void CompletionThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    c10::intrusive_ptr<TesseraWork> work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // Bounded by the operation's deadline; retried if only our wait ran out.
    while (!work->Complete(std::chrono::milliseconds(0))) {
    }
    lock.lock();
    retired_.push_back(std::move(work));  // released on a caller's thread (see header)
  }
}

void CompletionThread::ReleaseRetired() {
  std::deque<c10::intrusive_ptr<TesseraWork>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(retired_);
  }
}

}  // namespace tessera::torch_backend
