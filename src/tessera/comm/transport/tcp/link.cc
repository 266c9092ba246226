#include "tessera/comm/transport/tcp/link.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>

#include "tessera/comm/transport/tcp/frame.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tessera::comm::transport::tcp {
namespace {

std::atomic<FrameFaultHook> g_fault_hook{nullptr};
std::atomic<uint64_t> g_corrupt{0}, g_retransmits{0}, g_reconnects{0}, g_resent{0};
std::atomic<StreamPaceHook> g_pace_hook{nullptr};
std::atomic<uint64_t> g_stream_bytes[LinkStats::kStatStreams];

}  // namespace

LinkStats GetLinkStats() {
  LinkStats s;
  s.corrupt_frames = g_corrupt.load();
  s.retransmits = g_retransmits.load();
  s.reconnects = g_reconnects.load();
  s.resent_frames = g_resent.load();
  for (int i = 0; i < LinkStats::kStatStreams; ++i) s.stream_bytes[i] = g_stream_bytes[i].load();
  return s;
}

uint64_t FrameChecksum(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

void SetFrameFaultHookForTesting(FrameFaultHook hook) { g_fault_hook.store(hook); }
void SetStreamPaceHookForTesting(StreamPaceHook hook) { g_pace_hook.store(hook); }

namespace internal {
FrameFaultHook FrameFaultHookNow() { return g_fault_hook.load(std::memory_order_relaxed); }
StreamPaceHook StreamPaceHookNow() { return g_pace_hook.load(std::memory_order_relaxed); }
void CountStreamBytes(size_t stream, uint64_t bytes) {
  g_stream_bytes[std::min<size_t>(stream, LinkStats::kStatStreams - 1)].fetch_add(bytes, std::memory_order_relaxed);
}
void CountCorrupt() { g_corrupt.fetch_add(1); }
void CountRetransmit() { g_retransmits.fetch_add(1); }
void CountReconnect() { g_reconnects.fetch_add(1); }
void CountResent(uint64_t frames) { g_resent.fetch_add(frames); }
}  // namespace internal

void TuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

int StartConnect(const std::string& address, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) return -EINVAL;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  TuneSocket(fd);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int PollConnect(int fd) {
  pollfd pfd{fd, POLLOUT, 0};
  if (poll(&pfd, 1, 0) <= 0) return EINPROGRESS;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

bool SendSmall(int fd, const void* data, size_t n, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    pollfd pfd{fd, POLLOUT, 0};
    poll(&pfd, 1, 10);
  }
  return true;
}

int RecvSome(int fd, void* data, size_t n, size_t* done) {
  while (*done < n) {
    const ssize_t r = recv(fd, static_cast<uint8_t*>(data) + *done, n - *done, MSG_DONTWAIT);
    if (r > 0) {
      *done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return -1;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
  return 1;
}

}  // namespace tessera::comm::transport::tcp
