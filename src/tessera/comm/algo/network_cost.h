// The α-β(-γ) formulas of the point-to-point collective algorithms — ring,
// recursive halving-doubling, binomial tree, pairwise exchange, pipelined
// chain — over n ranks joined by one kind of link. One source for both
// users: the communication library's selector (cost_model.h, with the
// constants measured on this machine) and the cluster simulator
// (sim/collective_cost.h, with each network level's latency and bandwidth),
// so the simulator prices an algorithm exactly as the library's own model
// does. Pure functions; thread-safe.
#pragma once

#include <optional>

#include "tessera/comm/algo/algorithm.h"

namespace tessera::comm::algo {

struct LinkConstants {
  double latency_s = 0;          // per message step
  double s_per_byte = 0;         // streaming cost per byte per step
  double reduce_s_per_byte = 0;  // reduction, per source byte (0: not modelled)
  double copy_s_per_byte = 0;    // local copies into the result (0: not modelled)
};

// Seconds of `algo` running `kind` over `n` ranks; `unit` = bytes of the
// op's per-rank unit (all-reduce, reduce, broadcast: the buffer;
// all-gather / reduce-scatter: one rank's part; all-to-all, gather,
// scatter: one peer's part). nullopt when the formula does not cover the
// pair. Covered: ring all-reduce / all-gather / reduce-scatter and the
// pipelined chain broadcast; halving-doubling all-reduce (Rabenseifner:
// the power of two p <= n does the work, the n - p extra ranks fold in
// and out) and recursive-doubling all-gather / reduce-scatter; binomial
// tree all-reduce / reduce / broadcast / barrier; pairwise all-to-all,
// gather, scatter.
std::optional<double> NetworkAlgorithmSeconds(Algorithm algo, CollectiveKind kind, int n, double unit,
                                              const LinkConstants& c);

}  // namespace tessera::comm::algo
