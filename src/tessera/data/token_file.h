// Token files: read-only memory-mapped token streams.
//   - text files: byte-level tokens (each byte is a token, vocabulary 256);
//   - binary shards: raw little-endian uint16 or uint32 token ids, or the
//     llm.c format (a 256 × int32 header with magic 20240520, version 1,
//     token count, followed by uint16 tokens), detected by its magic.
// Open() validates size/alignment/header and that every token is below the
// vocabulary, with errors naming the file and byte offset. Thread-safe reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/base/status.h"

namespace tessera::data {

enum class TokenFormat { kText, kUint16, kUint32 };
StatusOr<TokenFormat> ParseTokenFormat(const std::string& name);  // "text", "uint16", "uint32"

class TokenFile {
 public:
  static StatusOr<std::unique_ptr<TokenFile>> Open(const std::string& path, TokenFormat format, int64_t vocab_size);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return num_tokens_; }
  int64_t At(int64_t i) const {
    switch (width_) {
      case 1: return static_cast<const uint8_t*>(tokens_)[i];
      case 2: return static_cast<const uint16_t*>(tokens_)[i];
      default: return static_cast<const uint32_t*>(tokens_)[i];
    }
  }

 private:
  TokenFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  int width_ = 1;
  int64_t num_tokens_ = 0;
};

}  // namespace tessera::data
