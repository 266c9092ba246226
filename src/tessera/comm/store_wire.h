// The TCP store's wire format and blocking-with-deadline socket helpers
// (internal to tcp_store_*.cc; tests use it to speak raw protocol).
//
// Every message is a frame: a 4-byte big-endian payload length, then the
// payload. Receivers bound the length before allocating: kMaxHandshakeFrame
// until the connection is authenticated, then the store's max_frame_bytes;
// a larger header closes the connection.
//   HELLO     (server) u32 kMagic, u8 kVersion, blob server_nonce
//   AUTH      (client) u32 kMagic, u8 kVersion, blob client_nonce, str client_info, blob proof
//   AUTH_REPLY(server) u8 0 + blob server_proof  |  u8 1 + str reason (then close)
//   REQUEST   (client) u32 seq, u8 Op, then per op:
//               kSet: str key, blob value     kGet: str key, u64 timeout_ms
//               kAdd: str key, i64 delta      kWait: u32 n, n x str key, u64 timeout_ms
//               kDelete: str key
//   REPLY     (server) u32 seq, u8 StatusCode, then blob (value for kGet,
//               i64 for kAdd, empty otherwise) or str message if not OK
// Integers are big-endian; str/blob are a u32 length then bytes.
// Socket helpers take an absolute deadline and never block past it.
// Thread-safe (no shared state).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"

namespace tessera::comm::wire {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline constexpr uint32_t kMagic = 0x54535452;  // "TSTR"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kMaxHandshakeFrame = 4096;
inline constexpr size_t kDefaultMaxFrameBytes = size_t{64} << 20;
inline constexpr size_t kMaxClientInfo = 256;

enum class Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kDelete = 5 };

class Writer {
 public:
  Writer& U8(uint8_t v);
  Writer& U32(uint32_t v);
  Writer& U64(uint64_t v);
  Writer& I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }
  Writer& Str(std::string_view s);
  Writer& Blob(const Bytes& b);
  // The frame: length prefix + payload.
  Bytes Frame() const;
  size_t payload_size() const { return payload_.size(); }

 private:
  Bytes payload_;
};

// Reads a payload; every getter returns false past the end (malformed).
class Reader {
 public:
  explicit Reader(const Bytes& payload) : data_(payload) {}
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  bool I64(int64_t* v);
  bool Str(std::string* s);
  bool Blob(Bytes* b);
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  bool Take(size_t n, const uint8_t** p);
  const Bytes& data_;
  size_t pos_ = 0;
};

uint32_t LoadBe32(const uint8_t* p);

// "host:port", with brackets for IPv6 literals.
std::string JoinHostPort(std::string_view host, int port);
// The peer's "addr:port" of a connected socket ("?" if unknown).
std::string PeerAddress(int fd);
// Printable, truncated copy of untrusted text for logs.
std::string Sanitize(std::string_view text, size_t max_chars);

Status SetNonBlocking(int fd);
void SetNoDelay(int fd);

// Writes all bytes before `deadline`. `what` names the operation for errors.
Status SendAll(int fd, const Bytes& data, Deadline deadline, std::string_view what);
// Reads one frame of at most `max_payload` bytes before `deadline`.
Status RecvFrame(int fd, size_t max_payload, Deadline deadline, Bytes* payload, std::string_view what);

// One non-blocking connect to host:port (every resolved address in turn),
// bounded by `deadline`. Returns a connected non-blocking socket.
StatusOr<int> ConnectOnce(const std::string& host, int port, Deadline deadline);

}  // namespace tessera::comm::wire
