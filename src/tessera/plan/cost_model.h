// Cost and reliability of a training run: wall-clock time and card-hours
// for a token budget at a plan's throughput, and goodput under failures.
//
// Failures: each card fails independently with the cluster spec's per-card
// MTBF, so the job sees one every M = MTBF_card / N. Checkpoints are taken
// every tau seconds of work; writing one blocks training for delta seconds
// (by default the time to copy one device's model states to the host tier
// over its host link — an in-memory checkpoint, Gemini-style, persisted
// asynchronously). Young's optimal interval is tau = sqrt(2 delta M). A
// failure costs the restart time R plus, on average, half a segment of
// lost work. With W the wall-clock time and S the failure-free time:
//   W = S (1 + delta/tau) / (1 - (R + (tau + delta)/2) / M),  goodput = S / W.
// Pure functions; thread-safe.
#pragma once

#include "tessera/plan/time_model.h"
#include "tessera/sim/cluster_spec.h"

namespace tessera::plan {

struct ReliabilityOptions {
  double checkpoint_write_s = 0;  // 0: model-state bytes per device / host-link bandwidth
  double restart_s = 600;         // detect, replace the card, relaunch, reload (Llama 3-class jobs: minutes)
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
  double goodput = 0;          // failure_free / wall
};

// Errors if the job cannot make progress (failures faster than restarts) or
// the inputs are not positive.
StatusOr<RunCost> EstimateRunCost(const StepBreakdown& step, double devices, double tokens,
                                  const sim::ClusterSpec& c, const ReliabilityOptions& o = ReliabilityOptions());

}  // namespace tessera::plan
