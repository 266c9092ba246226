// A folder of checkpoints, one subfolder per step: "step-00000100/" (at
// least 8 digits). Only subfolders with that name AND an index.json are
// checkpoints; anything else (half-written saves, .tmp files, other files)
// is ignored and never touched. Deleting old checkpoints (KeepLast) is the
// only operation here that removes anything. Thread-compatible: concurrent
// calls on one root must be serialized by the caller.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::parallel::checkpoint {

struct CheckpointEntry {
  int64_t step = 0;
  std::filesystem::path dir;
};

// "step-00000042".
std::string StepDirName(int64_t step);
// The step of a name StepDirName produces, else nullopt.
std::optional<int64_t> ParseStepDirName(std::string_view name);

// Checkpoints under `root`, ascending by step. A missing root has none;
// IoError when it cannot be listed.
StatusOr<std::vector<CheckpointEntry>> ListCheckpoints(const std::filesystem::path& root);
// The highest step, or nullopt when there is none.
StatusOr<std::optional<CheckpointEntry>> LatestCheckpoint(const std::filesystem::path& root);
// Deletes all but the `keep` (>= 1) latest checkpoints: each one's
// index.json first (so it stops being a checkpoint atomically), then its
// folder. Returns the deleted folders.
StatusOr<std::vector<std::filesystem::path>> KeepLastCheckpoints(const std::filesystem::path& root, int keep);

}  // namespace tessera::parallel::checkpoint
