// Converting a sharded checkpoint into other layouts. Today: merging it into
// ONE standard safetensors file (every global tensor whole, as any
// safetensors loader expects). Resharding into another parallel layout will
// sit beside it (CheckpointReader::ReadSlice does the data movement).
// Thread-safe as CheckpointReader is.
#pragma once

#include <cstdint>
#include <filesystem>

#include "tessera/base/status.h"
#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/safetensors.h"

namespace tessera::parallel::checkpoint {

struct MergeReport {
  int64_t tensors = 0;
  uint64_t bytes = 0;  // of the written file
};

// The merged file's __metadata__ (strings, as the format requires):
// "format": "pt" (what Hugging Face loaders check for), "tessera.format",
// "tessera.step", and "metadata.<key>" for each key of the index metadata
// (strings as is, other JSON values serialized).
SafetensorsMetadata MergedMetadata(const CheckpointIndex& index);

// Writes every global tensor of `reader`, whole and in name order, to `out`
// (atomically: "<out>.tmp", fsync, rename), holding one tensor in memory at
// a time. AlreadyExists when `out` exists and !overwrite.
StatusOr<MergeReport> MergeToSafetensors(const CheckpointReader& reader, const std::filesystem::path& out,
                                         bool overwrite);

}  // namespace tessera::parallel::checkpoint
