#include "tessera/comm/algo/network_cost.h"

#include <cmath>

namespace tessera::comm::algo {
namespace {

double Log2Ceil(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

int PowerOfTwoFloor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

std::optional<double> NetworkAlgorithmSeconds(Algorithm algo, CollectiveKind kind, int n_ranks, double s,
                                              const LinkConstants& c) {
  if (n_ranks <= 1) return 0.0;
  const double n = n_ranks, lat = c.latency_s, pb = c.s_per_byte, rd = c.reduce_s_per_byte,
               cp = c.copy_s_per_byte;
  const double logn = Log2Ceil(n_ranks);
  using K = CollectiveKind;
  switch (algo) {
    case Algorithm::kRing:
      switch (kind) {
        case K::kAllReduce: return 2 * (n - 1) * lat + 2 * (n - 1) / n * s * pb + (n - 1) / n * s * rd + s * cp;
        case K::kAllGather: return (n - 1) * (lat + s * pb) + s * cp;
        case K::kReduceScatter: return (n - 1) * (lat + s * pb) + (n - 1) * s * rd + n * s * cp;
        case K::kBroadcast: return (n - 1) * lat + s * pb;  // pipelined chain: the message streams through n-1 hops
        default: return std::nullopt;
      }
    case Algorithm::kHalvingDoubling: {
      // The largest power of two p <= n does the work; n - p extra ranks
      // first fold their data into partners and get the result back.
      const double p = PowerOfTwoFloor(n_ranks);
      const bool extra = p != n;
      switch (kind) {
        case K::kAllReduce: {
          const double steps = 2 * std::log2(p) + (extra ? 2 : 0);
          const double bytes = 2 * (p - 1) / p * s + (extra ? 2 * s : 0);
          return steps * lat + bytes * pb + ((p - 1) / p * s + (extra ? s : 0)) * rd + s * cp;
        }
        case K::kAllGather:
        case K::kReduceScatter: {  // recursive doubling / halving: half of the all-reduce above
          const double full = n * s;
          const double steps = std::log2(p) + (extra ? 1 : 0);
          const double bytes = (p - 1) / p * full + (extra ? full : 0);
          return steps * lat + bytes * pb + (kind == K::kReduceScatter ? bytes * rd : 0) + s * cp;
        }
        default: return std::nullopt;
      }
    }
    case Algorithm::kBinomialTree:
      switch (kind) {
        case K::kAllReduce: return 2 * logn * (lat + s * pb) + logn * s * rd + s * cp;
        case K::kReduce: return logn * (lat + s * pb) + logn * s * rd + s * cp;
        case K::kBroadcast: return logn * (lat + s * pb);
        case K::kBarrier: return logn * lat;
        default: return std::nullopt;
      }
    case Algorithm::kPairwise:
      switch (kind) {
        case K::kAllToAll:
        case K::kAllToAllV:
        case K::kGather:
        case K::kScatter: return (n - 1) * (lat + s * pb) + s * cp;
        default: return std::nullopt;
      }
    default: return std::nullopt;
  }
}

}  // namespace tessera::comm::algo
