// Connection plumbing of the tcp transport shared by Context (setup, the
// listener) and Pair (re-establishing a dropped stream, probing a peer):
// the handshake messages, where a peer's listener is, and non-blocking
// connect helpers. Every helper is bounded (non-blocking or a timeout).
// Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::comm::transport::tcp {

constexpr uint64_t kHelloMagic = 0x54455353544350ull;  // "TESSTCP"

enum HelloKind : int32_t {
  kHelloConnect = 0,    // initial connection of stream `stream`
  kHelloReconnect = 1,  // re-establishes stream `stream`; answered with a HelloReply
  kHelloProbe = 2,      // "is your process alive?": accepted and closed
};

// Sent by the connecting side (the higher rank) right after connect.
struct Hello {
  uint64_t magic = kHelloMagic;
  int32_t rank = -1;
  int32_t stream = 0;
  uint8_t secret[16] = {};  // the listener's secret (ignored for probes)
  int32_t kind = kHelloConnect;
  int32_t listen_port = 0;   // the sender's own listener (the peer probes it)
  uint64_t recv_frames = 0;  // reconnect: data frames the sender fully received on this stream
};

// The accepting side's answer to kHelloReconnect.
struct HelloReply {
  uint64_t magic = kHelloMagic;
  uint64_t recv_frames = 0;  // data frames the acceptor fully received on this stream
};

// Where a peer's listener is, and which side re-establishes streams.
struct Endpoint {
  std::string address;  // empty: unknown (no reconnection; tests over socketpairs)
  int port = 0;
  bool connector = false;    // this side (the higher rank) reconnects
  int rank = -1;             // this rank
  int listen_port = 0;       // this rank's listener
  uint8_t secret[16] = {};   // the peer listener's secret (connector)
  bool known() const { return !address.empty() && port > 0; }
};

// TCP_NODELAY and 4 MiB socket buffers.
void TuneSocket(int fd);
// Starts a non-blocking connect; returns the fd, or -errno when it failed
// at once.
int StartConnect(const std::string& address, int port);
// 0 once connected, EINPROGRESS while pending, else the connect's errno.
int PollConnect(int fd);
// Writes a small message on a fresh socket, waiting at most `ms`.
bool SendSmall(int fd, const void* data, size_t n, int ms);
// Reads up to `n - *done` more bytes without blocking: 1 when complete,
// 0 when more must come, -1 on EOF or error.
int RecvSome(int fd, void* data, size_t n, size_t* done);

}  // namespace tessera::comm::transport::tcp
