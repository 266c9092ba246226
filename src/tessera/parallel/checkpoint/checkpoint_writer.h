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
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
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
  struct Plan;
  StatusOr<Plan> MakePlan() const;

  int num_shards_;
  int64_t step_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<SliceToSave> slices_;
};

}  // namespace tessera::parallel::checkpoint
