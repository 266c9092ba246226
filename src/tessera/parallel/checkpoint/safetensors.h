// One safetensors file (https://github.com/huggingface/safetensors), the
// standard layout exactly: an 8-byte little-endian u64 N; N bytes of UTF-8
// JSON, padded with spaces to a multiple of 8,
//   {"__metadata__": {"k": "v"}, "<name>": {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// then the little-endian tensor data, offsets relative to the start of the
// data section, tensors packed contiguously in the order given.
//
// The writer streams: EncodeSafetensorsHeader() then each tensor's bytes in
// order (WriteSafetensors does both for in-memory tensors). The reader
// (SafetensorsFile) validates everything before exposing a byte: header size
// bounds, JSON, field types, dtypes, shapes, offsets, exact coverage of the
// data section, duplicate names. A malformed file gives a DataLoss Status
// naming the file and the defect, never a crash or an out-of-bounds read.
// All functions are thread-safe; a SafetensorsFile is immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/parallel/checkpoint/file_io.h"

namespace tessera::parallel::checkpoint {

// Element types of the format (names as in the file: "F32", "BF16", ...).
enum class StorageDtype : uint8_t { kBool, kU8, kI8, kI16, kI32, kI64, kF16, kBF16, kF32, kF64, kF8E4M3, kF8E5M2 };
inline constexpr StorageDtype kAllStorageDtypes[] = {
    StorageDtype::kBool, StorageDtype::kU8,   StorageDtype::kI8,  StorageDtype::kI16,
    StorageDtype::kI32,  StorageDtype::kI64,  StorageDtype::kF16, StorageDtype::kBF16,
    StorageDtype::kF32,  StorageDtype::kF64,  StorageDtype::kF8E4M3, StorageDtype::kF8E5M2};

std::string_view StorageDtypeName(StorageDtype dtype);
std::optional<StorageDtype> ParseStorageDtype(std::string_view name);
size_t StorageDtypeSize(StorageDtype dtype);

// Header JSON larger than this is refused (as the reference implementation).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

using SafetensorsMetadata = std::map<std::string, std::string>;

// Element count of `shape` (1 for a scalar); InvalidArgument on a negative
// extent or when the count times `element_size` overflows 63 bits.
StatusOr<int64_t> ShapeVolume(std::span<const int64_t> shape, size_t element_size = 1);

struct TensorSpec {
  std::string name;
  StorageDtype dtype = StorageDtype::kF32;
  std::vector<int64_t> shape;
};

struct TensorToWrite {
  TensorSpec spec;
  const void* data = nullptr;  // ShapeVolume(shape) * dtype size bytes, row-major
};

// The file's first bytes: length prefix + space-padded header JSON for
// `tensors` packed in order. InvalidArgument for empty, duplicate or
// reserved ("__metadata__") names, negative extents, sizes that overflow, or
// strings that are not UTF-8. Metadata is omitted when empty.
StatusOr<std::string> EncodeSafetensorsHeader(std::span<const TensorSpec> tensors,
                                              const SafetensorsMetadata& metadata);

// Bytes of one tensor of `spec` (checked by EncodeSafetensorsHeader).
uint64_t TensorByteSize(const TensorSpec& spec);

// Writes header then data to `sink` (called with consecutive pieces).
Status WriteSafetensors(std::span<const TensorToWrite> tensors, const SafetensorsMetadata& metadata,
                        const std::function<Status(const void*, size_t)>& sink);
// The whole file as a string (tests, small files).
StatusOr<std::string> SafetensorsToString(std::span<const TensorToWrite> tensors,
                                          const SafetensorsMetadata& metadata);
// Writes `path` atomically (".tmp", fsync, rename).
Status WriteSafetensorsFile(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                            const SafetensorsMetadata& metadata);

// A parsed, validated safetensors file.
class SafetensorsFile {
 public:
  struct Entry {
    TensorSpec spec;
    uint64_t begin = 0;  // within the data section
    uint64_t end = 0;
  };

  // Maps `path` and parses it.
  static StatusOr<SafetensorsFile> Open(const std::filesystem::path& path);
  // Parses `file`'s bytes; `name` (a path) is used in error messages.
  static StatusOr<SafetensorsFile> Parse(MappedFile file, std::string name);

  // In data order (the order a standard writer packs them).
  const std::vector<Entry>& tensors() const { return entries_; }
  const Entry* Find(std::string_view name) const;
  std::span<const std::byte> TensorBytes(const Entry& entry) const {
    return data_.subspan(entry.begin, entry.end - entry.begin);
  }
  const SafetensorsMetadata& metadata() const { return metadata_; }
  const std::string& name() const { return name_; }
  uint64_t file_size() const { return file_.size(); }
  uint64_t header_size() const { return header_size_; }  // N (the JSON, with padding)

 private:
  std::string name_;
  MappedFile file_;
  std::span<const std::byte> data_;
  uint64_t header_size_ = 0;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> by_name_;
  SafetensorsMetadata metadata_;
};

}  // namespace tessera::parallel::checkpoint
