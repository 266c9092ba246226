// The in-memory tier of checkpoints: every `checkpoint.memory_every` steps
// each rank keeps a copy of everything it holds (its parameters, AdamW
// state and step counts, exactly as its ZeroOptimizer holds them) in RAM
// that outlives the process — a file in tmpfs (/dev/shm), one per rank —
// and, when the job spans several nodes, a replica of it in the RAM of the
// next node (rank r's copy goes to rank (r + ranks per node) mod world,
// which writes it into its own node's tmpfs). The agent restarts failed
// ranks on the same nodes: a process that died leaves its node's copy
// behind, a node whose memory is gone (its tmpfs folder removed) has its
// ranks' copies on the next node, so the group restores the newest step
// every rank can reach — without reading a disk checkpoint, and with no
// step lost when memory_every = 1.
//
// A snapshot restores only into the same layout (the same spans of the
// same parameters on every rank: a fingerprint checks it); anything else
// resumes from a disk checkpoint (sharded_checkpointer.h).
// Files: <dir>/<job>/node-<k>/rank-<r>.step-<N>.safetensors (own) and
// replica-<r>.step-<N>.safetensors (a peer's), written atomically, the
// last two steps kept; each holds an XXH3-64 of its tensors.
// Saving is asynchronous like the disk tier's (a host copy at the step
// boundary, files and the replica exchange on a background thread over the
// tier's own communicator). Not thread-safe: the training thread drives it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/parallel/zero.h"
#include "tessera/train/background_job.h"

namespace tessera::train {

struct MemoryCheckpointOptions {
  std::filesystem::path dir;  // the run's tmpfs folder (<job>/node-<k> below it)
  // The job (TESSERA_JOB_TOKEN's digest: one job's restarts share it, other
  // jobs of the same run name do not); "" = "local".
  std::string job;
  // A first attempt (restart_count 0) starts clean: this rank's files left
  // by an earlier job in its folder are deleted.
  bool fresh_start = true;
  int ranks_per_node = 0;     // 0: LOCAL_WORLD_SIZE (else every rank is one node)
  int node = -1;              // -1: rank / ranks_per_node
};

class MemoryCheckpointer {
 public:
  // Collective over `world` (which must outlive it).
  static StatusOr<std::unique_ptr<MemoryCheckpointer>> Create(comm::Communicator& world,
                                                              const MemoryCheckpointOptions& options);
  ~MemoryCheckpointer();
  MemoryCheckpointer(const MemoryCheckpointer&) = delete;
  MemoryCheckpointer& operator=(const MemoryCheckpointer&) = delete;

  // Collective: snapshot after `step`; `metadata` (a flat JSON object of
  // scalars, e.g. the loss scale) is stored with it. Returns the previous
  // save's error, if any (this one is started regardless: the tier is best
  // effort, the disk tier is the fallback).
  Status Save(int64_t step, parallel::ZeroOptimizer& zero, const nlohmann::json& metadata);
  Status Wait();
  // The optimizer's layout changed (pipeline rebalancing moved layers): waits
  // for the save in flight (its status) so the next Save captures the new
  // layout. Snapshots of the old layout no longer restore (fingerprint).
  Status ForgetLayout();
  // After a successful run: deletes this rank's snapshot and the replica it
  // keeps (tmpfs is RAM).
  void Discard();

  struct Restored {
    int64_t step = 0;
    nlohmann::json metadata;
    int replicas_used = 0;  // ranks restored from a peer node's copy
  };
  // Collective: the newest step that every rank can restore (its own copy,
  // or the replica on the next node), loaded into `zero`. nullopt when there
  // is none (nothing saved, another layout): then `zero` is untouched.
  StatusOr<std::optional<Restored>> Restore(parallel::ZeroOptimizer& zero);

  int64_t saves() const { return saves_; }
  struct Held;  // (internal) a rank's state, flattened
  double snapshot_seconds() const { return snapshot_s_; }
  const std::filesystem::path& node_dir() const { return node_dir_; }

 private:
  MemoryCheckpointer() = default;
  std::unique_ptr<comm::Communicator> comm_;
  std::filesystem::path node_dir_;
  int ranks_per_node_ = 1;
  int peer_ = 0;  // holds my replica
  int prev_ = 0;  // whose replica I hold
  bool replicate_ = false;
  BackgroundJob writer_;  // declared after comm_: joined before the communicator goes
  std::shared_ptr<Held> held_;  // reused: fresh pages cost more than the copy
  int64_t saves_ = 0;
  double snapshot_s_ = 0;
};

}  // namespace tessera::train
