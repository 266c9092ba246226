#include "tessera/comm/transport/tcp/waiter.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera::comm::transport::tcp {

Waiter::Waiter() { event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

Waiter::~Waiter() {
  if (event_fd_ >= 0) close(event_fd_);
}

StatusOr<int> Waiter::Wait(int timeout_ms) {
  fds_.push_back(pollfd{event_fd_, POLLIN, 0});
  int n = poll(fds_.data(), fds_.size(), timeout_ms);
  const bool woken = fds_.back().revents != 0;
  fds_.pop_back();
  if (woken) {
    uint64_t v;
    while (read(event_fd_, &v, sizeof(v)) > 0) {
    }
    --n;
  }
  if (n < 0) {
    if (errno == EINTR) return 0;
    return IoError("poll failed: {}", std::strerror(errno));
  }
  return n;
}

void Waiter::Wake() {
  if (event_fd_ < 0) return;
  uint64_t one = 1;
  ssize_t r = write(event_fd_, &one, sizeof(one));
  (void)r;
}

}  // namespace tessera::comm::transport::tcp
