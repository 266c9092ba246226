#include "tessera/parallel/checkpoint/checkpoint_index.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "tessera/base/checksum.h"
#include "tessera/parallel/checkpoint/box_copy.h"
#include "tessera/parallel/checkpoint/strict_json.h"

namespace tessera::parallel::checkpoint {
namespace {

using nlohmann::json;

std::string ShapeText(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Status CheckFileName(std::string_view where, const std::string& file) {
  const bool plain = !file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos &&
                     file.find('\0') == std::string::npos;
  if (!plain) return DataLoss("'{}': shard file name '{}' is not a plain file name", where, file);
  if (file == kIndexFileName || file.ends_with(".tmp")) {
    return DataLoss("'{}': '{}' cannot be a shard file name", where, file);
  }
  return Status::Ok();
}

// No two non-empty slices share an element; their volumes add up to the
// tensor's. Together with "inside the tensor", the slices tile it exactly.
Status CheckTiling(std::string_view where, const std::string& name, const GlobalTensor& t, int64_t volume) {
  std::vector<size_t> order;
  int64_t covered = 0;
  for (size_t i = 0; i < t.slices.size(); ++i) {
    const int64_t v = *ShapeVolume(t.slices[i].shape);  // bounded by the (checked) global volume
    if (v == 0) continue;
    // Overflow means overlapping slices (each fits in the tensor); the
    // pairwise check below reports them.
    if (__builtin_add_overflow(covered, v, &covered)) covered = std::numeric_limits<int64_t>::max();
    order.push_back(i);
  }
  const auto box = [&](size_t i) { return Box{t.slices[i].offset, t.slices[i].shape}; };
  if (!t.shape.empty()) {
    // Sweep along dim 0: only slices whose dim-0 ranges overlap are compared.
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return t.slices[a].offset[0] < t.slices[b].offset[0]; });
  }
  for (size_t a = 0; a < order.size(); ++a) {
    const SliceLocation& sa = t.slices[order[a]];
    for (size_t b = a + 1; b < order.size(); ++b) {
      const SliceLocation& sb = t.slices[order[b]];
      if (!t.shape.empty() && sb.offset[0] >= sa.offset[0] + sa.shape[0]) break;
      if (IntersectBoxes(box(order[a]), box(order[b]))) {
        return DataLoss("'{}': tensor '{}': slices at offset {} (shape {}) and at offset {} (shape {}) overlap",
                        where, name, ShapeText(sa.offset), ShapeText(sa.shape), ShapeText(sb.offset),
                        ShapeText(sb.shape));
      }
    }
  }
  if (covered != volume) {
    return DataLoss("'{}': tensor '{}' of shape {}: its slices cover {} of its {} elements (a gap)", where, name,
                    ShapeText(t.shape), covered, volume);
  }
  return Status::Ok();
}

// The fields of one JSON object, with typed getters that name what is wrong.
class Fields {
 public:
  Fields(std::string_view where, std::string what, const json& j) : where_(where), what_(std::move(what)), j_(j) {}

  Status CheckObject() const {
    if (!j_.is_object()) return DataLoss("'{}': {} is a JSON {}, not an object", where_, what_, j_.type_name());
    return Status::Ok();
  }
  StatusOr<const json*> Get(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) return DataLoss("'{}': {} has no \"{}\"", where_, what_, key);
    return &*it;
  }
  StatusOr<std::string> String(const char* key) const {
    TESSERA_ASSIGN_OR_RETURN(const json* v, Get(key));
    if (!v->is_string()) return Wrong(key, "a string");
    return v->get<std::string>();
  }
  StatusOr<int64_t> NonNegative(const char* key) const {
    TESSERA_ASSIGN_OR_RETURN(const json* v, Get(key));
    if (!v->is_number_unsigned() || v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      return Wrong(key, "an integer >= 0");
    }
    return v->get<int64_t>();
  }
  StatusOr<std::vector<int64_t>> Extents(const char* key) const {
    TESSERA_ASSIGN_OR_RETURN(const json* v, Get(key));
    if (!v->is_array()) return Wrong(key, "an array of integers >= 0");
    std::vector<int64_t> out;
    for (const json& e : *v) {
      if (!e.is_number_unsigned() || e.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
        return Wrong(key, "an array of integers >= 0");
      }
      out.push_back(e.get<int64_t>());
    }
    return out;
  }

 private:
  Status Wrong(const char* key, const char* want) const {
    return DataLoss("'{}': {} has \"{}\" = {} (want {})", where_, what_, key, BriefJson(j_.at(key)), want);
  }
  std::string_view where_;
  std::string what_;
  const json& j_;
};

StatusOr<SliceLocation> ParseSlice(std::string_view where, const std::string& what, const json& j) {
  Fields f(where, what, j);
  TESSERA_RETURN_IF_ERROR(f.CheckObject());
  SliceLocation s;
  TESSERA_ASSIGN_OR_RETURN(s.file, f.String("file"));
  TESSERA_ASSIGN_OR_RETURN(s.key, f.String("key"));
  TESSERA_ASSIGN_OR_RETURN(s.offset, f.Extents("offset"));
  TESSERA_ASSIGN_OR_RETURN(s.shape, f.Extents("shape"));
  return s;
}

StatusOr<GlobalTensor> ParseTensor(std::string_view where, const std::string& name, const json& j) {
  Fields f(where, fmt::format("tensor '{}'", name), j);
  TESSERA_RETURN_IF_ERROR(f.CheckObject());
  GlobalTensor t;
  TESSERA_ASSIGN_OR_RETURN(std::string dtype, f.String("dtype"));
  const std::optional<StorageDtype> parsed = ParseStorageDtype(dtype);
  if (!parsed) return DataLoss("'{}': tensor '{}' has unknown dtype \"{}\"", where, name, dtype);
  t.dtype = *parsed;
  TESSERA_ASSIGN_OR_RETURN(t.shape, f.Extents("shape"));
  TESSERA_ASSIGN_OR_RETURN(const json* shards, f.Get("shards"));
  if (!shards->is_array()) return DataLoss("'{}': tensor '{}' has \"shards\" that is not an array", where, name);
  for (size_t i = 0; i < shards->size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(SliceLocation s,
                             ParseSlice(where, fmt::format("tensor '{}' shard entry {}", name, i), (*shards)[i]));
    t.slices.push_back(std::move(s));
  }
  return t;
}

}  // namespace

std::string ShardFileName(int index, int count) {
  return fmt::format("shard-{:05d}-of-{:05d}.safetensors", index, count);
}

Status ValidateCheckpointIndex(const CheckpointIndex& index, std::string_view where) {
  if (index.step < 0) return DataLoss("'{}': step {} is negative", where, index.step);
  if (!index.metadata.is_object()) return DataLoss("'{}': \"metadata\" is not a JSON object", where);
  for (const auto& [file, info] : index.files) {
    TESSERA_RETURN_IF_ERROR(CheckFileName(where, file));
    if (info.bytes < 8) return DataLoss("'{}': shard file '{}' is listed with {} bytes", where, file, info.bytes);
  }
  std::set<std::pair<std::string_view, std::string_view>> keys;  // (file, key) holds one slice
  for (const auto& [name, t] : index.tensors) {
    if (name.empty()) return DataLoss("'{}': a tensor has an empty name", where);
    const StatusOr<int64_t> bytes = ShapeVolume(t.shape, StorageDtypeSize(t.dtype));
    if (!bytes.ok()) return DataLoss("'{}': tensor '{}': {}", where, name, bytes.status().message());
    const int64_t volume = *ShapeVolume(t.shape);
    for (const SliceLocation& s : t.slices) {
      if (index.files.find(s.file) == index.files.end()) {
        return DataLoss("'{}': tensor '{}' has a slice in '{}', which \"files\" does not list", where, name, s.file);
      }
      if (s.key.empty() || s.key == "__metadata__") {
        return DataLoss("'{}': tensor '{}' has a slice with key '{}'", where, name, s.key);
      }
      if (!keys.emplace(s.file, s.key).second) {
        return DataLoss("'{}': two slices are stored as '{}' in '{}'", where, s.key, s.file);
      }
      if (!BoxInside(Box{s.offset, s.shape}, t.shape)) {
        return DataLoss("'{}': tensor '{}' of shape {}: slice at offset {} with shape {} is outside it", where, name,
                        ShapeText(t.shape), ShapeText(s.offset), ShapeText(s.shape));
      }
    }
    TESSERA_RETURN_IF_ERROR(CheckTiling(where, name, t, volume));
  }
  return Status::Ok();
}

nlohmann::ordered_json CheckpointIndexToJson(const CheckpointIndex& index) {
  using nlohmann::ordered_json;
  ordered_json tensors = ordered_json::object();
  for (const auto& [name, t] : index.tensors) {
    ordered_json shards = ordered_json::array();
    for (const SliceLocation& s : t.slices) {
      shards.push_back({{"file", s.file}, {"key", s.key}, {"offset", s.offset}, {"shape", s.shape}});
    }
    tensors[name] = {{"dtype", StorageDtypeName(t.dtype)}, {"shape", t.shape}, {"shards", std::move(shards)}};
  }
  ordered_json files = ordered_json::object();
  for (const auto& [file, info] : index.files) {
    files[file] = {{"bytes", info.bytes}, {"xxh3_64", base::HexDigest(info.xxh3_64)}};
  }
  ordered_json out = ordered_json::object();
  out["format"] = kCheckpointFormat;
  out["version"] = kCheckpointVersion;
  out["step"] = index.step;
  out["metadata"] = ordered_json(index.metadata);
  out["tensors"] = std::move(tensors);
  out["files"] = std::move(files);
  return out;
}

StatusOr<CheckpointIndex> ParseCheckpointIndex(std::string_view text, std::string_view where) {
  StatusOr<json> parsed = ParseStrictJson(text);
  if (!parsed.ok()) return DataLoss("'{}' {}", where, parsed.status().message());
  const json& j = *parsed;
  Fields f(where, "the index", j);
  TESSERA_RETURN_IF_ERROR(f.CheckObject());
  TESSERA_ASSIGN_OR_RETURN(std::string format, f.String("format"));
  if (format != kCheckpointFormat) {
    return DataLoss("'{}': format is \"{}\", not \"{}\"", where, format, kCheckpointFormat);
  }
  TESSERA_ASSIGN_OR_RETURN(const json* version, f.Get("version"));
  if (!version->is_number_integer() || version->get<int64_t>() != kCheckpointVersion) {
    return DataLoss("'{}': version {} is not supported (this build reads version {})", where, BriefJson(*version),
                    kCheckpointVersion);
  }
  CheckpointIndex index;
  TESSERA_ASSIGN_OR_RETURN(index.step, f.NonNegative("step"));
  TESSERA_ASSIGN_OR_RETURN(const json* metadata, f.Get("metadata"));
  if (!metadata->is_object()) return DataLoss("'{}': \"metadata\" is not a JSON object", where);
  index.metadata = *metadata;
  TESSERA_ASSIGN_OR_RETURN(const json* files, f.Get("files"));
  if (!files->is_object()) return DataLoss("'{}': \"files\" is not a JSON object", where);
  for (const auto& [file, info] : files->items()) {
    Fields ff(where, fmt::format("file '{}'", file), info);
    TESSERA_RETURN_IF_ERROR(ff.CheckObject());
    ShardFileInfo parsed_info;
    TESSERA_ASSIGN_OR_RETURN(int64_t bytes, ff.NonNegative("bytes"));
    parsed_info.bytes = static_cast<uint64_t>(bytes);
    TESSERA_ASSIGN_OR_RETURN(std::string digest, ff.String("xxh3_64"));
    StatusOr<uint64_t> hash = base::ParseHexDigest64(digest);
    if (!hash.ok()) return DataLoss("'{}': file '{}': {}", where, file, hash.status().message());
    parsed_info.xxh3_64 = *hash;
    index.files.emplace(file, parsed_info);
  }
  TESSERA_ASSIGN_OR_RETURN(const json* tensors, f.Get("tensors"));
  if (!tensors->is_object()) return DataLoss("'{}': \"tensors\" is not a JSON object", where);
  for (const auto& [name, entry] : tensors->items()) {
    TESSERA_ASSIGN_OR_RETURN(GlobalTensor t, ParseTensor(where, name, entry));
    index.tensors.emplace(name, std::move(t));
  }
  TESSERA_RETURN_IF_ERROR(ValidateCheckpointIndex(index, where));
  return index;
}

}  // namespace tessera::parallel::checkpoint
