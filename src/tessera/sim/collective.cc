#include "tessera/sim/collective.h"

#include <algorithm>
#include <cctype>

namespace tessera::sim {
namespace {

std::string Normalize(std::string_view text) {
  std::string s;
  for (char c : text) {
    if (c == '_' || c == '-') continue;
    s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return s;
}

}  // namespace

std::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kAllGather: return "allgather";
    case CollectiveKind::kReduceScatter: return "reducescatter";
    case CollectiveKind::kAllToAll: return "alltoall";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
  }
  return "?";
}

std::string_view CollectiveAlgoName(CollectiveAlgo algo) {
  switch (algo) {
    case CollectiveAlgo::kAuto: return "auto";
    case CollectiveAlgo::kRing: return "ring";
    case CollectiveAlgo::kTree: return "tree";
    case CollectiveAlgo::kHalvingDoubling: return "halving_doubling";
    case CollectiveAlgo::kHierarchical: return "hierarchical";
    case CollectiveAlgo::kPairwise: return "pairwise";
  }
  return "?";
}

StatusOr<CollectiveKind> ParseCollectiveKind(std::string_view text) {
  const std::string s = Normalize(text);
  for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                           CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
    if (s == CollectiveKindName(k)) return k;
  }
  return InvalidArgument("unknown collective '{}' (allreduce, allgather, reducescatter, alltoall, broadcast, reduce)",
                         text);
}

StatusOr<CollectiveAlgo> ParseCollectiveAlgo(std::string_view text) {
  const std::string s = Normalize(text);
  if (s == "hd" || s == "rhd") return CollectiveAlgo::kHalvingDoubling;
  for (CollectiveAlgo a : {CollectiveAlgo::kAuto, CollectiveAlgo::kRing, CollectiveAlgo::kTree,
                           CollectiveAlgo::kHalvingDoubling, CollectiveAlgo::kHierarchical, CollectiveAlgo::kPairwise}) {
    if (s == Normalize(CollectiveAlgoName(a))) return a;
  }
  return InvalidArgument("unknown collective algorithm '{}' (auto, ring, tree, hd, hierarchical, pairwise)", text);
}

double BusBwFactor(CollectiveKind kind, int n) {
  if (n <= 1) return 0.0;
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll: return static_cast<double>(n - 1) / n;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return 1.0;
  }
  return 1.0;
}

}  // namespace tessera::sim
