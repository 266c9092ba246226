#include "tessera/plan/cost_model.h"

#include <cmath>

namespace tessera::plan {

StatusOr<RunCost> EstimateRunCost(const StepBreakdown& step, double devices, double tokens,
                                  const sim::ClusterSpec& c, const ReliabilityOptions& o) {
  if (tokens <= 0) return InvalidArgument("cost: the token budget must be positive, got {}", tokens);
  if (devices <= 0 || step.tokens_per_s <= 0) {
    return InvalidArgument("cost: needs a positive device count and throughput (devices {}, tokens/s {})", devices,
                           step.tokens_per_s);
  }
  const double mtbf_h = o.mtbf_hours > 0 ? o.mtbf_hours : c.device.mtbf_hours;
  if (mtbf_h <= 0) return InvalidArgument("cost: cluster '{}' gives no device mtbf_hours", c.name);
  RunCost r;
  r.tokens = tokens;
  r.devices = devices;
  r.failure_free_s = tokens / step.tokens_per_s;
  r.ideal_card_hours = devices * r.failure_free_s / 3600;
  r.job_mtbf_s = mtbf_h * 3600 / devices;
  const MemoryBreakdown& mem = step.memory;
  const double state_bytes = mem.weights + mem.gradients + mem.optimizer + mem.host;
  double delta = o.checkpoint_write_s;
  if (delta <= 0) {
    if (c.device.ddr_link_bw <= 0) {
      return InvalidArgument("cost: cluster '{}' has no host link (ddr_link_gbyte_s); give a checkpoint write time",
                             c.name);
    }
    delta = (state_bytes - mem.host) / c.device.ddr_link_bw;  // offloaded states are on the host already
  }
  r.checkpoint_write_s = delta;
  const double M = r.job_mtbf_s;
  r.checkpoint_interval_s = std::sqrt(2 * delta * M);
  const double tau = r.checkpoint_interval_s;
  const double loss_per_failure = o.restart_s + (tau + delta) / 2;
  if (loss_per_failure >= M) {
    return FailedPrecondition(
        "cost: the job fails every {:.0f} s on average ({} cards at {} h MTBF) but each failure costs {:.0f} s "
        "(restart {} s + half a checkpoint interval): it cannot make progress",
        M, devices, mtbf_h, loss_per_failure, o.restart_s);
  }
  r.wall_s = r.failure_free_s * (1 + delta / tau) / (1 - loss_per_failure / M);
  r.card_hours = devices * r.wall_s / 3600;
  r.expected_failures = r.wall_s / M;
  r.goodput = r.failure_free_s / r.wall_s;
  return r;
}

}  // namespace tessera::plan
