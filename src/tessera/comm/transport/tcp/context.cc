#include "tessera/comm/transport/tcp/context.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/comm/transport/shm/waiter.h"

namespace tessera::comm::transport::tcp {
namespace {

base::Knob<int64_t> kStreamsKnob("TESSERA_TCP_STREAMS", 2, "tcp transport: sockets per peer (chunks of large "
                                                         "messages go to whichever socket is free)");
base::Knob<int64_t> kChunkKbKnob("TESSERA_TCP_CHUNK_KB", 512, "tcp transport: frame (chunk) size in KiB");
base::Knob<bool> kChecksumKnob("TESSERA_TCP_CHECKSUM", true,
                               "tcp transport: XXH3 checksum on every frame; corrupt frames are resent (0: off)");
base::Knob<int64_t> kRcvLowatKbKnob("TESSERA_TCP_RCVLOWAT_KB", 256,
                                    "tcp transport: wake for a large frame only once this many KiB (or the rest of "
                                    "the frame) arrived (SO_RCVLOWAT; 0: on every segment)");
base::Knob<std::string> kIfnameKnob("TESSERA_SOCKET_IFNAME", "",
                                    "tcp transport: only advertise addresses of this network interface");

using Clock = std::chrono::steady_clock;

int MsLeft(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

std::vector<std::string> LocalAddresses() {
  std::vector<std::string> out;
  const std::string want = kIfnameKnob.Get();
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
      if (!want.empty() ? want != a->ifa_name : (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof(buf));
      out.push_back(buf);
    }
    freeifaddrs(list);
  }
  if (want.empty() || want == "lo") out.push_back("127.0.0.1");
  return out;
}

Status SetBlocking(int fd, bool blocking) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return IoError("fcntl: {}", std::strerror(errno));
  flags = blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0) return IoError("fcntl: {}", std::strerror(errno));
  return Status::Ok();
}

// Writes/reads exactly n bytes on a non-blocking fd before the deadline.
Status WriteAll(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return IoError("send failed: {}", std::strerror(errno));
    }
    pollfd pfd{fd, POLLOUT, 0};
    if (poll(&pfd, 1, std::min(MsLeft(deadline), 100)) == 0 && MsLeft(deadline) == 0) {
      return DeadlineExceeded("send timed out");
    }
  }
  return Status::Ok();
}

Status ReadAll(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Unavailable("connection closed during the handshake");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return IoError("recv failed: {}", std::strerror(errno));
    }
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, std::min(MsLeft(deadline), 100)) == 0 && MsLeft(deadline) == 0) {
      return DeadlineExceeded("handshake timed out");
    }
  }
  return Status::Ok();
}

StatusOr<int> ConnectTo(const std::string& addr, int port, Clock::time_point deadline) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) return InvalidArgument("bad address '{}'", addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return IoError("socket: {}", std::strerror(errno));
  TuneSocket(fd);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS) {
    Status st = Unavailable("connect to {}:{} failed: {}", addr, port, std::strerror(errno));
    close(fd);
    return st;
  }
  pollfd pfd{fd, POLLOUT, 0};
  const int ready = poll(&pfd, 1, std::min(MsLeft(deadline), 5000));
  int err = 0;
  socklen_t len = sizeof(err);
  if (ready <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    Status st = Unavailable("connect to {}:{} failed: {}", addr, port, ready <= 0 ? "timed out" : std::strerror(err));
    close(fd);
    return st;
  }
  return fd;
}

std::string Hex(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

bool Unhex(const std::string& s, uint8_t* out, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<Context>> Context::Create(Store& store, int rank, int size, const Options& options,
                                                   Timeout timeout) {
  std::unique_ptr<Context> ctx(new Context());
  ctx->rank_ = rank;
  ctx->size_ = size;
  ctx->streams_ = static_cast<int>(std::clamp<int64_t>(options.streams ? options.streams : kStreamsKnob.Get(), 1, 16));
  ctx->checksum_ = options.checksum < 0 ? kChecksumKnob.Get() : options.checksum != 0;
  const int nstreams = ctx->streams_ + 1;  // data streams + the control stream
  const size_t chunk =
      options.chunk_bytes ? options.chunk_bytes : static_cast<size_t>(std::max<int64_t>(kChunkKbKnob.Get(), 4)) << 10;
  ctx->hosts_ = options.hosts;
  ctx->hosts_.resize(size, "?");
  const auto deadline = Clock::now() + timeout;
  auto where = [&](Status st) {
    return st.WithContext(fmt::format("rank {} of {} setting up the tcp transport", rank, size));
  };

  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (lfd < 0) return where(IoError("socket: {}", std::strerror(errno)));
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t slen = sizeof(sa);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(lfd, 1024) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &slen) != 0) {
    Status st = IoError("cannot listen: {}", std::strerror(errno));
    close(lfd);
    return where(st);
  }
  const int port = ntohs(sa.sin_port);
  uint8_t* secret = ctx->secret_;
  std::random_device rd;
  for (int i = 0; i < 16; ++i) secret[i] = static_cast<uint8_t>(rd());
  std::string addrs;
  for (const std::string& a : LocalAddresses()) addrs += (addrs.empty() ? "" : ",") + a;
  Status st = store.SetString(fmt::format("tcp/{}", rank), fmt::format("{}|{}|{}", addrs, port, Hex(secret, 16)));
  if (!st.ok()) {
    close(lfd);
    return where(st);
  }

  std::vector<std::vector<int>> fds(size, std::vector<int>(nstreams, -1));
  std::vector<Endpoint> endpoints(size);
  for (Endpoint& e : endpoints) {
    e.rank = rank;
    e.listen_port = port;
  }
  auto cleanup = [&] {
    close(lfd);
    for (auto& v : fds) {
      for (int fd : v) {
        if (fd >= 0) close(fd);
      }
    }
  };
  // Connect to every lower rank.
  for (int peer = 0; peer < rank; ++peer) {
    StatusOr<std::string> info = store.GetString(fmt::format("tcp/{}", peer), Timeout(MsLeft(deadline)));
    if (!info.ok()) {
      cleanup();
      return where(info.status().WithContext(fmt::format("rank {} did not publish its tcp address within {} ms", peer,
                                                         timeout.count())));
    }
    std::vector<std::string> parts;
    std::stringstream ss(*info);
    std::string part;
    while (std::getline(ss, part, '|')) parts.push_back(part);
    Hello hello;
    hello.rank = rank;
    hello.kind = kHelloConnect;
    hello.listen_port = port;
    if (parts.size() != 3 || !Unhex(parts[2], hello.secret, 16)) {
      cleanup();
      return where(DataLoss("malformed tcp address of rank {}: '{}'", peer, *info));
    }
    std::vector<std::string> candidates;
    std::stringstream as(parts[0]);
    while (std::getline(as, part, ',')) candidates.push_back(part);
    const bool same_host = options.host_keys.size() == static_cast<size_t>(size) &&
                           options.host_keys[peer] == options.host_keys[rank];
    if (same_host) {
      std::stable_partition(candidates.begin(), candidates.end(), [](const std::string& a) { return a == "127.0.0.1"; });
    }
    const int peer_port = std::atoi(parts[1].c_str());
    for (int s = 0; s < nstreams; ++s) {
      std::string errors;
      for (const std::string& addr : candidates) {
        StatusOr<int> fd = ConnectTo(addr, peer_port, deadline);
        if (!fd.ok()) {
          errors += "; " + fd.status().message();
          continue;
        }
        hello.stream = s;
        Status hs = WriteAll(*fd, &hello, sizeof(hello), deadline);
        if (!hs.ok()) {
          close(*fd);
          errors += "; " + hs.message();
          continue;
        }
        fds[peer][s] = *fd;
        if (!endpoints[peer].known()) {
          endpoints[peer].address = addr;
          endpoints[peer].port = peer_port;
          endpoints[peer].connector = true;
          std::memcpy(endpoints[peer].secret, hello.secret, 16);
        }
        break;
      }
      if (fds[peer][s] < 0) {
        cleanup();
        return where(Unavailable("cannot connect to rank {} (host {}) at {} port {}{}", peer, ctx->hosts_[peer],
                                 parts[0], peer_port, errors));
      }
    }
  }
  // Accept every higher rank's streams.
  int expected = (size - 1 - rank) * nstreams;
  while (expected > 0) {
    pollfd pfd{lfd, POLLIN, 0};
    const int ready = poll(&pfd, 1, std::min(MsLeft(deadline), 200));
    if (ready <= 0) {
      if (MsLeft(deadline) > 0) continue;
      std::string missing;
      for (int peer = rank + 1; peer < size; ++peer) {
        if (std::count(fds[peer].begin(), fds[peer].end(), -1) > 0) {
          missing += fmt::format("{}rank {} (host {})", missing.empty() ? "" : ", ", peer, ctx->hosts_[peer]);
        }
      }
      cleanup();
      return where(DeadlineExceeded("no tcp connection within {} ms from {}", timeout.count(), missing));
    }
    sockaddr_in from{};
    socklen_t flen = sizeof(from);
    int fd = accept4(lfd, reinterpret_cast<sockaddr*>(&from), &flen, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    char who[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &from.sin_addr, who, sizeof(who));
    Hello hello;
    hello.magic = 0;
    Status hs = ReadAll(fd, &hello, sizeof(hello), std::min(deadline, Clock::now() + std::chrono::seconds(5)));
    const bool valid = hs.ok() && hello.magic == kHelloMagic && std::memcmp(hello.secret, secret, 16) == 0 &&
                       hello.kind == kHelloConnect && hello.rank > rank && hello.rank < size && hello.stream >= 0 &&
                       hello.stream < nstreams && fds[hello.rank][hello.stream] < 0;
    if (!valid) {
      TLOG(WARN, "tcp transport rank {}: refused a connection from {}:{} ({})", rank, who, ntohs(from.sin_port),
           hs.ok() ? "bad magic, secret, rank or stream" : hs.message());
      close(fd);
      continue;
    }
    TuneSocket(fd);
    fds[hello.rank][hello.stream] = fd;
    endpoints[hello.rank].address = who;
    endpoints[hello.rank].port = hello.listen_port;
    --expected;
  }
  ctx->listen_fd_ = lfd;  // kept open: dropped streams are re-established through it
  ctx->pairs_.resize(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (int fd : fds[peer]) {
      Status b = SetBlocking(fd, false);
      if (!b.ok()) return where(b);
    }
    Pair::Config config;
    config.chunk_bytes = chunk;
    config.checksum = ctx->checksum_;
    config.max_rcvlowat = static_cast<size_t>(std::max<int64_t>(kRcvLowatKbKnob.Get(), 0)) << 10;
    config.endpoint = endpoints[peer];
    ctx->pairs_[peer] = std::make_unique<Pair>(peer, fds[peer], std::move(config), ctx->PeerDescription(peer));
    fds[peer].clear();
  }
  TLOG(DEBUG, "tcp transport: rank {}/{} connected, {} stream(s) per peer, {} KiB frames{}", rank, size,
       ctx->streams_, chunk >> 10, ctx->checksum_ ? ", checksummed" : "");
  return ctx;
}

Context::~Context() {
  if (listen_fd_ >= 0) close(listen_fd_);  // first: peers reconnecting now are refused
}

std::string Context::PeerDescription(int peer) const {
  if (peer < 0 || peer >= size_) return fmt::format("rank {}", peer);
  return fmt::format("rank {} (host {})", peer, hosts_[peer]);
}

void Context::ServiceListener() {
  if (listen_fd_ < 0) return;
  while (true) {
    sockaddr_in from{};
    socklen_t flen = sizeof(from);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &flen, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // nothing pending (or the listener was shut down)
    char who[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &from.sin_addr, who, sizeof(who));
    Hello hello;
    hello.magic = 0;
    Status hs = ReadAll(fd, &hello, sizeof(hello), Clock::now() + std::chrono::seconds(1));
    if (hs.ok() && hello.magic == kHelloMagic && hello.kind == kHelloProbe) {
      close(fd);  // a peer checking that this process is alive
      continue;
    }
    const bool valid = hs.ok() && hello.magic == kHelloMagic && hello.kind == kHelloReconnect &&
                       std::memcmp(hello.secret, secret_, 16) == 0 && hello.rank > rank_ && hello.rank < size_ &&
                       hello.stream >= 0 && hello.stream <= streams_;
    if (!valid) {
      TLOG(WARN, "tcp transport rank {}: refused a connection from {}:{} ({})", rank_, who, ntohs(from.sin_port),
           hs.ok() ? "bad magic, secret, rank or stream" : hs.message());
      close(fd);
      continue;
    }
    TuneSocket(fd);
    if (pairs_[hello.rank]->AcceptReconnect(hello.stream, fd, hello.recv_frames)) {
      TLOG(DEBUG, "tcp transport rank {}: {} re-established stream {}", rank_, PeerDescription(hello.rank),
           hello.stream);
    }
  }
}

Status Context::Exchange(std::span<P2pOp> ops, const OpContext& ctx) {
  std::vector<char> involved(size_, 0);
  for (P2pOp& op : ops) {
    TESSERA_CHECK(op.peer >= 0 && op.peer < size_ && op.peer != rank_, "{}: bad peer {}", ctx.Name(), op.peer);
    pairs_[op.peer]->Post(&op);
    involved[op.peer] = 1;
  }
  // Pairs with work left from earlier operations (resends, acknowledgements,
  // re-established streams) are progressed too: a peer may be waiting on them.
  auto active = [&](int peer) { return pairs_[peer] && (involved[peer] || pairs_[peer]->HasBackgroundWork()); };
  const bool spin = size_ <= shm::UsableCpus();
  int64_t spin_until = shm::NowNs() + (spin ? 20'000 : 0);
  for (uint64_t iter = 0;; ++iter) {
    bool moved = false;
    for (int peer = 0; peer < size_; ++peer) {
      if (!active(peer)) continue;
      Pair* p = pairs_[peer].get();
      StatusOr<bool> r = p->Progress(ctx);
      if (!r.ok()) {
        if (r.status().code() == StatusCode::kUnavailable) failed_peer_ = p->peer();
        return r.status();
      }
      moved = moved || *r;
    }
    bool all_done = true;
    for (const P2pOp& op : ops) all_done = all_done && op.complete;
    if (all_done) return Status::Ok();
    if (!moved || (iter & 63) == 63) ServiceListener();
    if (moved) {
      spin_until = shm::NowNs() + (spin ? 20'000 : 0);
      continue;
    }
    if (shm::NowNs() < spin_until) continue;
    if (ctx.Aborted() || aborted_.load()) return Aborted("{}: aborted on this rank (Communicator::Abort)", ctx.Name());
    if (Clock::now() >= ctx.deadline) {
      std::string what;
      for (const P2pOp& op : ops) {
        if (op.complete || what.size() > 400) continue;
        what += fmt::format("{}{} {} (tag {}, {} of {} bytes)", what.empty() ? "" : "; ",
                            op.kind == P2pOp::Kind::kSend ? "send to" : "receive from", PeerDescription(op.peer),
                            op.tag, op.done_bytes, op.bytes);
      }
      return DeadlineExceeded("{}: timed out after {} ms; no progress on {}", ctx.Name(), ctx.timeout.count(), what);
    }
    waiter_.Clear();
    for (int peer = 0; peer < size_; ++peer) {
      if (active(peer)) pairs_[peer]->AddPollFds(waiter_);
    }
    if (listen_fd_ >= 0) waiter_.Add(listen_fd_, POLLIN);
    const int slice = std::max(1, std::min(20, MsLeft(ctx.deadline)));
    StatusOr<int> w = waiter_.Wait(slice);
    if (!w.ok()) return w.status();
  }
}

void Context::Abort(std::string_view) {
  aborted_.store(true);
  // The listener first: peers that see the sockets close and try to
  // re-establish them are refused, so they fail at once.
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  for (auto& p : pairs_) {
    if (p) p->Shutdown();
  }
  waiter_.Wake();
}

}  // namespace tessera::comm::transport::tcp
