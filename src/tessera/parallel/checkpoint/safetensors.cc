#include "tessera/parallel/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "tessera/parallel/checkpoint/strict_json.h"

namespace tessera::parallel::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this writer copies host memory as is");

namespace {

using OrderedJson = nlohmann::ordered_json;

struct DtypeInfo {
  StorageDtype dtype;
  std::string_view name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {StorageDtype::kBool, "BOOL", 1}, {StorageDtype::kU8, "U8", 1},       {StorageDtype::kI8, "I8", 1},
    {StorageDtype::kI16, "I16", 2},   {StorageDtype::kI32, "I32", 4},     {StorageDtype::kI64, "I64", 8},
    {StorageDtype::kF16, "F16", 2},   {StorageDtype::kBF16, "BF16", 2},   {StorageDtype::kF32, "F32", 4},
    {StorageDtype::kF64, "F64", 8},   {StorageDtype::kF8E4M3, "F8_E4M3", 1}, {StorageDtype::kF8E5M2, "F8_E5M2", 1},
};

constexpr std::string_view kMetadataKey = "__metadata__";

std::string_view JsonTypeName(const OrderedJson& j) { return j.type_name(); }

// A JSON integer in [0, INT64_MAX].
std::optional<int64_t> NonNegativeInt(const OrderedJson& j) {
  if (!j.is_number_unsigned()) return std::nullopt;
  const uint64_t v = j.get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string ShapeText(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

StatusOr<SafetensorsFile::Entry> ParseEntry(const std::string& file, const std::string& name, const OrderedJson& j) {
  if (!j.is_object()) return DataLoss("'{}': tensor '{}' is a JSON {}, not an object", file, name, JsonTypeName(j));
  SafetensorsFile::Entry entry;
  entry.spec.name = name;
  const auto dtype_it = j.find("dtype");
  if (dtype_it == j.end() || !dtype_it->is_string()) {
    return DataLoss("'{}': tensor '{}' has no \"dtype\" string", file, name);
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  const std::optional<StorageDtype> dtype = ParseStorageDtype(dtype_name);
  if (!dtype) return DataLoss("'{}': tensor '{}' has unknown dtype \"{}\"", file, name, dtype_name);
  entry.spec.dtype = *dtype;

  const auto shape_it = j.find("shape");
  if (shape_it == j.end() || !shape_it->is_array()) {
    return DataLoss("'{}': tensor '{}' has no \"shape\" array", file, name);
  }
  for (const OrderedJson& extent : *shape_it) {
    const std::optional<int64_t> v = NonNegativeInt(extent);
    if (!v) return DataLoss("'{}': tensor '{}' has shape entry {} (want an integer >= 0)", file, name,
                            BriefJson(extent));
    entry.spec.shape.push_back(*v);
  }
  const StatusOr<int64_t> bytes = ShapeVolume(entry.spec.shape, StorageDtypeSize(*dtype));
  if (!bytes.ok()) {
    return DataLoss("'{}': tensor '{}': shape {} of {} is too large (overflow)", file, name,
                    ShapeText(entry.spec.shape), dtype_name);
  }

  const auto offsets_it = j.find("data_offsets");
  if (offsets_it == j.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return DataLoss("'{}': tensor '{}' has no \"data_offsets\" pair", file, name);
  }
  const std::optional<int64_t> begin = NonNegativeInt((*offsets_it)[0]);
  const std::optional<int64_t> end = NonNegativeInt((*offsets_it)[1]);
  if (!begin || !end) {
    return DataLoss("'{}': tensor '{}' has data_offsets [{}, {}] (want two integers >= 0)", file, name,
                    BriefJson((*offsets_it)[0]), BriefJson((*offsets_it)[1]));
  }
  if (*end < *begin) return DataLoss("'{}': tensor '{}' has data_offsets end {} < begin {}", file, name, *end, *begin);
  if (*end - *begin != *bytes) {
    return DataLoss("'{}': tensor '{}': data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}", file, name,
                    *begin, *end, *end - *begin, ShapeText(entry.spec.shape), dtype_name, *bytes);
  }
  entry.begin = static_cast<uint64_t>(*begin);
  entry.end = static_cast<uint64_t>(*end);
  return entry;
}

}  // namespace

std::string_view StorageDtypeName(StorageDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

std::optional<StorageDtype> ParseStorageDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

size_t StorageDtypeSize(StorageDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 1;
}

StatusOr<int64_t> ShapeVolume(std::span<const int64_t> shape, size_t element_size) {
  int64_t volume = static_cast<int64_t>(element_size);
  for (int64_t extent : shape) {
    if (extent < 0) return InvalidArgument("shape {} has a negative extent", ShapeText(shape));
    if (__builtin_mul_overflow(volume, extent, &volume)) {
      return InvalidArgument("shape {} is too large (its size overflows 64 bits)", ShapeText(shape));
    }
  }
  return volume;
}

uint64_t TensorByteSize(const TensorSpec& spec) {
  const StatusOr<int64_t> bytes = ShapeVolume(spec.shape, StorageDtypeSize(spec.dtype));
  return bytes.ok() ? static_cast<uint64_t>(*bytes) : 0;
}

StatusOr<std::string> EncodeSafetensorsHeader(std::span<const TensorSpec> tensors,
                                              const SafetensorsMetadata& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson& meta = header[std::string(kMetadataKey)] = OrderedJson::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name.empty()) return InvalidArgument("a safetensors tensor needs a non-empty name");
    if (t.name == kMetadataKey) return InvalidArgument("'{}' is reserved and cannot name a tensor", kMetadataKey);
    if (!names.insert(t.name).second) return InvalidArgument("tensor name '{}' appears twice", t.name);
    StatusOr<int64_t> bytes = ShapeVolume(t.shape, StorageDtypeSize(t.dtype));
    if (!bytes.ok()) return std::move(bytes).status().WithContext(fmt::format("tensor '{}'", t.name));
    const uint64_t end = offset + static_cast<uint64_t>(*bytes);
    if (end < offset || end > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument("the tensors are too large for one file (offsets overflow at '{}')", t.name);
    }
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = StorageDtypeName(t.dtype);
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, end};
    header[t.name] = std::move(entry);
    offset = end;
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("cannot encode the safetensors header (names and metadata must be UTF-8): {}", e.what());
  }
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t n = json.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += json;
  return out;
}

Status WriteSafetensors(std::span<const TensorToWrite> tensors, const SafetensorsMetadata& metadata,
                        const std::function<Status(const void*, size_t)>& sink) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorToWrite& t : tensors) {
    if (t.data == nullptr && TensorByteSize(t.spec) != 0) {
      return InvalidArgument("tensor '{}' has no data", t.spec.name);
    }
    specs.push_back(t.spec);
  }
  TESSERA_ASSIGN_OR_RETURN(std::string header, EncodeSafetensorsHeader(specs, metadata));
  TESSERA_RETURN_IF_ERROR(sink(header.data(), header.size()));
  for (const TensorToWrite& t : tensors) {
    const uint64_t bytes = TensorByteSize(t.spec);
    if (bytes != 0) TESSERA_RETURN_IF_ERROR(sink(t.data, bytes));
  }
  return Status::Ok();
}

StatusOr<std::string> SafetensorsToString(std::span<const TensorToWrite> tensors,
                                          const SafetensorsMetadata& metadata) {
  std::string out;
  TESSERA_RETURN_IF_ERROR(WriteSafetensors(tensors, metadata, [&](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return Status::Ok();
  }));
  return out;
}

Status WriteSafetensorsFile(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                            const SafetensorsMetadata& metadata) {
  TESSERA_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  TESSERA_RETURN_IF_ERROR(WriteSafetensors(tensors, metadata, [&](const void* data, size_t size) {
    return writer.Append(data, size);
  }));
  return writer.Commit();
}

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  TESSERA_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  return Parse(std::move(file), path.string());
}

StatusOr<SafetensorsFile> SafetensorsFile::Parse(MappedFile file, std::string name) {
  const std::span<const std::byte> bytes = file.bytes();
  if (bytes.size() < 8) {
    return DataLoss("'{}' is not a safetensors file: {} bytes, shorter than the 8-byte header length", name,
                    bytes.size());
  }
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), sizeof n);  // little-endian host (static_assert above)
  if (n > kMaxSafetensorsHeaderBytes) {
    return DataLoss("'{}': header length {} exceeds the {}-byte limit", name, n, kMaxSafetensorsHeaderBytes);
  }
  if (n > bytes.size() - 8) {
    return DataLoss("'{}': header length {} runs past the end of the file ({} bytes)", name, n, bytes.size());
  }
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  StatusOr<OrderedJson> parsed = ParseStrictOrderedJson(std::string_view(text, n));
  if (!parsed.ok()) return DataLoss("'{}': header {}", name, parsed.status().message());
  const OrderedJson& header = *parsed;
  if (!header.is_object()) return DataLoss("'{}': header is a JSON {}, not an object", name, JsonTypeName(header));

  SafetensorsFile result;
  result.name_ = std::move(name);
  result.header_size_ = n;
  result.data_ = bytes.subspan(8 + n);
  const uint64_t data_size = result.data_.size();
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) {
        return DataLoss("'{}': {} is a JSON {}, not an object", result.name_, kMetadataKey, JsonTypeName(value));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return DataLoss("'{}': {} entry '{}' is a JSON {}, not a string", result.name_, kMetadataKey, meta_key,
                          JsonTypeName(meta_value));
        }
        result.metadata_[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(Entry entry, ParseEntry(result.name_, key, value));
    if (entry.end > data_size) {
      return DataLoss("'{}': tensor '{}' ends at byte {} of a {}-byte data section", result.name_, key, entry.end,
                      data_size);
    }
    result.entries_.push_back(std::move(entry));
  }
  // The data section must be covered exactly: no overlap, no hole, no tail.
  std::stable_sort(result.entries_.begin(), result.entries_.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : result.entries_) {
    if (e.begin < covered) {
      return DataLoss("'{}': tensors '{}' and '{}' overlap in the data section", result.name_,
                      previous->spec.name, e.spec.name);
    }
    if (e.begin > covered) {
      return DataLoss("'{}': bytes [{}, {}) of the data section belong to no tensor (before '{}')", result.name_,
                      covered, e.begin, e.spec.name);
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size) {
    return DataLoss("'{}': the last {} bytes of the data section belong to no tensor (truncated header or "
                    "trailing garbage)", result.name_, data_size - covered);
  }
  for (size_t i = 0; i < result.entries_.size(); ++i) result.by_name_.emplace(result.entries_[i].spec.name, i);
  result.file_ = std::move(file);
  return result;
}

const SafetensorsFile::Entry* SafetensorsFile::Find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

}  // namespace tessera::parallel::checkpoint
