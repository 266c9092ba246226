// Learning-rate schedule: linear warm-up then cosine decay to a floor.
//   step < warmup:            lr = max_lr · (step + 1) / warmup
//   warmup <= step <= total:  lr = min_lr + ½(1 + cos(π·(step − warmup)/(total − warmup)))·(max_lr − min_lr)
//   step > total:             lr = min_lr
// Steps count from 0 (the first optimizer step uses LearningRate(0)).
// total_steps == warmup_steps means no decay phase (max_lr after warm-up,
// then min_lr past the end). Plain value type; thread-safe.
#pragma once

#include <cstdint>

#include "tessera/base/status.h"

namespace tessera::optim {

struct WarmupCosineSchedule {
  double max_lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // 0 <= min_lr <= max_lr, 0 <= warmup_steps <= total_steps, total_steps >= 1.
  Status Validate() const;
  double LearningRate(int64_t step) const;
};

}  // namespace tessera::optim
