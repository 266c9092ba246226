#include "tessera/sim/schedule.h"

#include <algorithm>
#include <map>

#include "tessera/base/check.h"

namespace tessera::sim {
namespace {

using Group = std::vector<int>;

// ring.cc: n-1 steps, each rank sends one segment to its right neighbour.
void RingSteps(ScheduleBuilder& b, const Group& g, int steps, double segment) {
  const int n = static_cast<int>(g.size());
  for (int s = 0; s < steps; ++s) {
    b.BeginStep();
    for (int i = 0; i < n; ++i) b.Send(g[i], g[(i + 1) % n], segment);
    b.EndStep();
  }
}

void Exchange(ScheduleBuilder& b, int x, int y, double bytes) {
  b.Send(x, y, bytes);
  b.Send(y, x, bytes);
}

// halving_doubling.cc: fold the extra ranks of a non-power-of-two group,
// recursive halving (reduce-scatter), recursive doubling (all-gather), unfold.
void HalvingDoublingAllReduce(ScheduleBuilder& b, const Group& g, double bytes) {
  const int n = static_cast<int>(g.size());
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  Group core;  // the power-of-two group: odd ranks of the first 2*rem, then the rest
  for (int i = 0; i < n; ++i) {
    if (i < 2 * rem ? (i % 2 == 1) : true) core.push_back(g[i]);
  }
  if (rem > 0) {
    b.BeginStep();
    for (int i = 0; i < rem; ++i) b.Send(g[2 * i], g[2 * i + 1], bytes);
    b.EndStep();
  }
  double chunk = bytes;
  for (int mask = p / 2; mask >= 1; mask /= 2) {  // halving
    chunk /= 2;
    b.BeginStep();
    for (int i = 0; i < p; ++i) {
      if ((i & mask) == 0) Exchange(b, core[i], core[i | mask], chunk);
    }
    b.EndStep();
  }
  for (int mask = 1; mask < p; mask *= 2) {  // doubling
    b.BeginStep();
    for (int i = 0; i < p; ++i) {
      if ((i & mask) == 0) Exchange(b, core[i], core[i | mask], chunk);
    }
    b.EndStep();
    chunk *= 2;
  }
  if (rem > 0) {
    b.BeginStep();
    for (int i = 0; i < rem; ++i) b.Send(g[2 * i + 1], g[2 * i], bytes);
    b.EndStep();
  }
}

// One-way halving-doubling (power-of-two groups): all-gather doubles, reduce-scatter halves.
void HalvingDoublingOneWay(ScheduleBuilder& b, const Group& g, double full, bool gather) {
  const int n = static_cast<int>(g.size());
  std::vector<int> masks;
  for (int mask = 1; mask < n; mask *= 2) masks.push_back(mask);
  if (!gather) std::reverse(masks.begin(), masks.end());
  for (int mask : masks) {
    const double chunk = full / n * mask;  // what each holds doubles (gather) or halves
    b.BeginStep();
    for (int i = 0; i < n; ++i) {
      if ((i & mask) == 0) Exchange(b, g[i], g[i | mask], chunk);
    }
    b.EndStep();
  }
}

// binomial_tree.cc: reduce toward rank 0 in ceil(log2 n) rounds, then broadcast back.
void TreeReduce(ScheduleBuilder& b, const Group& g, double bytes) {
  const int n = static_cast<int>(g.size());
  for (int mask = 1; mask < n; mask *= 2) {
    b.BeginStep();
    for (int i = 0; i < n; ++i) {
      if ((i & (2 * mask - 1)) == mask) b.Send(g[i], g[i - mask], bytes);
    }
    b.EndStep();
  }
}
void TreeBroadcast(ScheduleBuilder& b, const Group& g, double bytes) {
  const int n = static_cast<int>(g.size());
  int top = 1;
  while (top < n) top *= 2;
  for (int mask = top / 2; mask >= 1; mask /= 2) {
    b.BeginStep();
    for (int i = 0; i + mask < n; i += 2 * mask) b.Send(g[i], g[i + mask], bytes);
    b.EndStep();
  }
}

// pairwise.cc: step s sends to rank+s (receiving from rank-s).
void PairwiseAllToAll(ScheduleBuilder& b, const Group& g, double bytes) {
  const int n = static_cast<int>(g.size());
  for (int s = 1; s < n; ++s) {
    b.BeginStep();
    for (int i = 0; i < n; ++i) b.Send(g[i], g[(i + s) % n], bytes / n);
    b.EndStep();
  }
}

bool PowerOfTwo(size_t n) { return n > 0 && (n & (n - 1)) == 0; }

// hierarchical.cc: local groups (one per super-node) and cross groups (same local index).
Status SplitBySupernode(const ScheduleBuilder& b, const Group& g, int d, std::vector<Group>* local,
                        std::vector<Group>* cross) {
  std::map<int, Group> by_node;
  for (int r : g) by_node[b.device(r) / d].push_back(r);
  const size_t m = by_node.begin()->second.size();
  for (auto& [node, ranks] : by_node) {
    if (ranks.size() != m) {
      return InvalidArgument("hierarchical: super-node {} holds {} ranks of the group, another {}", node, ranks.size(),
                             m);
    }
    local->push_back(ranks);
  }
  cross->assign(m, {});
  for (const Group& l : *local) {
    for (size_t i = 0; i < m; ++i) (*cross)[i].push_back(l[i]);
  }
  return Status::Ok();
}

}  // namespace

ScheduleBuilder::ScheduleBuilder(FlowSink& engine, std::vector<int> devices, uint64_t channel)
    : engine_(engine), devices_(std::move(devices)), channel_(channel), frontier_(devices_.size()),
      next_(devices_.size()) {}

void ScheduleBuilder::BeginStep() {
  TESSERA_CHECK(!in_step_, "BeginStep inside a step");
  in_step_ = true;
}

void ScheduleBuilder::Send(int src, int dst, double bytes) {
  TESSERA_CHECK(in_step_ && src != dst && src >= 0 && dst >= 0 && src < size() && dst < size(), "Send {} -> {}", src,
                dst);
  int f = engine_.AddRoutedFlow(devices_[src], devices_[dst], bytes, 0, channel_);
  // Rendezvous: the data moves once the sender has finished its previous
  // step and the receiver has posted this step's receive (finished its previous step).
  for (int dep : frontier_[src]) engine_.AddDependency(f, dep);
  for (int dep : frontier_[dst]) {
    if (std::find(frontier_[src].begin(), frontier_[src].end(), dep) == frontier_[src].end()) {
      engine_.AddDependency(f, dep);
    }
  }
  next_[src].push_back(f);
  next_[dst].push_back(f);
  flows_.push_back(f);
  total_bytes_ += bytes;
}

void ScheduleBuilder::EndStep() {
  TESSERA_CHECK(in_step_, "EndStep outside a step");
  in_step_ = false;
  for (int r = 0; r < size(); ++r) {
    if (next_[r].empty()) continue;
    frontier_[r].swap(next_[r]);
    next_[r].clear();
  }
}

Status ExpandCollective(ScheduleBuilder& b, CollectiveKind kind, CollectiveAlgo algo, double bytes, const Group& g,
                        int devices_per_supernode) {
  const int n = static_cast<int>(g.size());
  if (n <= 1) return Status::Ok();
  if (kind == CollectiveKind::kAllToAll) {
    PairwiseAllToAll(b, g, bytes);
    return Status::Ok();
  }
  if (algo == CollectiveAlgo::kHierarchical &&
      (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather ||
       kind == CollectiveKind::kReduceScatter)) {
    std::vector<Group> local, cross;
    TESSERA_RETURN_IF_ERROR(SplitBySupernode(b, g, devices_per_supernode, &local, &cross));
    const double m = static_cast<double>(local[0].size());
    auto each = [&](const std::vector<Group>& groups, CollectiveKind k, double s) -> Status {
      for (const Group& sub : groups) {
        TESSERA_RETURN_IF_ERROR(ExpandCollective(b, k, CollectiveAlgo::kRing, s, sub, devices_per_supernode));
      }
      return Status::Ok();
    };
    if (kind == CollectiveKind::kAllReduce) {
      TESSERA_RETURN_IF_ERROR(each(local, CollectiveKind::kReduceScatter, bytes));
      TESSERA_RETURN_IF_ERROR(each(cross, CollectiveKind::kAllReduce, bytes / m));
      return each(local, CollectiveKind::kAllGather, bytes);
    }
    const double cross_full = bytes / m;  // each cross group moves the pieces of its local index
    if (kind == CollectiveKind::kAllGather) {
      TESSERA_RETURN_IF_ERROR(each(cross, CollectiveKind::kAllGather, cross_full));
      return each(local, CollectiveKind::kAllGather, bytes);
    }
    TESSERA_RETURN_IF_ERROR(each(local, CollectiveKind::kReduceScatter, bytes));
    return each(cross, CollectiveKind::kReduceScatter, cross_full);
  }
  switch (kind) {
    case CollectiveKind::kAllReduce:
      if (algo == CollectiveAlgo::kHalvingDoubling) {
        HalvingDoublingAllReduce(b, g, bytes);
      } else if (algo == CollectiveAlgo::kTree) {
        TreeReduce(b, g, bytes);
        TreeBroadcast(b, g, bytes);
      } else {
        RingSteps(b, g, 2 * (n - 1), bytes / n);
      }
      return Status::Ok();
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      if (algo == CollectiveAlgo::kHalvingDoubling && PowerOfTwo(g.size())) {
        HalvingDoublingOneWay(b, g, bytes, kind == CollectiveKind::kAllGather);
      } else {
        RingSteps(b, g, n - 1, bytes / n);
      }
      return Status::Ok();
    case CollectiveKind::kBroadcast:
      TreeBroadcast(b, g, bytes);
      return Status::Ok();
    case CollectiveKind::kReduce:
      TreeReduce(b, g, bytes);
      return Status::Ok();
    case CollectiveKind::kAllToAll: break;
  }
  return Status::Ok();
}

}  // namespace tessera::sim
