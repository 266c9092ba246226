// Collective schedules expanded into flows. Each generator mirrors the step
// structure of Tessera's real algorithm in src/tessera/comm/algo/ (one
// generator per file there; docs/sim.md maps them) but emits FlowEngine
// flows instead of sends. Dependencies are local, as on real hardware: a
// send of step k starts when both its sender and its receiver have finished
// their previous step (rendezvous: large messages move once the receive is
// posted), not at a global barrier. Reduction compute is not charged.
// Single-threaded; the builder appends to one engine.
#pragma once

#include <vector>

#include "tessera/sim/collective.h"
#include "tessera/sim/flow_engine.h"
#include "tessera/sim/topology.h"

namespace tessera::sim {

// Builds steps of point-to-point flows between ranks (ranks map to devices).
class ScheduleBuilder {
 public:
  ScheduleBuilder(FlowSink& engine, std::vector<int> devices, uint64_t channel = 0);

  void BeginStep();
  // A send of `bytes` from rank `src` to rank `dst` in the current step.
  void Send(int src, int dst, double bytes);
  void EndStep();
  // Chains a rank's next step after `flow` (e.g. the compute that precedes a collective).
  void After(int rank, int flow) { frontier_[rank].push_back(flow); }
  // The flows of the rank's last step (what comes after the collective waits for).
  const std::vector<int>& last(int rank) const { return frontier_[rank]; }

  int size() const { return static_cast<int>(devices_.size()); }
  int device(int rank) const { return devices_[rank]; }
  const std::vector<int>& flows() const { return flows_; }
  double total_bytes() const { return total_bytes_; }

 private:
  FlowSink& engine_;
  std::vector<int> devices_;
  uint64_t channel_;
  std::vector<std::vector<int>> frontier_;  // per rank: flows of its last step
  std::vector<std::vector<int>> next_;
  std::vector<int> flows_;
  double total_bytes_ = 0;
  bool in_step_ = false;
};

// Appends the schedule of `kind` with `algo` over `group` (a subset of the
// builder's ranks, in ring order) for `bytes` (nccl-tests convention).
// kAuto and inapplicable algorithms fall back: all-to-all -> pairwise,
// others -> ring; halving-doubling for all-gather/reduce-scatter needs a
// power-of-two group (ring otherwise). Hierarchical groups ranks by super-node
// (`devices_per_supernode`), which must split the group evenly.
Status ExpandCollective(ScheduleBuilder& b, CollectiveKind kind, CollectiveAlgo algo, double bytes,
                        const std::vector<int>& group, int devices_per_supernode);

}  // namespace tessera::sim
