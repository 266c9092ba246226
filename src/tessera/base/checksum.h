// Checksums of byte buffers with xxHash's XXH3 (libxxhash): 64- and 128-bit,
// one-shot and streaming, with hex formatting/parsing for manifests and logs.
// XXH3 is a fast non-cryptographic hash (tens of GB/s): it detects torn
// writes, bit flips and truncation in checkpoints and frames, not tampering.
// Hex text is the canonical big-endian form that `xxhsum -H3` / `-H2` prints
// (16 or 32 lower-case hex digits). Free functions are thread-safe; a
// StreamingChecksum is not (one per thread or external locking).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tessera/base/status.h"

namespace tessera::base {

struct Hash128 {
  uint64_t low = 0;   // value & 0xFFFFFFFFFFFFFFFF
  uint64_t high = 0;  // value >> 64
  friend bool operator==(const Hash128&, const Hash128&) = default;
};

uint64_t Checksum64(const void* data, size_t size, uint64_t seed = 0);
Hash128 Checksum128(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t Checksum64(std::string_view s, uint64_t seed = 0) { return Checksum64(s.data(), s.size(), seed); }
inline Hash128 Checksum128(std::string_view s, uint64_t seed = 0) { return Checksum128(s.data(), s.size(), seed); }

// "2d06800538d394c2" (16 digits) / high then low (32 digits).
std::string HexDigest(uint64_t hash);
std::string HexDigest(const Hash128& hash);
// Inverse of HexDigest: exactly 16 / 32 hex digits (either case).
StatusOr<uint64_t> ParseHexDigest64(std::string_view text);
StatusOr<Hash128> ParseHexDigest128(std::string_view text);

// Incremental XXH3: Update() with consecutive pieces gives the same digests
// as the one-shot functions on their concatenation. Both digests can be
// taken from one stream (XXH3's 64- and 128-bit variants share the state and
// differ only in finalization), at any point, without ending the stream.
class StreamingChecksum {
 public:
  explicit StreamingChecksum(uint64_t seed = 0);
  ~StreamingChecksum();
  StreamingChecksum(const StreamingChecksum& other);
  StreamingChecksum& operator=(const StreamingChecksum& other);
  StreamingChecksum(StreamingChecksum&&) noexcept = default;
  StreamingChecksum& operator=(StreamingChecksum&&) noexcept = default;

  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Starts over with `seed`.
  void Reset(uint64_t seed = 0);
  uint64_t Digest64() const;
  Hash128 Digest128() const;
  // Total bytes passed to Update since construction or Reset.
  uint64_t bytes() const { return bytes_; }

 private:
  struct State;
  struct StateDeleter {
    void operator()(State* s) const;
  };
  std::unique_ptr<State, StateDeleter> state_;
  uint64_t bytes_ = 0;
};

}  // namespace tessera::base
