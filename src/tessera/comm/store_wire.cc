// Frame codec and deadline-bounded socket I/O for the TCP store.
#include "tessera/comm/store_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tessera::comm::wire {
namespace {

int MillisLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on fd; false on timeout. Retries EINTR.
StatusOr<bool> PollFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, MillisLeft(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return IoError("poll: {}", std::strerror(errno));
  }
}

}  // namespace

Writer& Writer::U8(uint8_t v) {
  payload_.push_back(v);
  return *this;
}

Writer& Writer::U32(uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) payload_.push_back(static_cast<uint8_t>(v >> s));
  return *this;
}

Writer& Writer::U64(uint64_t v) {
  for (int s = 56; s >= 0; s -= 8) payload_.push_back(static_cast<uint8_t>(v >> s));
  return *this;
}

Writer& Writer::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  payload_.insert(payload_.end(), s.begin(), s.end());
  return *this;
}

Writer& Writer::Blob(const Bytes& b) {
  U32(static_cast<uint32_t>(b.size()));
  payload_.insert(payload_.end(), b.begin(), b.end());
  return *this;
}

Bytes Writer::Frame() const {
  Bytes out;
  out.reserve(4 + payload_.size());
  uint32_t n = static_cast<uint32_t>(payload_.size());
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(n >> s));
  out.insert(out.end(), payload_.begin(), payload_.end());
  return out;
}

uint32_t LoadBe32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

bool Reader::Take(size_t n, const uint8_t** p) {
  if (data_.size() - pos_ < n) return false;
  *p = data_.data() + pos_;
  pos_ += n;
  return true;
}

bool Reader::U8(uint8_t* v) {
  const uint8_t* p;
  if (!Take(1, &p)) return false;
  *v = *p;
  return true;
}

bool Reader::U32(uint32_t* v) {
  const uint8_t* p;
  if (!Take(4, &p)) return false;
  *v = LoadBe32(p);
  return true;
}

bool Reader::U64(uint64_t* v) {
  const uint8_t* p;
  if (!Take(8, &p)) return false;
  *v = (uint64_t{LoadBe32(p)} << 32) | LoadBe32(p + 4);
  return true;
}

bool Reader::I64(int64_t* v) {
  uint64_t u;
  if (!U64(&u)) return false;
  *v = static_cast<int64_t>(u);
  return true;
}

bool Reader::Str(std::string* s) {
  uint32_t n;
  const uint8_t* p;
  if (!U32(&n) || !Take(n, &p)) return false;
  s->assign(reinterpret_cast<const char*>(p), n);
  return true;
}

bool Reader::Blob(Bytes* b) {
  uint32_t n;
  const uint8_t* p;
  if (!U32(&n) || !Take(n, &p)) return false;
  b->assign(p, p + n);
  return true;
}

std::string JoinHostPort(std::string_view host, int port) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return JoinHostPort(host, std::atoi(serv));
}

std::string Sanitize(std::string_view text, size_t max_chars) {
  std::string out;
  for (char c : text.substr(0, max_chars)) out += (c >= ' ' && c <= '~') ? c : '?';
  if (text.size() > max_chars) out += "...";
  return out;
}

Status SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return IoError("fcntl(O_NONBLOCK): {}", std::strerror(errno));
  }
  return Status::Ok();
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status SendAll(int fd, const Bytes& data, Deadline deadline, std::string_view what) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      TESSERA_ASSIGN_OR_RETURN(bool ready, PollFor(fd, POLLOUT, deadline));
      if (!ready) return DeadlineExceeded("{}: send timed out ({} of {} bytes sent)", what, off, data.size());
      continue;
    }
    return Unavailable("{}: send failed: {}", what, std::strerror(errno));
  }
  return Status::Ok();
}

namespace {

Status RecvExact(int fd, uint8_t* buf, size_t n, Deadline deadline, std::string_view what) {
  size_t off = 0;
  while (off < n) {
    ssize_t r = ::recv(fd, buf + off, n - off, 0);
    if (r > 0) {
      off += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Unavailable("{}: connection closed by the peer", what);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      TESSERA_ASSIGN_OR_RETURN(bool ready, PollFor(fd, POLLIN, deadline));
      if (!ready) return DeadlineExceeded("{}: no reply in time ({} of {} bytes received)", what, off, n);
      continue;
    }
    return Unavailable("{}: receive failed: {}", what, std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

Status RecvFrame(int fd, size_t max_payload, Deadline deadline, Bytes* payload, std::string_view what) {
  uint8_t header[4];
  TESSERA_RETURN_IF_ERROR(RecvExact(fd, header, 4, deadline, what));
  uint32_t n = LoadBe32(header);
  if (n > max_payload) {
    return DataLoss("{}: received a frame of {} bytes, above the limit of {} bytes", what, n, max_payload);
  }
  payload->resize(n);
  return RecvExact(fd, payload->data(), n, deadline, what);
}

StatusOr<int> ConnectOnce(const std::string& host, int port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string serv = std::to_string(port);
  int gai = ::getaddrinfo(host.c_str(), serv.c_str(), &hints, &res);
  if (gai != 0) return Unavailable("cannot resolve '{}': {}", host, ::gai_strerror(gai));
  std::string last_error = "no addresses";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      auto ready = PollFor(fd, POLLOUT, deadline);
      int err = 0;
      socklen_t len = sizeof(err);
      if (!ready.ok() || !*ready) {
        err = ETIMEDOUT;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc == 0) {
      ::freeaddrinfo(res);
      SetNoDelay(fd);
      return fd;
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return Unavailable("connect to {} failed: {}", JoinHostPort(host, port), last_error);
}

}  // namespace tessera::comm::wire
