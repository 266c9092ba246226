// Writes a sharded checkpoint directory: shard files
// "shard-00000-of-00008.safetensors" ... holding slices of global tensors,
// plus index.json (checkpoint_index.h) describing how they tile.
//
// Commit(dir) is crash-safe: each shard is written to "<name>.tmp", fsync'ed
// and renamed; index.json is written the same way LAST and never replaces an
// existing one; then the directory is fsync'ed. A directory without
// index.json is not a checkpoint, so a crash at any point leaves either no
// checkpoint or a complete one. Committing where a checkpoint already
// exists fails with AlreadyExists and leaves it untouched.
//
// Slices are borrowed: their data must stay valid until Commit returns. Not
// thread-safe (fill it from one thread).
//
// Several processes (the ranks of a job) save one checkpoint together with
// the two halves of Commit: each writes its own shard with WriteShardFile
// and sends the returned ShardRecord (as JSON) to one of them, which checks
// that the records tile every tensor and writes index.json with
// CommitCheckpointIndex — the same code path Commit uses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/parallel/checkpoint/checkpoint_index.h"
#include "tessera/parallel/checkpoint/safetensors.h"

namespace tessera::parallel::checkpoint {

// The box [offset, offset + shape) of global tensor `name`, row-major.
struct SliceToSave {
  std::string name;
  StorageDtype dtype = StorageDtype::kF32;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offset;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // ShapeVolume(shape) elements; borrowed until Commit returns
  int shard = 0;               // in [0, num_shards)
};

// One shard file as written: its name, size and digest, and each slice it
// holds (tensor, dtype, global shape, key in the file, box).
struct ShardRecord {
  struct Slice {
    std::string name;
    StorageDtype dtype = StorageDtype::kF32;
    std::vector<int64_t> global_shape;
    SliceLocation location;
  };
  std::string file;
  ShardFileInfo info;
  std::vector<Slice> slices;
};

nlohmann::json ShardRecordToJson(const ShardRecord& record);
// InvalidArgument naming `where` and the defect for malformed records.
StatusOr<ShardRecord> ShardRecordFromJson(const nlohmann::json& j, std::string_view where);

// Writes shard `shard` of `num_shards` of the checkpoint in `dir` (created
// if needed) holding `slices` (their .shard is ignored): "<name>.tmp",
// fsync, rename. A slice's key is its tensor's name, or "name@o0,o1,..."
// when the shard holds several slices of that tensor. Refuses
// (AlreadyExists) to write into a directory that already holds a
// checkpoint.
StatusOr<ShardRecord> WriteShardFile(const std::filesystem::path& dir, int shard, int num_shards, int64_t step,
                                     std::span<const SliceToSave> slices);

// Builds the index from every shard's record, validates it (InvalidArgument:
// a tensor's slices overlap or leave gaps, dtypes disagree, a shard is
// missing), writes index.json (never replacing one: AlreadyExists) and
// fsyncs the directory and its parent. On failure the shard files named
// by the records are removed unless another index.json refers to them.
Status CommitCheckpointIndex(const std::filesystem::path& dir, int64_t step, const nlohmann::json& metadata,
                             std::span<const ShardRecord> records);

class CheckpointWriter {
 public:
  explicit CheckpointWriter(int num_shards, int64_t step = 0);

  int num_shards() const { return num_shards_; }
  void set_step(int64_t step) { step_ = step; }
  // Free-form JSON object stored as index.json's "metadata".
  Status SetMetadata(nlohmann::json metadata);

  // InvalidArgument when the slice does not fit its global tensor, the shard
  // is out of range, or dtype/global shape disagree with earlier slices of
  // the same tensor. Tiling (no overlap, no gap) is checked by Commit.
  Status AddSlice(SliceToSave slice);
  // A whole tensor as one slice.
  Status AddTensor(std::string name, StorageDtype dtype, std::vector<int64_t> shape, const void* data, int shard);

  // Validates everything (InvalidArgument: slices overlap, leave gaps, ...),
  // then writes the checkpoint into `dir` (created if needed).
  Status Commit(const std::filesystem::path& dir) const;

 private:
  int num_shards_;
  int64_t step_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<SliceToSave> slices_;
};

}  // namespace tessera::parallel::checkpoint
