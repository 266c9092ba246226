// Dynamic batching: train.micro_batch = "auto" picks the micro-batch from the
// memory budget and the measured per-sample activation footprint.
//
// The budget is train.device_memory_limit, or else the machine's physical
// memory divided by the ranks on this host. The footprint is measured, not
// modelled: a one-process copy of the model (train/stage_probe.h, in graph
// mode when train.graph is on) runs forward + backward at micro-batches 1 and
// 4, and the allocator's high-water mark above the state held before the step
// gives fixed + per_sample x b. Per rank, the training state (fp32 weights and
// gradients, AdamW's two moments, divided over dp under ZeRO >= 1) splits over
// tp x pp; activations split over tp (pipeline stages hold their 1/pp of the
// layers for up to pp micro-batches in flight under 1F1B, which cancels).
// The chosen micro-batch is the largest divisor of the per-replica batch
// (global_batch / dp; for the interleaved schedule, leaving a multiple of pp
// micro-batches) whose estimate fits 90 % of the budget; none fitting is an
// error with the figures. Every rank measures the same model the same way,
// so all ranks choose the same value.
#pragma once

#include <string>

#include "tessera/train/train_config.h"

namespace tessera::train {

struct AutoMicroBatch {
  int64_t micro_batch = 0;
  int64_t budget_bytes = 0;
  int64_t state_bytes = 0;       // per rank
  int64_t fixed_bytes = 0;       // activations independent of the batch (per rank)
  int64_t per_sample_bytes = 0;  // per rank
  std::string Describe() const;
};

// No-op (returns micro_batch unchanged) unless config.train.micro_batch == 0
// ("auto"); otherwise sets it. `world_size` resolves an elastic dp;
// `local_ranks` shares the host's memory when no limit is set.
StatusOr<AutoMicroBatch> ResolveAutoMicroBatch(TrainConfig& config, int world_size, int local_ranks);

}  // namespace tessera::train
