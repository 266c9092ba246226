// Reads a sharded checkpoint directory (see checkpoint_writer.h and
// checkpoint_index.h). Open() parses and validates index.json (tiling
// included) and checks that every listed shard file exists with the listed
// size; shard contents are checked lazily: the first read from a shard maps
// it, compares its XXH3-64 with the index and checks that each slice stored
// there has the dtype and shape the index says. Verify() does that for every
// shard, from disk, up front.
//
// ReadTensor assembles a whole global tensor; ReadSlice assembles any n-d
// box of it from whichever stored slices overlap the box, so a checkpoint
// saved with one parallel layout loads into another (resharding).
//
// Thread-safe: any number of threads may read concurrently (each shard is
// loaded once, under its own lock). Errors name the path and the defect:
// NotFound (no checkpoint / no such tensor), DataLoss (damaged files),
// InvalidArgument/OutOfRange (bad requests), IoError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/parallel/checkpoint/checkpoint_index.h"
#include "tessera/parallel/checkpoint/safetensors.h"

namespace tessera::parallel::checkpoint {

// A dense row-major array read from a checkpoint.
struct TensorData {
  StorageDtype dtype = StorageDtype::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

struct VerifyReport {
  int64_t tensors = 0;
  int64_t files = 0;
  uint64_t bytes = 0;  // shard bytes hashed
};

class CheckpointReader {
 public:
  // NotFound "'dir' is not a checkpoint (no index.json)" when it has none.
  static StatusOr<CheckpointReader> Open(const std::filesystem::path& dir);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  const std::filesystem::path& dir() const { return dir_; }
  const CheckpointIndex& index() const { return index_; }
  int64_t step() const { return index_.step; }
  const nlohmann::json& metadata() const { return index_.metadata; }
  // nullptr when the checkpoint has no tensor `name`.
  const GlobalTensor* FindTensor(std::string_view name) const;

  // Every shard: size, digest, safetensors structure, and that it holds
  // exactly the slices the index places in it, with their dtype and shape.
  StatusOr<VerifyReport> Verify() const;

  // The shard files a box of tensor `name` reads from (empty for an unknown
  // tensor or a box outside it).
  std::vector<std::string> FilesFor(std::string_view name, std::span<const int64_t> offset,
                                    std::span<const int64_t> shape) const;
  // One box of a tensor, into `out` (ReadSliceInto's arguments).
  struct ReadRequest {
    std::string name;
    std::vector<int64_t> offset;
    std::vector<int64_t> shape;
    std::span<std::byte> out;
  };
  // Many reads, up to `threads` shards at a time (0: one per core): requests
  // are grouped by the first shard they read and each worker loads (maps,
  // hashes, checks) one shard and copies its group out, so the disk reads of
  // one shard overlap the hashing and copying of another. The first error.
  Status ReadMany(std::span<const ReadRequest> requests, int threads = 0) const;

  StatusOr<TensorData> ReadTensor(std::string_view name) const;
  // The box [offset, offset + shape) of tensor `name`.
  StatusOr<TensorData> ReadSlice(std::string_view name, std::span<const int64_t> offset,
                                 std::span<const int64_t> shape) const;
  // The same into `out` (exactly the box's byte size).
  Status ReadSliceInto(std::string_view name, std::span<const int64_t> offset, std::span<const int64_t> shape,
                       std::span<std::byte> out) const;

 private:
  struct ShardSlot;
  using ShardSlots = std::map<std::string, std::unique_ptr<ShardSlot>, std::less<>>;

  CheckpointReader(std::filesystem::path dir, CheckpointIndex index);
  // The verified shard `file` (loaded and checked once, unless `reload`).
  StatusOr<std::shared_ptr<const SafetensorsFile>> Shard(const std::string& file, bool reload = false) const;
  StatusOr<std::shared_ptr<const SafetensorsFile>> LoadShard(const std::string& file) const;
  StatusOr<const GlobalTensor*> CheckRequest(std::string_view name, std::span<const int64_t> offset,
                                             std::span<const int64_t> shape) const;

  std::filesystem::path dir_;
  CheckpointIndex index_;
  std::unique_ptr<ShardSlots> shards_;  // one slot per listed file, fixed at Open
};

}  // namespace tessera::parallel::checkpoint
