// Waiting in the tcp transport: poll(2) over the streams that can make
// progress (readable where a receive is posted, writable where a frame is
// queued) plus an eventfd that Abort() signals, in bounded slices so the
// caller re-checks its deadline and abort flags between them. No busy
// waiting: a rank sleeps in the kernel until a socket is ready.
// Thread-safety: Wait() from the owning executor thread; Wake() from any
// thread.
#pragma once

#include <poll.h>

#include <cstdint>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::comm::transport::tcp {

class Waiter {
 public:
  Waiter();
  ~Waiter();
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  void Clear() { fds_.clear(); }
  void Add(int fd, short events) { fds_.push_back(pollfd{fd, events, 0}); }
  // Sleeps until a registered fd is ready, Wake() is called, or timeout_ms
  // passes. Returns the number of ready fds (0 on timeout or wake-up).
  StatusOr<int> Wait(int timeout_ms);
  // Interrupts a Wait (now or the next one).
  void Wake();

 private:
  int event_fd_ = -1;
  std::vector<pollfd> fds_;
};

}  // namespace tessera::comm::transport::tcp
