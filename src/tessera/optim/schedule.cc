#include "tessera/optim/schedule.h"

#include <cmath>
#include <numbers>

namespace tessera::optim {

Status WarmupCosineSchedule::Validate() const {
  if (!(max_lr >= 0.0) || !(min_lr >= 0.0) || min_lr > max_lr) {
    return InvalidArgument("lr schedule: need 0 <= min_lr <= max_lr, got min_lr={} max_lr={}", min_lr, max_lr);
  }
  if (total_steps < 1) return InvalidArgument("lr schedule: total_steps must be >= 1, got {}", total_steps);
  if (warmup_steps < 0 || warmup_steps > total_steps) {
    return InvalidArgument("lr schedule: warmup_steps must lie in [0, total_steps={}], got {}", total_steps,
                           warmup_steps);
  }
  return Status::Ok();
}

double WarmupCosineSchedule::LearningRate(int64_t step) const {
  if (step < 0) step = 0;
  if (step < warmup_steps) {
    return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (step > total_steps) return min_lr;
  if (total_steps == warmup_steps) return step == total_steps ? max_lr : min_lr;
  double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (max_lr - min_lr);
}

}  // namespace tessera::optim
