// The index of a sharded checkpoint directory (index.json): which global
// tensors exist (dtype, global shape), where each of their slices lives (a
// shard file, the tensor's key inside it, the slice's offset and extent in
// the global tensor), and every shard file's size and XXH3-64 digest:
//
//   {"format": "tessera-checkpoint", "version": 1, "step": 100,
//    "metadata": {...free-form...},
//    "tensors": {"w": {"dtype": "F32", "shape": [4, 6], "shards": [
//        {"file": "shard-00000-of-00002.safetensors", "key": "w",
//         "offset": [0, 0], "shape": [2, 6]}, ...]}},
//    "files": {"shard-00000-of-00002.safetensors":
//        {"bytes": 1234, "xxh3_64": "2d06800538d394c2"}}}
//
// ValidateCheckpointIndex checks the structure without touching files:
// known format/version, plain file names, every slice inside its global
// tensor, and the slices of each tensor tiling it exactly (no overlap, no
// gap). Value types and pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/parallel/checkpoint/safetensors.h"

namespace tessera::parallel::checkpoint {

inline constexpr std::string_view kCheckpointFormat = "tessera-checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;
inline constexpr std::string_view kIndexFileName = "index.json";
// index.json files larger than this are refused.
inline constexpr uint64_t kMaxIndexBytes = 1ull << 30;

struct SliceLocation {
  std::string file;             // shard file name (no directory)
  std::string key;              // the slice's tensor name inside that file
  std::vector<int64_t> offset;  // start in the global tensor, per dim
  std::vector<int64_t> shape;   // extent, per dim
};

struct GlobalTensor {
  StorageDtype dtype = StorageDtype::kF32;
  std::vector<int64_t> shape;
  std::vector<SliceLocation> slices;
};

struct ShardFileInfo {
  uint64_t bytes = 0;
  uint64_t xxh3_64 = 0;
};

struct CheckpointIndex {
  int64_t step = 0;
  nlohmann::json metadata = nlohmann::json::object();
  std::map<std::string, GlobalTensor> tensors;
  std::map<std::string, ShardFileInfo> files;
};

// "shard-00003-of-00008.safetensors".
std::string ShardFileName(int index, int count);

// Structure and tiling (see the header comment); `where` names the index in
// messages. DataLoss on any defect.
Status ValidateCheckpointIndex(const CheckpointIndex& index, std::string_view where);

// Keys in the order above (format first) for human readers.
nlohmann::ordered_json CheckpointIndexToJson(const CheckpointIndex& index);
// Parses and validates index.json text.
StatusOr<CheckpointIndex> ParseCheckpointIndex(std::string_view text, std::string_view where);

}  // namespace tessera::parallel::checkpoint
