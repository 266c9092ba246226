// TcpStoreServer: a single poll() thread over non-blocking sockets; see
// tcp_store.h for the contract and store_wire.h for the protocol.
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/comm/auth.h"
#include "tessera/comm/tcp_store.h"

namespace tessera::comm {

using wire::Clock;
using wire::Deadline;

namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr uint64_t kMaxWaitMs = uint64_t{7} * 24 * 3600 * 1000;

struct Conn {
  int fd = -1;
  std::string peer;
  std::string client_info;
  bool authed = false;
  bool close_after_flush = false;
  bool dead = false;
  Bytes server_nonce;
  Deadline auth_deadline;
  Bytes in;
  Bytes out;
  size_t out_off = 0;
  // The request parked until its keys exist (Get/Wait).
  bool parked = false;
  uint32_t seq = 0;
  wire::Op op = wire::Op::kGet;
  std::vector<std::string> keys;
  uint64_t timeout_ms = 0;
  Deadline park_deadline;
};

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(std::string token, TcpStoreServerOptions options) : token_(std::move(token)), options_(options) {}
  ~Impl() { Stop(); }

  StatusOr<int> Start(const std::string& host, int port);
  void Stop();

  std::atomic<int> port_{0};
  std::string address_;
  std::atomic<int64_t> accepted_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> open_{0};

 private:
  Status Bind(const std::string& host, int port);
  void Loop();
  void AcceptAll();
  void OnReadable(Conn& c);
  void Flush(Conn& c);
  void ProcessFrames(Conn& c);
  void HandleAuth(Conn& c, const Bytes& payload);
  void HandleRequest(Conn& c, const Bytes& payload);
  bool TryCompleteParked(Conn& c, bool expired);
  void WakeParked();
  void Enqueue(Conn& c, const Bytes& frame);
  void ReplyError(Conn& c, uint32_t seq, StatusCode code, const std::string& message);
  void Refuse(Conn& c, const std::string& reason);
  void CloseConn(Conn& c);
  std::string MissingKeys(const std::vector<std::string>& keys) const;

  std::string token_;
  TcpStoreServerOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  bool started_ = false;
  Deadline accept_paused_until_{};
  std::vector<std::unique_ptr<Conn>> conns_;
  std::unordered_map<std::string, Bytes> data_;
};

Status TcpStoreServer::Impl::Bind(const std::string& host, int port) {
  // Empty host: every interface, IPv6 dual-stack if available, else IPv4.
  std::vector<std::pair<int, std::string>> candidates;
  if (host.empty()) {
    candidates = {{AF_INET6, "::"}, {AF_INET, "0.0.0.0"}};
  } else {
    candidates = {{AF_UNSPEC, host}};
  }
  std::string last_error = "no addresses";
  for (const auto& [family, name] : candidates) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string serv = std::to_string(port);
    int gai = ::getaddrinfo(name.c_str(), serv.c_str(), &hints, &res);
    if (gai != 0) {
      last_error = fmt::format("cannot resolve '{}': {}", name, ::gai_strerror(gai));
      continue;
    }
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        last_error = std::strerror(errno);
        continue;
      }
      int one = 1, zero = 0;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (ai->ai_family == AF_INET6 && host.empty()) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, options_.backlog) == 0) {
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
        int bound = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                             : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
        ::freeaddrinfo(res);
        listen_fd_ = fd;
        port_ = bound;
        address_ = "tcp://" + wire::JoinHostPort(host.empty() ? "*" : host, bound);
        return Status::Ok();
      }
      last_error = std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(res);
  }
  return Unavailable("store server: cannot listen on {}: {}", wire::JoinHostPort(host.empty() ? "*" : host, port),
                     last_error);
}

StatusOr<int> TcpStoreServer::Impl::Start(const std::string& host, int port) {
  if (started_) return FailedPrecondition("store server {} already started", address_);
  TESSERA_RETURN_IF_ERROR(ValidateJobToken(token_, "the store server's token"));
  if (port < 0 || port > 65535) return InvalidArgument("store server: port {} out of range 0..65535", port);
  TESSERA_RETURN_IF_ERROR(Bind(host, port));
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return IoError("store server: eventfd: {}", std::strerror(errno));
  }
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
  TLOG(INFO, "store server listening on {} (token fingerprint {})", address_, TokenFingerprint(token_));
  return port_.load();
}

void TcpStoreServer::Impl::Stop() {
  if (!started_) return;
  uint64_t one = 1;
  while (::write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  thread_.join();
  for (auto& c : conns_) CloseConn(*c);
  conns_.clear();
  ::close(listen_fd_);
  ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  started_ = false;
}

void TcpStoreServer::Impl::Loop() {
  std::vector<pollfd> fds;
  for (;;) {
    Deadline now = Clock::now();
    Deadline next = now + std::chrono::seconds(1);
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, static_cast<short>(now >= accept_paused_until_ ? POLLIN : 0), 0});
    for (auto& c : conns_) {
      short ev = 0;
      const size_t limit = c->authed ? options_.max_frame_bytes : wire::kMaxHandshakeFrame;
      const bool backlog = (c->out.size() - c->out_off) > limit || (c->parked && c->in.size() > limit + 4);
      if (!c->close_after_flush && !backlog) ev |= POLLIN;
      if (c->out_off < c->out.size()) ev |= POLLOUT;
      fds.push_back({c->fd, ev, 0});
      if (!c->authed) next = std::min(next, c->auth_deadline);
      if (c->parked) next = std::min(next, c->park_deadline);
    }
    if (now < accept_paused_until_) next = std::min(next, accept_paused_until_);
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait_ms, 0)));
    if (rc < 0 && errno != EINTR) {
      TLOG(ERROR, "store server {}: poll failed: {}", address_, std::strerror(errno));
      return;
    }
    if (rc > 0) {
      if (fds[0].revents != 0) return;  // Stop()
      // conns_ may grow during AcceptAll; only the polled ones have entries.
      const size_t polled = fds.size() - 2;
      for (size_t i = 0; i < polled; ++i) {
        Conn& c = *conns_[i];
        short re = fds[i + 2].revents;
        if (re & (POLLIN | POLLHUP | POLLERR)) OnReadable(c);
        if (!c.dead && (re & POLLOUT)) Flush(c);
      }
      if (fds[1].revents & POLLIN) AcceptAll();
    }
    now = Clock::now();
    for (auto& c : conns_) {
      if (c->dead) continue;
      if (!c->authed && !c->close_after_flush && now >= c->auth_deadline) {
        Refuse(*c, fmt::format("did not authenticate within {} ms", options_.auth_timeout.count()));
      }
      if (c->parked && now >= c->park_deadline) {
        TryCompleteParked(*c, /*expired=*/true);
        if (!c->dead) ProcessFrames(*c);
      }
    }
    for (auto& c : conns_) {
      if (!c->dead && c->close_after_flush && c->out_off >= c->out.size()) CloseConn(*c);
    }
    conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->dead; }), conns_.end());
  }
}

void TcpStoreServer::Impl::AcceptAll() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        TLOG(ERROR, "store server {}: accept: {} ({} connections open); pausing accepts for 100 ms", address_,
             std::strerror(errno), conns_.size());
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    wire::SetNoDelay(fd);
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    conn->peer = wire::PeerAddress(fd);
    conn->auth_deadline = Clock::now() + options_.auth_timeout;
    auto nonce = RandomBytes(kNonceBytes);
    if (!nonce.ok()) {
      TLOG(ERROR, "store server {}: {}", address_, nonce.status().ToString());
      ::close(fd);
      continue;
    }
    conn->server_nonce = *nonce;
    Enqueue(*conn, wire::Writer().U32(wire::kMagic).U8(wire::kVersion).Blob(conn->server_nonce).Frame());
    conns_.push_back(std::move(conn));
  }
}

void TcpStoreServer::Impl::OnReadable(Conn& c) {
  uint8_t buf[kReadChunk];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.insert(c.in.end(), buf, buf + n);
      if (static_cast<size_t>(n) < sizeof(buf)) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // EOF or error: the client went away.
    if (!c.authed && !c.close_after_flush) {
      Refuse(c, n == 0 ? "closed the connection before authenticating" : std::strerror(errno));
    }
    CloseConn(c);
    return;
  }
  ProcessFrames(c);
}

void TcpStoreServer::Impl::ProcessFrames(Conn& c) {
  size_t off = 0;
  while (!c.dead && !c.parked && !c.close_after_flush && c.in.size() - off >= 4) {
    const uint32_t n = wire::LoadBe32(c.in.data() + off);
    const size_t limit = c.authed ? options_.max_frame_bytes : wire::kMaxHandshakeFrame;
    if (n > limit) {
      Refuse(c, fmt::format("sent a frame of {} bytes, above the {} limit of {} bytes", n,
                            c.authed ? "frame" : "handshake", limit));
      break;
    }
    if (c.in.size() - off < 4 + size_t{n}) break;
    Bytes payload(c.in.begin() + off + 4, c.in.begin() + off + 4 + n);
    off += 4 + n;
    if (c.authed) {
      HandleRequest(c, payload);
    } else {
      HandleAuth(c, payload);
    }
  }
  if (c.dead || c.close_after_flush) {
    c.in.clear();
  } else {
    c.in.erase(c.in.begin(), c.in.begin() + off);
  }
}

void TcpStoreServer::Impl::HandleAuth(Conn& c, const Bytes& payload) {
  wire::Reader r(payload);
  uint32_t magic = 0;
  uint8_t version = 0;
  Bytes client_nonce, proof;
  std::string info;
  if (!r.U32(&magic) || magic != wire::kMagic) return Refuse(c, "is not a Tessera store client (bad magic)");
  if (!r.U8(&version) || version != wire::kVersion) {
    return Refuse(c, fmt::format("speaks protocol version {}, this server {}", version, wire::kVersion));
  }
  if (!r.Blob(&client_nonce) || !r.Str(&info) || !r.Blob(&proof) || !r.AtEnd() ||
      client_nonce.size() != kNonceBytes || info.size() > wire::kMaxClientInfo) {
    return Refuse(c, "sent a malformed authentication message");
  }
  c.client_info = wire::Sanitize(info, wire::kMaxClientInfo);
  if (!MacEqual(proof, ClientProof(token_, c.server_nonce, client_nonce, info))) {
    return Refuse(c, "wrong job token (its proof does not match this job's token)");
  }
  c.authed = true;
  ++accepted_;
  ++open_;
  TLOG(DEBUG, "store server {}: authenticated {} ({})", address_, c.peer, c.client_info);
  Enqueue(c, wire::Writer().U8(0).Blob(ServerProof(token_, c.server_nonce, client_nonce)).Frame());
}

void TcpStoreServer::Impl::Refuse(Conn& c, const std::string& reason) {
  ++refused_;
  TLOG(WARN, "store server {}: {} connection from {}{}: {}", address_, c.authed ? "dropped" : "refused", c.peer,
       c.client_info.empty() ? "" : " (" + c.client_info + ")", reason);
  if (c.dead) return;
  Enqueue(c, wire::Writer().U8(1).Str("refused: " + reason).Frame());
  c.close_after_flush = true;  // ProcessFrames drops any further input
}

void TcpStoreServer::Impl::HandleRequest(Conn& c, const Bytes& payload) {
  wire::Reader r(payload);
  uint32_t seq = 0;
  uint8_t op = 0;
  if (!r.U32(&seq) || !r.U8(&op)) return ReplyError(c, seq, StatusCode::kInvalidArgument, "malformed request");
  std::string key;
  switch (static_cast<wire::Op>(op)) {
    case wire::Op::kSet: {
      Bytes value;
      if (!r.Str(&key) || !r.Blob(&value) || !r.AtEnd()) break;
      data_[key] = std::move(value);
      Enqueue(c, wire::Writer().U32(seq).U8(0).Frame());
      WakeParked();
      return;
    }
    case wire::Op::kAdd: {
      int64_t delta = 0;
      if (!r.Str(&key) || !r.I64(&delta) || !r.AtEnd()) break;
      int64_t current = 0;
      auto it = data_.find(key);
      if (it != data_.end() && !ParseCounter(it->second, &current)) {
        return ReplyError(c, seq, StatusCode::kInvalidArgument,
                          fmt::format("Add on key '{}' which holds a non-counter value ({} bytes)", key,
                                      it->second.size()));
      }
      if (__builtin_add_overflow(current, delta, &current)) {
        return ReplyError(c, seq, StatusCode::kOutOfRange,
                          fmt::format("Add({}) on key '{}' overflows int64", delta, key));
      }
      data_[key] = StringToBytes(std::to_string(current));
      Enqueue(c, wire::Writer().U32(seq).U8(0).I64(current).Frame());
      WakeParked();
      return;
    }
    case wire::Op::kDelete: {
      if (!r.Str(&key) || !r.AtEnd()) break;
      data_.erase(key);
      Enqueue(c, wire::Writer().U32(seq).U8(0).Frame());
      return;
    }
    case wire::Op::kGet:
    case wire::Op::kWait: {
      std::vector<std::string> keys;
      if (static_cast<wire::Op>(op) == wire::Op::kGet) {
        if (!r.Str(&key)) break;
        keys.push_back(std::move(key));
      } else {
        uint32_t n = 0;
        if (!r.U32(&n)) break;
        bool ok = true;
        for (uint32_t i = 0; i < n && ok; ++i) {
          ok = r.Str(&key);
          if (ok) keys.push_back(key);
        }
        if (!ok) break;
      }
      uint64_t timeout_ms = 0;
      if (!r.U64(&timeout_ms) || !r.AtEnd()) break;
      timeout_ms = std::min(timeout_ms, kMaxWaitMs);
      c.parked = true;
      c.seq = seq;
      c.op = static_cast<wire::Op>(op);
      c.keys = std::move(keys);
      c.timeout_ms = timeout_ms;
      c.park_deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
      TryCompleteParked(c, /*expired=*/timeout_ms == 0);
      return;
    }
  }
  ReplyError(c, seq, StatusCode::kInvalidArgument, fmt::format("malformed request (op {})", op));
}

std::string TcpStoreServer::Impl::MissingKeys(const std::vector<std::string>& keys) const {
  std::string missing;
  for (const std::string& k : keys) {
    if (data_.count(k) == 0) missing += (missing.empty() ? "'" : ", '") + k + "'";
  }
  return missing;
}

bool TcpStoreServer::Impl::TryCompleteParked(Conn& c, bool expired) {
  std::string missing = MissingKeys(c.keys);
  if (!missing.empty() && !expired) return false;
  c.parked = false;
  if (!missing.empty()) {
    ReplyError(c, c.seq, StatusCode::kDeadlineExceeded,
               c.op == wire::Op::kGet
                   ? fmt::format("key {} was not set within {} ms", missing, c.timeout_ms)
                   : fmt::format("key(s) {} not set within {} ms", missing, c.timeout_ms));
  } else if (c.op == wire::Op::kGet) {
    Enqueue(c, wire::Writer().U32(c.seq).U8(0).Blob(data_.at(c.keys[0])).Frame());
  } else {
    Enqueue(c, wire::Writer().U32(c.seq).U8(0).Frame());
  }
  c.keys.clear();
  return true;
}

void TcpStoreServer::Impl::WakeParked() {
  for (auto& c : conns_) {
    if (!c->dead && c->parked && TryCompleteParked(*c, false)) ProcessFrames(*c);
  }
}

void TcpStoreServer::Impl::ReplyError(Conn& c, uint32_t seq, StatusCode code, const std::string& message) {
  Enqueue(c, wire::Writer().U32(seq).U8(static_cast<uint8_t>(code)).Str(message).Frame());
}

void TcpStoreServer::Impl::Enqueue(Conn& c, const Bytes& frame) {
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
  c.out.insert(c.out.end(), frame.begin(), frame.end());
  Flush(c);
}

void TcpStoreServer::Impl::Flush(Conn& c) {
  while (!c.dead && c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    CloseConn(c);  // peer gone
    return;
  }
}

void TcpStoreServer::Impl::CloseConn(Conn& c) {
  if (c.dead) return;
  ::close(c.fd);
  if (c.authed) --open_;
  c.fd = -1;
  c.dead = true;
  c.parked = false;
}

TcpStoreServer::TcpStoreServer(std::string token, TcpStoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(token), options)) {}
TcpStoreServer::~TcpStoreServer() = default;
StatusOr<int> TcpStoreServer::Start(const std::string& host, int port) { return impl_->Start(host, port); }
void TcpStoreServer::Stop() { impl_->Stop(); }
int TcpStoreServer::port() const { return impl_->port_.load(); }
std::string TcpStoreServer::Address() const { return impl_->address_; }
int64_t TcpStoreServer::accepted_connections() const { return impl_->accepted_.load(); }
int64_t TcpStoreServer::refused_connections() const { return impl_->refused_.load(); }
int64_t TcpStoreServer::open_connections() const { return impl_->open_.load(); }

}  // namespace tessera::comm
