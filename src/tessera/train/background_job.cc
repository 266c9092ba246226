#include "tessera/train/background_job.h"

#include <chrono>

#include "tessera/base/check.h"

namespace tessera::train {

BackgroundJob::~BackgroundJob() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundJob::Start(std::function<Status()> task) {
  TESSERA_CHECK(!thread_.joinable(), "BackgroundJob::Start while a task runs (Wait first)");
  thread_ = std::thread([this, task = std::move(task)] {
    const auto t0 = std::chrono::steady_clock::now();
    status_ = task();
    pending_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

Status BackgroundJob::Wait() {
  if (thread_.joinable()) {
    thread_.join();
    seconds_ += pending_s_;
    pending_s_ = 0;
  }
  Status st = status_;
  status_ = Status::Ok();
  return st;
}

}  // namespace tessera::train
