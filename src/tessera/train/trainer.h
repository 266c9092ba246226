// Trainer: single-process training of a GPT on a Dataset — the loop behind
// `tessera train`. Each step: gradient accumulation over micro-batches
// (global_batch / micro_batch), global-norm clipping, AdamW at the
// warm-up + cosine learning rate. Periodic held-out evaluation. Writes
// runs/<name>/{config.json, metrics.jsonl, summary.json} and shows progress.
// Data order depends only on (train.seed, step), parameters only on
// model.seed, so a run is reproducible for any thread count.
// Operator argument errors (OpError) are returned as Status. One thread
// drives a Trainer; kernels parallelize inside.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/data/dataset.h"
#include "tessera/models/gpt.h"
#include "tessera/train/train_config.h"

namespace tessera::train {

struct EvalResult {
  double loss = 0;    // mean cross-entropy per scored token
  double metric = 0;  // dataset metric (e.g. exact match)
  int64_t samples = 0;
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t skipped_steps = 0;    // updates skipped for a non-finite gradient norm
  double final_loss = 0;        // training loss (cross-entropy) of the last step
  double final_loss_avg10 = 0;  // mean over the last 10 steps
  EvalResult eval;
  std::string metric_name;
  double chance_metric = 0;
  double tokens_per_s = 0;  // processed tokens per second over all steps after the first
  double model_flops_per_token = 0;
  double mfu = 0;                // model FLOP/s / measured peak FLOP/s (compute dtype, all cores)
  double peak_flops = 0;
  int64_t peak_memory_bytes = 0;  // allocator high-water mark
  int64_t parameters = 0;
  int64_t active_parameters = 0;
  double wall_s = 0;
  std::string run_dir;
  nlohmann::json parallel;  // multi-rank runs: mesh, per-rank memory, comm fraction, bubble, stage balance
  int64_t checkpoints = 0;            // checkpoints saved ([checkpoint] every)
  double checkpoint_snapshot_s = 0;   // time they took on the training path (copies at step boundaries)
  double checkpoint_write_s = 0;      // time their background writes took
  double checkpoint_interval_s = 0;   // time-based interval in force (every_seconds or Young/Daly; 0: none)
  int64_t memory_snapshots = 0;       // in-memory snapshots taken (checkpoint.memory_every)
  double memory_snapshot_s = 0;       // their time on the training path (rank 0)
  nlohmann::json ToJson() const;
};

struct TrainerOptions {
  FILE* out = stdout;        // progress and messages
  bool force_plain = false;  // no progress bar even on a terminal
  bool write_records = true; // runs/<name>/ files
  // Pin the kernel threads to share `bind_slot` of `bind_slots` of the
  // host's CPUs (hal/affinity.h); `tessera train` passes the local rank and
  // the number of ranks on this host. -1 = leave them unpinned.
  int bind_slot = -1;
  int bind_slots = 1;
  // Called after each training micro-batch's forward (step from 1, micro-
  // batch within the step), e.g. to read the MoE layers' routing.
  std::function<void(int64_t step, int64_t micro, const models::Gpt& model)> after_forward;
};

// Applies options.bind_slot (after the thread count is set); a share that
// cannot be had (more ranks than CPUs) leaves the threads unpinned.
void PinKernelThreads(const TrainerOptions& options);

StatusOr<std::unique_ptr<data::Dataset>> MakeDataset(const TrainConfig& config);

// MFU's denominator for a job of `world_size` ranks: every core of every
// host (LOCAL_WORLD_SIZE ranks per host; each rank runs fewer threads, so a
// process's own "all threads" peak would undercount) at the measured
// per-core peak for `dtype` (hal/peak.h).
double JobPeakFlops(std::string_view dtype, int world_size);

class Trainer {
 public:
  static StatusOr<std::unique_ptr<Trainer>> Create(const TrainConfig& config, const TrainerOptions& options = {});
  Status Run(TrainSummary* summary);
  EvalResult Evaluate();
  models::Gpt& model() { return *model_; }
  // Mean training loss of each step run so far.
  const std::vector<double>& losses() const { return losses_; }

 private:
  Trainer(const TrainConfig& config, const TrainerOptions& options) : config_(config), options_(options) {}
  Status RunImpl(TrainSummary* summary);

  TrainConfig config_;
  TrainerOptions options_;
  std::unique_ptr<data::Dataset> dataset_;
  std::unique_ptr<models::Gpt> model_;
  std::vector<double> losses_;
};

}  // namespace tessera::train
