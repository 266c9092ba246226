#include "tessera/plan/cost_model.h"

#include <cmath>

namespace tessera::plan {

StatusOr<RunCost> EstimateRunCost(const StepBreakdown& step, double devices, double tokens,
                                  const sim::ClusterSpec& c, const ReliabilityOptions& o) {
  if (tokens <= 0) return InvalidArgument("cost: the token budget must be positive, got {}", tokens);
  if (devices < 1 || step.tokens_per_s <= 0) {
    return InvalidArgument("cost: needs a positive device count and throughput (devices {}, tokens/s {})", devices,
                           step.tokens_per_s);
  }
  sim::FaultParams f;
  f.cards = static_cast<int64_t>(devices);
  f.card_mtbf_h = o.mtbf_hours > 0 ? o.mtbf_hours : c.device.mtbf_hours;
  if (f.card_mtbf_h <= 0) return InvalidArgument("cost: cluster '{}' gives no device mtbf_hours", c.name);
  f.spares = static_cast<int64_t>(std::ceil(o.spare_fraction * devices));
  f.spare_takeover_s = o.spare_takeover_s;
  f.restart_s = o.restart_s;
  f.checkpoint_s = o.checkpoint_write_s;
  if (f.checkpoint_s <= 0) {
    if (c.device.ddr_link_bw <= 0) {
      return InvalidArgument("cost: cluster '{}' has no host link (ddr_link_gbyte_s); give a checkpoint write time",
                             c.name);
    }
    const MemoryBreakdown& mem = step.memory;  // offloaded states are on the host already
    f.checkpoint_s = (mem.weights + mem.gradients + mem.optimizer) / c.device.ddr_link_bw;
  }
  RunCost r;
  r.tokens = tokens;
  r.devices = devices;
  r.failure_free_s = tokens / step.tokens_per_s;
  r.ideal_card_hours = devices * r.failure_free_s / 3600;
  r.job_mtbf_s = sim::JobMtbfSeconds(f);
  r.checkpoint_write_s = f.checkpoint_s;
  r.checkpoint_interval_s = sim::YoungDalyInterval(f);
  r.goodput = sim::ExpectedGoodput(f);
  if (!(r.goodput > 0)) {
    return FailedPrecondition(
        "cost: the job fails every {:.0f} s on average ({} cards at {} h MTBF) but a checkpoint interval is {:.0f} s "
        "and a recovery {:.0f} s: it cannot make progress",
        r.job_mtbf_s, devices, f.card_mtbf_h, r.checkpoint_interval_s,
        (f.spares > 0 ? f.spare_takeover_s : f.repair_s) + f.restart_s);
  }
  r.wall_s = r.failure_free_s / r.goodput;
  r.card_hours = devices * r.wall_s / 3600;
  r.expected_failures = r.wall_s / r.job_mtbf_s;
  f.work_s = r.failure_free_s;
  r.simulated_goodput = sim::SimulateFaults(f).goodput;
  return r;
}

}  // namespace tessera::plan
