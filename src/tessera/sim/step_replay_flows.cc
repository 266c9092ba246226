// ReplayStepFlows: the training step of step_replay.cc with every rank
// simulated on the flow engine (no symmetry between replicas).
//
// Granularity. Compute: one timed task per rank, micro-batch and direction
// (the stage's layers back to back). Tensor parallelism: the 2 all-reduces
// per layer and direction of a micro-batch are one pipelined ring — each
// rank streams 2 l x 2(tp-1)/tp x b s h bf16 bytes to its ring neighbour (the
// bytes a ring all-reduce puts on every link), released when both ranks
// have finished the compute, delayed by the latency terms of the 2 l
// all-reduces as the analytic model's algorithm has them (ring 2(tp-1)
// steps, halving-doubling 2 log2 tp); the rank's next compute waits for its
// send and its receive.
// Megatron's all-reduces block the compute stream, so merging a micro-batch's
// all-reduces changes no closed-form time; what it averages is contention,
// over a micro-batch instead of per layer. Pipeline: one flow per rank and
// micro-batch to the neighbour stage's rank of the same (tp, dp) index, in
// issue order. Data parallelism: the gradient all-reduce of each (stage, tp
// index) group expanded step by step by the collective schedules (the
// analytic model's algorithm), after each rank's last backward; then the
// optimizer task.
//
// Reduced replay (FlowReplayOptions::full = false; docs/sim.md "Simulator
// scale"). Symmetric replicas: the pipelines (compute, tp rings, pipeline
// sends) of the first R dp replicas only, R a whole number of super-nodes'
// worth per stage (every pipeline when a stage does not fill whole
// super-nodes), so every link inside those super-nodes carries exactly
// the traffic of the full replay (tp rings of all their replicas; the tp
// rings of other super-nodes use other links). Every other rank's gradients
// are ready when those of the simulated rank at the same place in its
// super-node (same stage, tp index and dp index mod R) are. Every rank's
// gradient all-reduce is simulated (those flows cross the scale-out network
// together and contend there), with each ring's repeated steps merged into
// one flow per ring edge of all the steps' bytes, delayed by the other steps'
// latencies — a ring of n ranks costs n flows instead of 2n(n-1).
// Halving-doubling and tree keep their steps (n log n flows). What is
// dropped: the pipeline sends of the other replicas (they share only
// scale-out links with the simulated ones) and the steps' lock-step.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessera/sim/collective_cost.h"
#include "tessera/sim/schedule.h"
#include "tessera/sim/step_replay.h"

namespace tessera::sim {

using namespace step_detail;  // NOLINT

namespace {

constexpr uint64_t kTpKey = 0, kP2pKey = 1, kDpKey = 2;  // ECMP connection keys

struct Layout {
  int tp, dp, pp, m;
  int replicas;  // dp replicas whose pipelines are simulated (the first ones)
  int PerStage() const { return tp * dp; }
  int Stage(int rank) const { return rank / PerStage(); }
  int Replica(int rank) const { return rank % PerStage() / tp; }
  bool Simulated(int rank) const { return Replica(rank) < replicas; }
  // The simulated rank that stands for `rank` (same stage, tp index and place in its super-node).
  int Representative(int rank) const { return rank - (Replica(rank) - Replica(rank) % replicas) * tp; }
  int RingNext(int rank) const { return rank - rank % tp + (rank % tp + 1) % tp; }
  int RingPrev(int rank) const { return rank - rank % tp + (rank % tp + tp - 1) % tp; }
  int Simulated() const { return pp * replicas * tp; }
  size_t Item(int rank, int micro, bool fwd) const {
    const size_t index = static_cast<size_t>(Stage(rank)) * replicas * tp + rank % PerStage();
    return (index * m + micro) * 2 + (fwd ? 0 : 1);
  }
};

// A ring of `steps` steps of `segment` bytes per rank as one flow per edge
// carrying every step's bytes, delayed by the latencies of the other steps
// (the slowest edge's path latency each).
void MergedRing(ScheduleBuilder& b, FlowEngine& e, const Topology& topo, const std::vector<int>& g, int steps,
                double segment) {
  const int n = static_cast<int>(g.size());
  if (n <= 1 || steps <= 0) return;
  double alpha = 0;
  std::vector<int> scratch;
  for (int i = 0; i < n; ++i) alpha = std::max(alpha, topo.Path(b.device(g[i]), b.device(g[(i + 1) % n]), 0, &scratch));
  b.BeginStep();
  for (int i = 0; i < n; ++i) {
    b.Send(g[i], g[(i + 1) % n], steps * segment);
    e.SetDelay(b.flows().back(), (steps - 1) * alpha);
  }
  b.EndStep();
}

// The all-reduce of `bytes` over the builder's ranks (in ring order) with
// `algo`, rings merged (see the file comment); hierarchical splits by super-node.
Status MergedAllReduce(ScheduleBuilder& b, FlowEngine& e, const Topology& topo, CollectiveAlgo algo, double bytes,
                       int devices_per_supernode) {
  const int n = b.size();
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  if (algo == CollectiveAlgo::kRing) {
    MergedRing(b, e, topo, all, 2 * (n - 1), bytes / n);
    return Status::Ok();
  }
  if (algo != CollectiveAlgo::kHierarchical) {
    return ExpandCollective(b, CollectiveKind::kAllReduce, algo, bytes, all, devices_per_supernode);
  }
  // Group members are laid out super-node by super-node, m in each.
  int m = 1;
  while (m < n && b.device(m) / devices_per_supernode == b.device(0) / devices_per_supernode) ++m;
  if (n % m != 0) return InvalidArgument("hierarchical: {} ranks do not split into super-nodes of {}", n, m);
  std::vector<std::vector<int>> local(n / m), cross(m);
  for (int i = 0; i < n; ++i) local[i / m].push_back(i), cross[i % m].push_back(i);
  for (const auto& g : local) MergedRing(b, e, topo, g, m - 1, bytes / m);  // reduce-scatter
  for (const auto& g : cross) MergedRing(b, e, topo, g, 2 * (n / m - 1), bytes / m / (n / m));
  for (const auto& g : local) MergedRing(b, e, topo, g, m - 1, bytes / m);  // all-gather
  return Status::Ok();
}

}  // namespace

StatusOr<StepResult> ReplayStepFlows(const ClusterSpec& c, const PlanSpec& p, Routing routing) {
  FlowReplayOptions o;
  o.routing = routing;
  o.full = true;
  return ReplayStepFlows(c, p, o);
}

StatusOr<StepResult> ReplayStepFlows(const ClusterSpec& c, const PlanSpec& p, const FlowReplayOptions& o) {
  TESSERA_RETURN_IF_ERROR(CheckPlanFits(c, p));
  if (o.replicas < 0) return InvalidArgument("replicas must be >= 0, got {}", o.replicas);
  const int dp_local = Stage(c, p, 0).dp_local;
  int replicas = p.dp;
  // Stages that do not fill whole super-nodes share one with another stage:
  // its replicas are not interchangeable, so every pipeline is simulated.
  if (!o.full && static_cast<int64_t>(p.tp) * p.dp % c.supernode.devices == 0) {
    replicas = o.replicas > 0 ? o.replicas : dp_local;
    replicas = std::min(p.dp, (replicas + dp_local - 1) / dp_local * dp_local);  // whole super-nodes
  }
  const Layout L{p.tp, p.dp, p.pp, p.MicroBatches(), replicas};
  const int n = p.Devices();
  FlowEngine e;
  TESSERA_ASSIGN_OR_RETURN(Topology topo, Topology::Build(c, e, o.routing, n));
  e.SetPathSelector(&topo);
  std::vector<StageWork> work(p.pp);
  for (int st = 0; st < p.pp; ++st) work[st] = Stage(c, p, st);
  // Ring step latency: the longest neighbour path of a tp group.
  double alpha = 0;
  std::vector<int> scratch;
  for (int t = 0; t < p.tp && p.tp > 1; ++t) alpha = std::max(alpha, topo.Path(t, L.RingNext(t), 0, &scratch));
  const CollectiveAlgo tp_algo =
      p.tp > 1 ? EstimateCollective(c, CollectiveKind::kAllReduce, work[0].act_bytes, GroupLayout::Contiguous(c, p.tp)).algo
               : CollectiveAlgo::kRing;
  const double steps_per_ar =
      tp_algo == CollectiveAlgo::kRing ? 2.0 * (p.tp - 1) : 2.0 * std::ceil(std::log2(static_cast<double>(p.tp)));
  const double ring_steps = 2.0 * work[0].layers * steps_per_ar;
  const double tp_bytes = 2.0 * work[0].layers * 2 * (p.tp - 1) / p.tp * work[0].act_bytes;

  // Nodes per (rank, micro-batch, direction): compute task, tp ring flow out, pipeline send.
  const size_t items = static_cast<size_t>(L.Simulated()) * L.m * 2;
  std::vector<int> task(items), ring(items, -1), send(items, -1);
  for (int r = 0; r < n; ++r) {
    if (!L.Simulated(r)) continue;
    const int st = L.Stage(r);
    for (int i = 0; i < L.m; ++i) {
      for (bool fwd : {true, false}) {
        const size_t it = L.Item(r, i, fwd);
        task[it] = e.AddTask(fwd ? work[st].fwd_s : work[st].bwd_s);
        if (p.tp > 1) ring[it] = e.AddRoutedFlow(r, L.RingNext(r), tp_bytes, 0, kTpKey);
        if (fwd ? st < p.pp - 1 : st > 0) {
          send[it] = e.AddRoutedFlow(r, fwd ? r + L.PerStage() : r - L.PerStage(), work[st].act_bytes, 0, kP2pKey);
        }
      }
    }
  }
  // What waits for an item waits for the compute, or the rank's tp send and receive.
  auto after_item = [&](int node, int r, int i, bool fwd) {
    if (p.tp == 1) {
      e.AddDependency(node, task[L.Item(r, i, fwd)]);
    } else {
      e.AddDependency(node, ring[L.Item(r, i, fwd)]);
      e.AddDependency(node, ring[L.Item(L.RingPrev(r), i, fwd)]);
    }
  };
  std::vector<int> optimizer(n), ready(n, -1);
  for (int r = 0; r < n; ++r) {
    const int st = L.Stage(r);
    optimizer[r] = e.AddTask(work[st].optimizer_s);
    if (!L.Simulated(r)) {
      ready[r] = ready[L.Representative(r)];  // simulated ranks come first in each stage
      continue;
    }
    int prev_i = -1;
    bool prev_fwd = true;
    for (auto [i, fwd] : ComputeOrder(p, st)) {
      const size_t it = L.Item(r, i, fwd);
      if (prev_i >= 0) after_item(task[it], r, prev_i, prev_fwd);
      if (fwd && st > 0) e.AddDependency(task[it], send[L.Item(r - L.PerStage(), i, true)]);
      if (!fwd && st < p.pp - 1) e.AddDependency(task[it], send[L.Item(r + L.PerStage(), i, false)]);
      if (ring[it] >= 0) {
        e.SetDelay(ring[it], (ring_steps - 1) * alpha);
        e.AddDependency(ring[it], task[it]);
        e.AddDependency(ring[it], task[L.Item(L.RingNext(r), i, fwd)]);
      }
      if (send[it] >= 0) {
        after_item(send[it], r, i, fwd);
        if (i > 0) e.AddDependency(send[it], send[L.Item(r, i - 1, fwd)]);  // one send stream per direction
      }
      prev_i = i;
      prev_fwd = fwd;
    }
    if (p.dp > 1) {
      // The rank's gradients are ready after its last backward (its tp ring included).
      ready[r] = e.AddTask(0);
      after_item(ready[r], r, prev_i, prev_fwd);
    } else {
      after_item(optimizer[r], r, prev_i, prev_fwd);
    }
  }
  if (p.dp > 1) {
    const CollectiveAlgo algo = EstimateCollective(c, CollectiveKind::kAllReduce, work[0].grad_bytes,
                                                   GroupLayout{p.dp, work[0].dp_local}).algo;
    std::vector<int> ranks(o.full ? n : 0), group(p.dp);
    std::iota(ranks.begin(), ranks.end(), 0);
    ScheduleBuilder dp_builder(e, ranks, kDpKey);  // full: every rank, every step
    for (int r = 0; r < n && o.full; ++r) dp_builder.After(r, ready[r]);
    for (int st = 0; st < p.pp; ++st) {
      for (int t = 0; t < p.tp; ++t) {
        for (int j = 0; j < p.dp; ++j) group[j] = st * L.PerStage() + j * p.tp + t;
        if (o.full) {
          TESSERA_RETURN_IF_ERROR(ExpandCollective(dp_builder, CollectiveKind::kAllReduce, algo, work[st].grad_bytes,
                                                   group, c.supernode.devices));
          continue;
        }
        ScheduleBuilder b(e, group, kDpKey);  // the group's ranks are its devices
        for (int j = 0; j < p.dp; ++j) b.After(j, ready[group[j]]);
        TESSERA_RETURN_IF_ERROR(MergedAllReduce(b, e, topo, algo, work[st].grad_bytes, c.supernode.devices));
        for (int j = 0; j < p.dp; ++j) {
          for (int f : b.last(j)) e.AddDependency(optimizer[group[j]], f);
        }
      }
    }
    for (int r = 0; r < n && o.full; ++r) {
      for (int f : dp_builder.last(r)) e.AddDependency(optimizer[r], f);
    }
  }
  TESSERA_RETURN_IF_ERROR(e.Run());

  // Report the pipeline of tp rank 0, dp replica 0 (its ranks are stage * tp * dp).
  StepResult res;
  res.step_time_s = e.makespan();
  res.flows = e.num_flows();
  res.events = e.events();
  res.simulated_ranks = L.Simulated();
  auto item_end = [&](int r, int i, bool fwd) {
    const size_t it = L.Item(r, i, fwd);
    if (p.tp == 1) return e.result(task[it]).finish_s;
    return std::max(e.result(ring[it]).finish_s, e.result(ring[L.Item(L.RingPrev(r), i, fwd)]).finish_s);
  };
  double flush = 0;
  for (int st = 0; st < p.pp; ++st) {
    for (int i = 0; i < L.m; ++i) flush = std::max(flush, item_end(st * L.PerStage(), i, false));
  }
  for (int st = 0; st < p.pp; ++st) {
    const int r = st * L.PerStage();
    double busy = 0, tp_wait = 0, last_end = 0;
    for (auto [i, fwd] : ComputeOrder(p, st)) {
      const FlowResult& t = e.result(task[L.Item(r, i, fwd)]);
      const double end = item_end(r, i, fwd);
      busy += end - t.release_s;
      tp_wait += end - t.finish_s;
      last_end = std::max(last_end, end);
      res.trace.push_back(TraceEvent{fmt::format("{}{}", fwd ? 'F' : 'B', i), st, kCompute, t.release_s, end});
      const int s = send[L.Item(r, i, fwd)];
      if (s >= 0) {
        res.trace.push_back(TraceEvent{fmt::format("send {}{}", fwd ? 'F' : 'B', i), st, fwd ? kSendNext : kSendPrev,
                                       e.result(s).release_s, e.result(s).finish_s});
      }
    }
    const FlowResult& opt = e.result(optimizer[r]);
    if (p.dp > 1) {
      res.trace.push_back(TraceEvent{"dp all-reduce", st, kDataParallel, last_end, opt.release_s});
      if (st == 0) res.dp_comm_s = opt.release_s - last_end;
    }
    res.trace.push_back(TraceEvent{"optimizer", st, kCompute, opt.release_s, opt.finish_s});
    if (busy > res.compute_s) {
      res.compute_s = busy;
      res.tp_comm_s = tp_wait;
      res.bubble_fraction = flush > 0 ? 1 - busy / flush : 0;
    }
  }
  res.mfu = p.StepFlops() / (p.Devices() * c.device.PeakFlops(p.precision) * res.step_time_s);
  return res;
}

}  // namespace tessera::sim
