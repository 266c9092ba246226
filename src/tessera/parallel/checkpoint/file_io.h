// File primitives of the checkpoint format: read-only mappings of shard
// files, crash-safe writes (write "<path>.tmp", fsync, rename to <path>, so
// a reader sees the old state or the whole new file, never a torn one),
// directory fsync and bounded whole-file reads. Every error is a Status that
// names the path and the failing system call. Objects are not thread-safe;
// a MappedFile's bytes are immutable and may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "tessera/base/checksum.h"
#include "tessera/base/status.h"

namespace tessera::parallel::checkpoint {

// The bytes of a whole file (mmap'ed read-only, or owned in memory for
// tests). Cheap to copy: copies share the mapping. A mapped file must not be
// truncated while mapped (reading past its new end faults, as with any
// mmap); checkpoint files are never modified once committed.
class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` read-only. An empty file gives an empty span.
  static StatusOr<MappedFile> Open(const std::filesystem::path& path);
  // Owns `bytes` (for in-memory parsing, tests, fuzzing).
  static MappedFile FromBytes(std::string bytes);

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Writes `path` atomically: bytes go to "<path>.tmp"; Commit() fsyncs it and
// renames it to `path`. Destroying an uncommitted writer removes the
// temporary file. Tracks the byte count and XXH3-64 of what was written.
class AtomicFileWriter {
 public:
  enum class Replace { kAllow, kForbid };

  ~AtomicFileWriter();
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;

  static StatusOr<AtomicFileWriter> Create(const std::filesystem::path& path);

  Status Append(const void* data, size_t size);
  // fsync, close, then move into place. kForbid: fails with AlreadyExists
  // (and removes the temporary) when `path` exists, atomically (link(2)).
  Status Commit(Replace replace = Replace::kAllow);

  uint64_t bytes_written() const { return checksum_.bytes(); }
  uint64_t digest64() const { return checksum_.Digest64(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  AtomicFileWriter(std::filesystem::path path, std::filesystem::path tmp_path, int fd);
  void Abandon();

  std::filesystem::path path_;
  std::filesystem::path tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
  base::StreamingChecksum checksum_;
};

// fsync(2) on a directory, making renames inside it durable.
Status SyncDirectory(const std::filesystem::path& dir);

// Reads a whole regular file; files larger than `max_bytes` are an error.
StatusOr<std::string> ReadSmallFile(const std::filesystem::path& path, uint64_t max_bytes);

}  // namespace tessera::parallel::checkpoint
