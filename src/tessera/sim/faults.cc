#include "tessera/sim/faults.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tessera/base/check.h"

namespace tessera::sim {
namespace {

double Interval(const FaultParams& p) { return p.interval_s > 0 ? p.interval_s : YoungDalyInterval(p); }

}  // namespace

double JobMtbfSeconds(const FaultParams& p) {
  TESSERA_CHECK(p.cards > 0 && p.card_mtbf_h > 0, "cards {} and card MTBF {} h", p.cards, p.card_mtbf_h);
  return p.card_mtbf_h * 3600 / static_cast<double>(p.cards);
}

double YoungDalyInterval(const FaultParams& p) { return std::sqrt(2 * p.checkpoint_s * JobMtbfSeconds(p)); }

double ExpectedGoodput(const FaultParams& p) {
  const double m = JobMtbfSeconds(p), tau = Interval(p);
  const double recovery = (p.spares > 0 ? p.spare_takeover_s : p.repair_s) + p.restart_s;
  // Running time U (training, checkpoints, lost work) sees failures at rate
  // 1/M, each losing half a segment and adding a recovery.
  return (1.0 - (tau + p.checkpoint_s) / (2 * m)) / ((1.0 + p.checkpoint_s / tau) * (1.0 + recovery / m));
}

FaultResult SimulateFaults(const FaultParams& p) {
  TESSERA_CHECK(p.work_s > 0 && p.checkpoint_s >= 0 && p.restart_s >= 0, "fault parameters");
  FaultResult r;
  r.interval_s = Interval(p);
  std::mt19937_64 rng(p.seed);
  std::exponential_distribution<double> card_gap(1.0 / JobMtbfSeconds(p));
  double now = 0, done = 0;  // wall clock; work saved in a checkpoint
  double next_failure = card_gap(rng);
  int64_t spares = p.spares;
  while (done < p.work_s) {
    // Train one interval (or what is left), then checkpoint (not after the last).
    const double segment = std::min(r.interval_s, p.work_s - done);
    const bool last = done + segment >= p.work_s;
    const double need = segment + (last ? 0 : p.checkpoint_s);
    if (now + need <= next_failure) {
      now += need;
      done += segment;
      if (!last) r.checkpoint_overhead_s += p.checkpoint_s;
      continue;
    }
    // A card fails mid-segment (or mid-checkpoint): lose everything since the last checkpoint.
    const double lost = next_failure - now;
    r.lost_work_s += lost;
    now = next_failure;
    ++r.card_failures;
    double recovery = p.restart_s;
    if (spares > 0) {
      --spares;
      ++r.spares_used;
      recovery += p.spare_takeover_s;
    } else {
      recovery += p.repair_s;
    }
    r.recovery_s += recovery;
    now += recovery;
    next_failure = now + card_gap(rng);  // memoryless: failures during recovery are folded in
  }
  if (p.links > 0 && p.link_mtbf_h > 0) {
    std::poisson_distribution<int64_t> links(now * static_cast<double>(p.links) / (p.link_mtbf_h * 3600));
    r.link_failures = links(rng);
  }
  r.wall_s = now;
  r.goodput = p.work_s / now;
  return r;
}

}  // namespace tessera::sim
