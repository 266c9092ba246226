// Checkpoints of a multi-rank ParallelTrainer: every rank saves its own
// shard of one checkpoint, asynchronously, and any layout loads it.
//
// Save (collective over the world, at a step boundary, all ranks with the
// same step): waits for the previous save, copies this rank's state into
// host memory (parallel::SnapshotShardedState — the only cost on the
// training path) and returns; a background thread then writes this rank's
// shard file (shard-<rank>-of-<world>.safetensors), sends its record to
// rank 0 over the saver's own communicator (split from the world at
// creation, so the training thread's collectives never interleave with
// it), and rank 0 writes index.json last (checkpoint_writer.h: a
// checkpoint without its index does not exist) and deletes all but the
// last `keep` checkpoints. Rank 0 then tells every rank the outcome, so the
// next Save() / Wait() returns the same status everywhere. A step that
// already has a checkpoint is not written again (and never overwritten).
// The checkpoint directory must be visible to every rank at the same path
// (one machine, or a shared file system).
//
// Load: LoadShardedCheckpoint (collective) reads, on every rank, exactly
// the elements it holds (parallel/sharded_state.h) from a checkpoint of any
// layout — or of the single-process Trainer. With "latest" it tries the
// checkpoints newest first and takes the newest one every rank could load
// (a truncated or corrupted shard, a missing file: the previous good one).
// Not thread-safe: the training thread drives it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/parallel/zero.h"
#include "tessera/train/background_job.h"

namespace tessera::train {

class ShardedCheckpointer {
 public:
  // Collective over `world` (which must outlive the checkpointer).
  static StatusOr<std::unique_ptr<ShardedCheckpointer>> Create(comm::Communicator& world, std::filesystem::path root,
                                                               int64_t keep);
  ~ShardedCheckpointer();  // waits for a save in flight (its error is logged)
  ShardedCheckpointer(const ShardedCheckpointer&) = delete;
  ShardedCheckpointer& operator=(const ShardedCheckpointer&) = delete;

  // Collective. `metadata` (a JSON object) goes into index.json, with
  // "step" added.
  Status Save(int64_t step, parallel::ZeroOptimizer& zero, nlohmann::json metadata);
  // Waits for the save in flight: its status, the same on every rank.
  Status Wait();

  const std::filesystem::path& root() const { return root_; }
  int64_t saves() const { return saves_; }
  double snapshot_seconds() const { return snapshot_s_; }
  double last_snapshot_seconds() const { return last_snapshot_s_; }
  double write_seconds() const { return writer_.seconds(); }
  int64_t last_snapshot_bytes() const { return last_bytes_; }

 private:
  ShardedCheckpointer(std::filesystem::path root, int64_t keep) : root_(std::move(root)), keep_(keep) {}
  std::filesystem::path root_;
  int64_t keep_;
  std::unique_ptr<comm::Communicator> comm_;
  BackgroundJob writer_;  // declared after comm_: joined before the communicator goes
  int64_t saves_ = 0;
  double snapshot_s_ = 0, last_snapshot_s_ = 0;
  int64_t last_bytes_ = 0;
};

// Collective over `comm`, synchronous: this rank's shard and (rank 0) the
// index of one checkpoint in `dir` (no pruning of other checkpoints).
Status SaveShardedCheckpoint(comm::Communicator& comm, const std::filesystem::path& dir, int64_t step,
                             parallel::ZeroOptimizer& zero, nlohmann::json metadata);

struct ShardedResume {
  std::filesystem::path dir;
  nlohmann::json metadata;  // index.json's metadata (kind, step, mesh, loss scale ...)
  int64_t step = 0;
};

// Collective over `world`: loads the checkpoint `spec` names ("latest" under
// `root`, or a directory) into `zero` on every rank. With "latest",
// checkpoints that some rank cannot load are skipped (each skip logged with
// the rank and the reason); NotFound when none is usable. Metadata must say
// kind "tessera-trainer".
StatusOr<ShardedResume> LoadShardedCheckpoint(comm::Communicator& world, const std::string& spec,
                                              const std::filesystem::path& root, parallel::ZeroOptimizer& zero);

}  // namespace tessera::train
