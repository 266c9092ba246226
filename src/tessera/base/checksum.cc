#include "tessera/base/checksum.h"

#include <xxhash.h>

#include "tessera/base/check.h"

namespace tessera::base {

// XXH3_state_t is opaque in the dynamic-library API; State is a thin alias
// so the header does not need xxhash.h.
struct StreamingChecksum::State {
  XXH3_state_t* xxh;
};

void StreamingChecksum::StateDeleter::operator()(State* s) const {
  if (s != nullptr) XXH3_freeState(s->xxh);
  delete s;
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

StatusOr<uint64_t> ParseHexWord(std::string_view text) {
  uint64_t v = 0;
  for (char c : text) {
    int d = HexValue(c);
    if (d < 0) return InvalidArgument("'{}' is not a hex digest: bad character '{}'", text, c);
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace

uint64_t Checksum64(const void* data, size_t size, uint64_t seed) {
  return seed == 0 ? XXH3_64bits(data, size) : XXH3_64bits_withSeed(data, size, seed);
}

Hash128 Checksum128(const void* data, size_t size, uint64_t seed) {
  XXH128_hash_t h = seed == 0 ? XXH3_128bits(data, size) : XXH3_128bits_withSeed(data, size, seed);
  return Hash128{h.low64, h.high64};
}

std::string HexDigest(uint64_t hash) { return fmt::format("{:016x}", hash); }

std::string HexDigest(const Hash128& hash) { return fmt::format("{:016x}{:016x}", hash.high, hash.low); }

StatusOr<uint64_t> ParseHexDigest64(std::string_view text) {
  if (text.size() != 16) return InvalidArgument("'{}' is not a 64-bit hex digest: want 16 hex digits", text);
  return ParseHexWord(text);
}

StatusOr<Hash128> ParseHexDigest128(std::string_view text) {
  if (text.size() != 32) return InvalidArgument("'{}' is not a 128-bit hex digest: want 32 hex digits", text);
  TESSERA_ASSIGN_OR_RETURN(uint64_t high, ParseHexWord(text.substr(0, 16)));
  TESSERA_ASSIGN_OR_RETURN(uint64_t low, ParseHexWord(text.substr(16)));
  return Hash128{low, high};
}

StreamingChecksum::StreamingChecksum(uint64_t seed) : state_(new State{XXH3_createState()}) {
  TESSERA_CHECK(state_->xxh != nullptr, "XXH3_createState failed (out of memory)");
  Reset(seed);
}

StreamingChecksum::~StreamingChecksum() = default;

StreamingChecksum::StreamingChecksum(const StreamingChecksum& other)
    : state_(new State{XXH3_createState()}), bytes_(other.bytes_) {
  TESSERA_CHECK(state_->xxh != nullptr, "XXH3_createState failed (out of memory)");
  XXH3_copyState(state_->xxh, other.state_->xxh);
}

StreamingChecksum& StreamingChecksum::operator=(const StreamingChecksum& other) {
  if (this != &other) {
    StreamingChecksum copy(other);
    *this = std::move(copy);
  }
  return *this;
}

void StreamingChecksum::Reset(uint64_t seed) {
  TESSERA_CHECK(state_ != nullptr, "StreamingChecksum used after move");
  TESSERA_CHECK(XXH3_64bits_reset_withSeed(state_->xxh, seed) == XXH_OK);
  bytes_ = 0;
}

void StreamingChecksum::Update(const void* data, size_t size) {
  TESSERA_CHECK(state_ != nullptr, "StreamingChecksum used after move");
  if (size == 0) return;
  TESSERA_CHECK(XXH3_64bits_update(state_->xxh, data, size) == XXH_OK);
  bytes_ += size;
}

uint64_t StreamingChecksum::Digest64() const {
  TESSERA_CHECK(state_ != nullptr, "StreamingChecksum used after move");
  return XXH3_64bits_digest(state_->xxh);
}

Hash128 StreamingChecksum::Digest128() const {
  TESSERA_CHECK(state_ != nullptr, "StreamingChecksum used after move");
  XXH128_hash_t h = XXH3_128bits_digest(state_->xxh);
  return Hash128{h.low64, h.high64};
}

}  // namespace tessera::base
