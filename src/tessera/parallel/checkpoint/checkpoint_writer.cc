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

}  // namespace

struct CheckpointWriter::Plan {
  CheckpointIndex index;                              // files: sizes/digests filled in by Commit
  std::vector<std::vector<TensorToWrite>> shards;     // per shard, in write order
};

CheckpointWriter::CheckpointWriter(int num_shards, int64_t step) : num_shards_(num_shards), step_(step) {}

Status CheckpointWriter::SetMetadata(nlohmann::json metadata) {
  if (!metadata.is_object()) return InvalidArgument("checkpoint metadata must be a JSON object, not {}",
                                                    metadata.type_name());
  metadata_ = std::move(metadata);
  return Status::Ok();
}

Status CheckpointWriter::AddSlice(SliceToSave slice) {
  const std::string& name = slice.name;
  if (name.empty()) return InvalidArgument("a checkpoint tensor needs a non-empty name");
  if (slice.shard < 0 || slice.shard >= num_shards_) {
    return InvalidArgument("tensor '{}': shard {} is not in [0, {})", name, slice.shard, num_shards_);
  }
  const StatusOr<int64_t> global_bytes = ShapeVolume(slice.global_shape, StorageDtypeSize(slice.dtype));
  if (!global_bytes.ok()) return global_bytes.status().WithContext(fmt::format("tensor '{}'", name));
  if (!BoxInside(Box{slice.offset, slice.shape}, slice.global_shape)) {
    return InvalidArgument("tensor '{}' of shape {}: slice at offset {} with shape {} is outside it", name,
                           ShapeText(slice.global_shape), ShapeText(slice.offset), ShapeText(slice.shape));
  }
  if (slice.data == nullptr && *ShapeVolume(slice.shape) != 0) {
    return InvalidArgument("tensor '{}': slice at offset {} has no data", name, ShapeText(slice.offset));
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

StatusOr<CheckpointWriter::Plan> CheckpointWriter::MakePlan() const {
  if (num_shards_ < 1 || num_shards_ > kMaxShards) {
    return InvalidArgument("a checkpoint needs 1 to {} shards, not {}", kMaxShards, num_shards_);
  }
  if (step_ < 0) return InvalidArgument("checkpoint step {} is negative", step_);
  Plan plan;
  plan.index.step = step_;
  plan.index.metadata = metadata_;
  plan.shards.resize(num_shards_);
  for (int i = 0; i < num_shards_; ++i) plan.index.files[ShardFileName(i, num_shards_)] = ShardFileInfo{8, 0};
  // A slice's key in its shard file: the tensor name, or "name@o0,o1,..."
  // when the shard holds several slices of that tensor.
  std::map<std::pair<int, std::string>, int> slices_per_shard;
  for (const SliceToSave& s : slices_) ++slices_per_shard[{s.shard, s.name}];
  for (const SliceToSave& s : slices_) {
    GlobalTensor& t = plan.index.tensors[s.name];
    t.dtype = s.dtype;
    t.shape = s.global_shape;
    SliceLocation loc;
    loc.file = ShardFileName(s.shard, num_shards_);
    const bool alone = slices_per_shard[{s.shard, s.name}] == 1;
    loc.key = alone ? s.name : fmt::format("{}@{}", s.name, fmt::join(s.offset, ","));
    loc.offset = s.offset;
    loc.shape = s.shape;
    t.slices.push_back(loc);
    plan.shards[s.shard].push_back(TensorToWrite{TensorSpec{loc.key, s.dtype, s.shape}, s.data});
  }
  const Status valid = ValidateCheckpointIndex(plan.index, "checkpoint to save");
  if (!valid.ok()) return Status(StatusCode::kInvalidArgument, valid.message());
  return plan;
}

Status CheckpointWriter::Commit(const std::filesystem::path& dir) const {
  TESSERA_ASSIGN_OR_RETURN(Plan plan, MakePlan());
  std::string index_text;
  try {
    index_text = CheckpointIndexToJson(plan.index).dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("cannot encode the checkpoint index (names and metadata must be UTF-8): {}", e.what());
  }
  const std::filesystem::path index_path = dir / kIndexFileName;
  std::error_code ec;
  if (std::filesystem::exists(index_path, ec)) {
    return AlreadyExists("'{}' already holds a checkpoint ({} exists); not overwriting it", dir.string(),
                         kIndexFileName);
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create checkpoint directory '{}': {}", dir.string(), ec.message());

  std::vector<std::filesystem::path> written;
  for (int i = 0; i < num_shards_; ++i) {
    const std::string file = ShardFileName(i, num_shards_);
    const SafetensorsMetadata shard_metadata = {{"format", std::string(kCheckpointFormat)},
                                                {"shard_index", std::to_string(i)},
                                                {"shard_count", std::to_string(num_shards_)},
                                                {"step", std::to_string(step_)}};
    StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(dir / file);
    Status st = writer.status();
    if (st.ok()) {
      st = WriteSafetensors(plan.shards[i], shard_metadata,
                            [&](const void* data, size_t size) { return writer->Append(data, size); });
    }
    if (st.ok()) st = writer->Commit();
    if (!st.ok()) {
      RemoveFiles(written);
      return st.WithContext(fmt::format("writing checkpoint shard '{}'", (dir / file).string()));
    }
    written.push_back(dir / file);
    plan.index.files[file] = ShardFileInfo{writer->bytes_written(), writer->digest64()};
  }
  index_text = CheckpointIndexToJson(plan.index).dump(2) + "\n";  // encodable: checked above
  StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(index_path);
  Status st = writer.status();
  if (st.ok()) st = writer->Append(index_text.data(), index_text.size());
  if (st.ok()) st = writer->Commit(AtomicFileWriter::Replace::kForbid);
  if (!st.ok()) {
    // Someone else's index.json (AlreadyExists) may now refer to files we just
    // replaced; without one, ours are garbage. Only clean up in the latter case.
    if (st.code() != StatusCode::kAlreadyExists) RemoveFiles(written);
    return st.WithContext(fmt::format("committing checkpoint '{}'", dir.string()));
  }
  TESSERA_RETURN_IF_ERROR(SyncDirectory(dir));
  const std::filesystem::path parent = dir.parent_path().empty() ? "." : dir.parent_path();
  return SyncDirectory(parent);
}

}  // namespace tessera::parallel::checkpoint
