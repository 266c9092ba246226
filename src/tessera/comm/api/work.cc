#include "tessera/comm/api/work.h"

namespace tessera::comm {

void WorkState::Complete(Status st) {
  {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(st);
    if (started != std::chrono::steady_clock::time_point{}) finished = std::chrono::steady_clock::now();
    done = true;
  }
  cv.notify_all();
}

Work Work::Done(Status status) {
  auto state = std::make_shared<WorkState>();
  state->status = std::move(status);
  state->done = true;
  return Work(std::move(state));
}

Status Work::Wait(std::chrono::milliseconds timeout) const {
  if (!state_) return Status::Ok();
  std::unique_lock<std::mutex> lock(state_->mu);
  if (timeout == kWaitForever) {
    state_->cv.wait(lock, [&] { return state_->done; });
  } else if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done; })) {
    return DeadlineExceeded("{} (count {}) not complete after {} ms (still running; Abort() the communicator to "
                            "stop it)",
                            CollectiveName(state_->args.kind), state_->args.count, timeout.count());
  }
  return state_->status;
}

double Work::run_seconds() const {
  if (!state_) return 0.0;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->done || state_->started == std::chrono::steady_clock::time_point{}) return 0.0;
  return std::chrono::duration<double>(state_->finished - state_->started).count();
}

bool Work::Test() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

}  // namespace tessera::comm
