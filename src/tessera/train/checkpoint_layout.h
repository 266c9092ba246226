// `tessera ckpt convert SRC DST --set parallel.tp=4 ...`: rewrites a trainer
// checkpoint for another parallel layout. The target mesh's ranks run as
// threads of this process (an in-memory store, the shm transport); each
// builds its part of the model from the config stored in the checkpoint
// (plus the overrides), loads exactly the elements it holds (resharding,
// sharded_checkpointer.h) and saves its shard; the result is the checkpoint
// a run of that layout would have written at the same step. Loading works
// from any layout anyway: converting pays off when the same layout is
// loaded many times, or hands per-rank files to another system.
// The dataset of the stored config must be readable (the trainer builds it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::train {

struct LayoutConversion {
  int world_size = 0;
  int64_t step = 0;
  std::string mesh;  // "dp 2 × pp 1 × tp 2 (ep 1)"
};

StatusOr<LayoutConversion> ConvertCheckpointLayout(const std::filesystem::path& src, const std::filesystem::path& dst,
                                                   const std::vector<std::string>& overrides);

}  // namespace tessera::train
