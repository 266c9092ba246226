// Fault model: card and link failures drawn from MTBFs (exponential
// inter-arrival times), spare takeover, checkpoint/restart, and the
// resulting goodput of a training job. Monte Carlo (deterministic for a
// seed) plus the first-order closed form it is checked against.
//
// A card failure interrupts the job: the work since the last checkpoint is
// lost, then recovery takes `spare_takeover_s` while spares last (the
// brief's self-healing) or `repair_s` once they are gone, plus `restart_s`
// (reload the checkpoint, rebuild communicators). Link failures do not stop
// the job (the network routes around them, see the flow engine); they are
// counted. Checkpoints cost `checkpoint_s` of stalled training every
// `interval_s` (0: the Young/Daly optimum sqrt(2 checkpoint_s MTBF_job)).
// Thread-safe (pure functions).
#pragma once

#include <cstdint>

namespace tessera::sim {

struct FaultParams {
  int64_t cards = 1;
  double card_mtbf_h = 80000;
  int64_t links = 0;
  double link_mtbf_h = 0;        // 0: links never fail
  int64_t spares = 0;
  double spare_takeover_s = 30;  // the brief's recovery < 30 s
  double repair_s = 4 * 3600;    // no spare left: wait for a repaired card
  double restart_s = 60;
  double checkpoint_s = 30;
  double interval_s = 0;         // 0: Young/Daly
  double work_s = 30 * 86400;    // failure-free training time needed
  uint64_t seed = 1;
};

struct FaultResult {
  double interval_s = 0;     // checkpoint interval used
  int64_t card_failures = 0, link_failures = 0, spares_used = 0;
  double wall_s = 0;         // time to finish work_s
  double lost_work_s = 0;    // running time lost to failures (recomputed work, torn checkpoints)
  double checkpoint_overhead_s = 0;
  double recovery_s = 0;
  double goodput = 0;        // work_s / wall_s
};

// Job-level MTBF (seconds): the card MTBF divided by the number of cards.
double JobMtbfSeconds(const FaultParams& p);
// sqrt(2 checkpoint_s JobMtbf) (Young 1974 / Daly 2006 first order).
double YoungDalyInterval(const FaultParams& p);
// First-order expected goodput (1 - (tau + delta)/2M) / ((1 + delta/tau)(1 + R/M))
// with tau the interval, delta the checkpoint cost, R the per-failure
// recovery, M the job MTBF (failures strike running time, half a segment lost each).
double ExpectedGoodput(const FaultParams& p);
FaultResult SimulateFaults(const FaultParams& p);

}  // namespace tessera::sim
