// Cost and reliability of a training run: wall-clock time and card-hours
// for a token budget at a plan's throughput, and goodput under failures,
// through sim's fault model (tessera/sim/faults.h):
//  - cards fail independently with the per-card MTBF (cluster spec), so the
//    job sees one every M = MTBF_card / N;
//  - a checkpoint blocks training for delta seconds — by default the time
//    to copy one device's model states to the host tier over its host link
//    (an in-memory checkpoint, Gemini-style, persisted asynchronously) —
//    every tau = sqrt(2 delta M) (Young/Daly);
//  - a failure loses half a segment on average plus the recovery (a spare
//    takes over while the spare pool lasts, then the job restarts from the
//    checkpoint);
//  - goodput is sim's first-order ExpectedGoodput, cross-checked by its
//    Monte Carlo SimulateFaults (deterministic seed) in `simulated_goodput`.
// Pure functions; thread-safe.
#pragma once

#include "tessera/plan/time_model.h"
#include "tessera/sim/faults.h"
#include "tessera/sim/cluster_spec.h"

namespace tessera::plan {

struct ReliabilityOptions {
  double checkpoint_write_s = 0;  // 0: model-state bytes per device / host-link bandwidth
  double restart_s = 600;         // relaunch, rebuild communicators, reload (8k-card jobs: minutes)
  double spare_takeover_s = 30;   // a spare card replaces the failed one (the brief's < 30 s)
  double spare_fraction = 0.02;   // spare pool as a fraction of the cards (0: wait for repairs)
  double mtbf_hours = 0;          // per card; 0: the cluster spec's
};

struct RunCost {
  double tokens = 0;
  double devices = 0;
  double failure_free_s = 0;   // tokens / throughput
  double wall_s = 0;           // with checkpoints and failures
  double card_hours = 0;       // devices * wall
  double ideal_card_hours = 0; // devices * failure-free time
  double job_mtbf_s = 0;       // M
  double checkpoint_write_s = 0;
  double checkpoint_interval_s = 0;  // Young: sqrt(2 delta M)
  double expected_failures = 0;
  double goodput = 0;          // failure_free / wall (closed form)
  double simulated_goodput = 0;  // Monte Carlo, same parameters
};

// Errors if the job cannot make progress (failures faster than restarts) or
// the inputs are not positive.
StatusOr<RunCost> EstimateRunCost(const StepBreakdown& step, double devices, double tokens,
                                  const sim::ClusterSpec& c, const ReliabilityOptions& o = ReliabilityOptions());

}  // namespace tessera::plan
