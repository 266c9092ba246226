// BackgroundJob: at most one task at a time on a background thread — the
// writer of an asynchronous checkpoint. Start() runs a task (the previous
// one must have been waited for); Wait() joins it and returns its Status
// (OK when none ran) and adds its duration to seconds(). The destructor
// joins a task still running. Not thread-safe: one owner thread.
#pragma once

#include <functional>
#include <thread>

#include "tessera/base/status.h"

namespace tessera::train {

class BackgroundJob {
 public:
  BackgroundJob() = default;
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  void Start(std::function<Status()> task);
  Status Wait();
  double seconds() const { return seconds_; }  // all finished tasks

 private:
  std::thread thread_;
  Status status_;
  double seconds_ = 0, pending_s_ = 0;
};

}  // namespace tessera::train
