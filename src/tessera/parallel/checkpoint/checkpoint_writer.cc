#include "tessera/parallel/checkpoint/checkpoint_writer.h"

#include <map>
#include <system_error>
#include <utility>

#include "tessera/parallel/checkpoint/box_copy.h"
#include "tessera/parallel/checkpoint/file_io.h"

namespace tessera::parallel::checkpoint {
namespace {

constexpr int kMaxShards = 99999;  // five digits in the file names

std::string ShapeText(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Removes the files a failed commit already moved into place (they are not
// part of any checkpoint: index.json was not written).
void RemoveFiles(const std::vector<std::filesystem::path>& files) {
  for (const auto& f : files) {
    std::error_code ec;
    std::filesystem::remove(f, ec);
  }
}

// The checks of one slice on its own (AddSlice adds those across slices).
Status CheckSlice(const SliceToSave& slice) {
  const std::string& name = slice.name;
  if (name.empty()) return InvalidArgument("a checkpoint tensor needs a non-empty name");
  const StatusOr<int64_t> global_bytes = ShapeVolume(slice.global_shape, StorageDtypeSize(slice.dtype));
  if (!global_bytes.ok()) return global_bytes.status().WithContext(fmt::format("tensor '{}'", name));
  if (!BoxInside(Box{slice.offset, slice.shape}, slice.global_shape)) {
    return InvalidArgument("tensor '{}' of shape {}: slice at offset {} with shape {} is outside it", name,
                           ShapeText(slice.global_shape), ShapeText(slice.offset), ShapeText(slice.shape));
  }
  if (slice.data == nullptr && *ShapeVolume(slice.shape) != 0) {
    return InvalidArgument("tensor '{}': slice at offset {} has no data", name, ShapeText(slice.offset));
  }
  return Status::Ok();
}

// Where each of `slices` goes in shard file `file`: its key is the tensor
// name, or "name@o0,o1,..." when the file holds several slices of it.
std::vector<ShardRecord::Slice> LocateSlices(std::span<const SliceToSave> slices, const std::string& file) {
  std::map<std::string, int> per_name;
  for (const SliceToSave& s : slices) ++per_name[s.name];
  std::vector<ShardRecord::Slice> out;
  for (const SliceToSave& s : slices) {
    ShardRecord::Slice r;
    r.name = s.name;
    r.dtype = s.dtype;
    r.global_shape = s.global_shape;
    r.location.file = file;
    r.location.key = per_name[s.name] == 1 ? s.name : fmt::format("{}@{}", s.name, fmt::join(s.offset, ","));
    r.location.offset = s.offset;
    r.location.shape = s.shape;
    out.push_back(std::move(r));
  }
  return out;
}

// The index the records describe (not validated). InvalidArgument when two
// records disagree on a tensor's dtype or global shape.
StatusOr<CheckpointIndex> BuildIndex(int64_t step, const nlohmann::json& metadata,
                                     std::span<const ShardRecord> records) {
  CheckpointIndex index;
  index.step = step;
  index.metadata = metadata;
  for (const ShardRecord& record : records) {
    if (!index.files.emplace(record.file, record.info).second) {
      return InvalidArgument("shard file '{}' is listed twice", record.file);
    }
    for (const ShardRecord::Slice& s : record.slices) {
      auto [it, fresh] = index.tensors.try_emplace(s.name);
      GlobalTensor& t = it->second;
      if (fresh) {
        t.dtype = s.dtype;
        t.shape = s.global_shape;
      } else if (t.dtype != s.dtype || t.shape != s.global_shape) {
        return InvalidArgument("tensor '{}': slices disagree: {} {} vs {} {}", s.name, StorageDtypeName(t.dtype),
                               ShapeText(t.shape), StorageDtypeName(s.dtype), ShapeText(s.global_shape));
      }
      t.slices.push_back(s.location);
    }
  }
  return index;
}

StatusOr<std::string> EncodeIndex(const CheckpointIndex& index) {
  try {
    return CheckpointIndexToJson(index).dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("cannot encode the checkpoint index (names and metadata must be UTF-8): {}", e.what());
  }
}

}  // namespace

nlohmann::json ShardRecordToJson(const ShardRecord& record) {
  nlohmann::json slices = nlohmann::json::array();
  for (const ShardRecord::Slice& s : record.slices) {
    slices.push_back({{"name", s.name},
                      {"dtype", std::string(StorageDtypeName(s.dtype))},
                      {"global_shape", s.global_shape},
                      {"key", s.location.key},
                      {"offset", s.location.offset},
                      {"shape", s.location.shape}});
  }
  return {{"file", record.file}, {"bytes", record.info.bytes}, {"xxh3_64", record.info.xxh3_64}, {"slices", slices}};
}

StatusOr<ShardRecord> ShardRecordFromJson(const nlohmann::json& j, std::string_view where) {
  auto bad = [&](std::string_view what) { return InvalidArgument("{}: malformed shard record: {}", where, what); };
  auto extents = [](const nlohmann::json& v, std::vector<int64_t>* out) {
    if (!v.is_array()) return false;
    for (const auto& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0) return false;
      out->push_back(e.get<int64_t>());
    }
    return true;
  };
  if (!j.is_object()) return bad("not an object");
  ShardRecord r;
  if (!j.contains("file") || !j["file"].is_string()) return bad("no 'file'");
  r.file = j["file"].get<std::string>();
  if (!j.contains("bytes") || !j["bytes"].is_number_unsigned()) return bad("no 'bytes'");
  if (!j.contains("xxh3_64") || !j["xxh3_64"].is_number_unsigned()) return bad("no 'xxh3_64'");
  r.info.bytes = j["bytes"].get<uint64_t>();
  r.info.xxh3_64 = j["xxh3_64"].get<uint64_t>();
  if (!j.contains("slices") || !j["slices"].is_array()) return bad("no 'slices'");
  for (const auto& e : j["slices"]) {
    ShardRecord::Slice s;
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("key") ||
        !e["key"].is_string() || !e.contains("dtype") || !e["dtype"].is_string()) {
      return bad("a slice without name, key or dtype");
    }
    s.name = e["name"].get<std::string>();
    const std::optional<StorageDtype> dtype = ParseStorageDtype(e["dtype"].get<std::string>());
    if (!dtype) return bad(fmt::format("slice '{}' has unknown dtype", s.name));
    s.dtype = *dtype;
    s.location.file = r.file;
    s.location.key = e["key"].get<std::string>();
    if (!extents(e.value("global_shape", nlohmann::json()), &s.global_shape) ||
        !extents(e.value("offset", nlohmann::json()), &s.location.offset) ||
        !extents(e.value("shape", nlohmann::json()), &s.location.shape)) {
      return bad(fmt::format("slice '{}' has a bad global_shape, offset or shape", s.name));
    }
    r.slices.push_back(std::move(s));
  }
  return r;
}

StatusOr<ShardRecord> WriteShardFile(const std::filesystem::path& dir, int shard, int num_shards, int64_t step,
                                     std::span<const SliceToSave> slices) {
  if (num_shards < 1 || num_shards > kMaxShards || shard < 0 || shard >= num_shards) {
    return InvalidArgument("shard {} of {}: a checkpoint needs 1 to {} shards", shard, num_shards, kMaxShards);
  }
  for (const SliceToSave& s : slices) TESSERA_RETURN_IF_ERROR(CheckSlice(s));
  std::error_code ec;
  if (std::filesystem::exists(dir / kIndexFileName, ec)) {
    return AlreadyExists("'{}' already holds a checkpoint ({} exists); not overwriting it", dir.string(),
                         kIndexFileName);
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create checkpoint directory '{}': {}", dir.string(), ec.message());
  ShardRecord record;
  record.file = ShardFileName(shard, num_shards);
  record.slices = LocateSlices(slices, record.file);
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < slices.size(); ++i) {
    tensors.push_back(TensorToWrite{TensorSpec{record.slices[i].location.key, slices[i].dtype, slices[i].shape},
                                    slices[i].data});
  }
  const SafetensorsMetadata shard_metadata = {{"format", std::string(kCheckpointFormat)},
                                              {"shard_index", std::to_string(shard)},
                                              {"shard_count", std::to_string(num_shards)},
                                              {"step", std::to_string(step)}};
  const std::filesystem::path path = dir / record.file;
  StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path);
  Status st = writer.status();
  if (st.ok()) {
    st = WriteSafetensors(tensors, shard_metadata,
                          [&](const void* data, size_t size) { return writer->Append(data, size); });
  }
  if (st.ok()) st = writer->Commit();
  if (!st.ok()) return st.WithContext(fmt::format("writing checkpoint shard '{}'", path.string()));
  record.info = ShardFileInfo{writer->bytes_written(), writer->digest64()};
  return record;
}

Status CommitCheckpointIndex(const std::filesystem::path& dir, int64_t step, const nlohmann::json& metadata,
                             std::span<const ShardRecord> records) {
  std::vector<std::filesystem::path> written;
  for (const ShardRecord& r : records) written.push_back(dir / r.file);
  auto fail = [&](Status st) {
    RemoveFiles(written);
    return st.WithContext(fmt::format("committing checkpoint '{}'", dir.string()));
  };
  StatusOr<CheckpointIndex> index = BuildIndex(step, metadata, records);
  if (!index.ok()) return fail(index.status());
  const Status valid = ValidateCheckpointIndex(*index, "checkpoint to save");
  if (!valid.ok()) return fail(Status(StatusCode::kInvalidArgument, valid.message()));
  StatusOr<std::string> text = EncodeIndex(*index);
  if (!text.ok()) return fail(text.status());
  StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(dir / kIndexFileName);
  Status st = writer.status();
  if (st.ok()) st = writer->Append(text->data(), text->size());
  if (st.ok()) st = writer->Commit(AtomicFileWriter::Replace::kForbid);
  if (!st.ok()) {
    // Someone else's index.json (AlreadyExists) may refer to files of the
    // same names; without one, ours are garbage.
    if (st.code() == StatusCode::kAlreadyExists) return st.WithContext(fmt::format("committing checkpoint '{}'", dir.string()));
    return fail(st);
  }
  TESSERA_RETURN_IF_ERROR(SyncDirectory(dir));
  const std::filesystem::path parent = dir.parent_path().empty() ? "." : dir.parent_path();
  return SyncDirectory(parent);
}

CheckpointWriter::CheckpointWriter(int num_shards, int64_t step) : num_shards_(num_shards), step_(step) {}

Status CheckpointWriter::SetMetadata(nlohmann::json metadata) {
  if (!metadata.is_object()) return InvalidArgument("checkpoint metadata must be a JSON object, not {}",
                                                    metadata.type_name());
  metadata_ = std::move(metadata);
  return Status::Ok();
}

Status CheckpointWriter::AddSlice(SliceToSave slice) {
  TESSERA_RETURN_IF_ERROR(CheckSlice(slice));
  const std::string& name = slice.name;
  if (slice.shard < 0 || slice.shard >= num_shards_) {
    return InvalidArgument("tensor '{}': shard {} is not in [0, {})", name, slice.shard, num_shards_);
  }
  for (const SliceToSave& other : slices_) {
    if (other.name != name) continue;
    if (other.dtype != slice.dtype || other.global_shape != slice.global_shape) {
      return InvalidArgument("tensor '{}': slices disagree: {} {} vs {} {}", name, StorageDtypeName(other.dtype),
                             ShapeText(other.global_shape), StorageDtypeName(slice.dtype),
                             ShapeText(slice.global_shape));
    }
    break;
  }
  slices_.push_back(std::move(slice));
  return Status::Ok();
}

Status CheckpointWriter::AddTensor(std::string name, StorageDtype dtype, std::vector<int64_t> shape, const void* data,
                                   int shard) {
  SliceToSave slice;
  slice.name = std::move(name);
  slice.dtype = dtype;
  slice.offset.assign(shape.size(), 0);
  slice.global_shape = shape;
  slice.shape = std::move(shape);
  slice.data = data;
  slice.shard = shard;
  return AddSlice(std::move(slice));
}

Status CheckpointWriter::Commit(const std::filesystem::path& dir) const {
  if (num_shards_ < 1 || num_shards_ > kMaxShards) {
    return InvalidArgument("a checkpoint needs 1 to {} shards, not {}", kMaxShards, num_shards_);
  }
  if (step_ < 0) return InvalidArgument("checkpoint step {} is negative", step_);
  std::vector<std::vector<SliceToSave>> per_shard(num_shards_);
  for (const SliceToSave& s : slices_) per_shard[s.shard].push_back(s);
  // Everything that can be checked before touching the disk: the index the
  // shards will make (sizes and digests come with the files).
  std::vector<ShardRecord> planned;
  for (int i = 0; i < num_shards_; ++i) {
    ShardRecord r;
    r.file = ShardFileName(i, num_shards_);
    r.info = ShardFileInfo{8, 0};  // the smallest valid file; the real figures come from the write
    r.slices = LocateSlices(per_shard[i], r.file);
    planned.push_back(std::move(r));
  }
  TESSERA_ASSIGN_OR_RETURN(CheckpointIndex index, BuildIndex(step_, metadata_, planned));
  const Status valid = ValidateCheckpointIndex(index, "checkpoint to save");
  if (!valid.ok()) return Status(StatusCode::kInvalidArgument, valid.message());
  TESSERA_RETURN_IF_ERROR(EncodeIndex(index).status());

  std::vector<ShardRecord> records;
  for (int i = 0; i < num_shards_; ++i) {
    StatusOr<ShardRecord> r = WriteShardFile(dir, i, num_shards_, step_, per_shard[i]);
    if (!r.ok()) {
      for (const ShardRecord& done : records) RemoveFiles({dir / done.file});
      return r.status();
    }
    records.push_back(std::move(*r));
  }
  return CommitCheckpointIndex(dir, step_, metadata_, records);
}

}  // namespace tessera::parallel::checkpoint
