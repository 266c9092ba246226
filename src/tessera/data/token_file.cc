#include "tessera/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera::data {
namespace {
constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);
}  // namespace

StatusOr<TokenFormat> ParseTokenFormat(const std::string& name) {
  if (name == "text") return TokenFormat::kText;
  if (name == "uint16") return TokenFormat::kUint16;
  if (name == "uint32") return TokenFormat::kUint32;
  return InvalidArgument("data.format must be 'text', 'uint16' or 'uint32', got '{}'", name);
}

StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& path, TokenFormat format,
                                                     int64_t vocab_size) {
  std::unique_ptr<TokenFile> f(new TokenFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot open data file '{}': {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("cannot stat data file '{}': {}", path, std::strerror(err));
  }
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0) {
    ::close(fd);
    return InvalidArgument("data file '{}' is empty", path);
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return IoError("cannot map data file '{}': {}", path, std::strerror(errno));
  f->map_ = map;
  f->map_bytes_ = bytes;

  const char* base = static_cast<const char*>(map);
  size_t offset = 0;
  switch (format) {
    case TokenFormat::kText: f->width_ = 1; break;
    case TokenFormat::kUint16: f->width_ = 2; break;
    case TokenFormat::kUint32: f->width_ = 4; break;
  }
  if (format != TokenFormat::kText && bytes >= kLlmcHeaderBytes) {
    int32_t header[3];
    std::memcpy(header, base, sizeof(header));
    if (header[0] == kLlmcMagic) {
      if (header[1] != 1) {
        return InvalidArgument("data file '{}': llm.c header version {} (only version 1, uint16 tokens, is known)",
                               path, header[1]);
      }
      offset = kLlmcHeaderBytes;
      f->width_ = 2;
      size_t expected = offset + static_cast<size_t>(header[2]) * 2;
      if (header[2] < 0 || bytes < expected) {
        return DataLoss("data file '{}' is truncated: header says {} tokens ({} bytes), file has {} bytes", path,
                        header[2], expected, bytes);
      }
      bytes = expected;
    }
  }
  size_t payload = bytes - offset;
  if (payload % f->width_ != 0) {
    return DataLoss("data file '{}': {} payload bytes is not a multiple of the {}-byte token size (truncated?)",
                    path, payload, f->width_);
  }
  f->tokens_ = base + offset;
  f->num_tokens_ = static_cast<int64_t>(payload / f->width_);
  for (int64_t i = 0; i < f->num_tokens_; ++i) {
    int64_t tok = f->At(i);
    if (tok >= vocab_size) {
      return InvalidArgument("data file '{}': token {} at byte offset {} is outside the vocabulary (model.vocab_size = {})",
                             path, tok, offset + static_cast<size_t>(i) * f->width_, vocab_size);
    }
  }
  return f;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

}  // namespace tessera::data
