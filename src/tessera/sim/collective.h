// Collective kinds and algorithms shared by the analytic cost model, the
// schedule generators and the CLI, with the nccl-tests bandwidth formulas:
// algbw = S / t and busbw = algbw * factor(kind, n), where S is the per-rank
// buffer size (all-gather/reduce-scatter: the whole array, count * n * elem).
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "tessera/base/status.h"

namespace tessera::sim {

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce };
enum class CollectiveAlgo { kAuto, kRing, kTree, kHalvingDoubling, kHierarchical, kPairwise };

std::string_view CollectiveKindName(CollectiveKind kind);
std::string_view CollectiveAlgoName(CollectiveAlgo algo);
// Accepts allreduce|all_reduce|all-reduce etc.
StatusOr<CollectiveKind> ParseCollectiveKind(std::string_view text);
// ring|tree|hd|halving_doubling|hierarchical|pairwise|auto.
StatusOr<CollectiveAlgo> ParseCollectiveAlgo(std::string_view text);

// nccl-tests busbw factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter,
// all-to-all (n-1)/n; broadcast, reduce 1.
double BusBwFactor(CollectiveKind kind, int n);

}  // namespace tessera::sim
