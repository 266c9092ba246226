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
  int PerStage() const { return tp * dp; }
  int Stage(int rank) const { return rank / PerStage(); }
  int RingNext(int rank) const { return rank - rank % tp + (rank % tp + 1) % tp; }
  int RingPrev(int rank) const { return rank - rank % tp + (rank % tp + tp - 1) % tp; }
  size_t Item(int rank, int micro, bool fwd) const { return (static_cast<size_t>(rank) * m + micro) * 2 + (fwd ? 0 : 1); }
};

}  // namespace

StatusOr<StepResult> ReplayStepFlows(const ClusterSpec& c, const PlanSpec& p, Routing routing) {
  TESSERA_RETURN_IF_ERROR(CheckPlanFits(c, p));
  const Layout L{p.tp, p.dp, p.pp, p.MicroBatches()};
  const int n = p.Devices();
  FlowEngine e;
  TESSERA_ASSIGN_OR_RETURN(Topology topo, Topology::Build(c, e, routing, n));
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
  const size_t items = static_cast<size_t>(n) * L.m * 2;
  std::vector<int> task(items), ring(items, -1), send(items, -1);
  for (int r = 0; r < n; ++r) {
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
  std::vector<int> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  ScheduleBuilder dp_builder(e, ranks, kDpKey);
  std::vector<int> optimizer(n);
  for (int r = 0; r < n; ++r) {
    const int st = L.Stage(r);
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
    optimizer[r] = e.AddTask(work[st].optimizer_s);
    if (p.dp > 1) {
      // The rank's gradients are ready after its last backward (its tp ring included).
      const int ready = e.AddTask(0);
      after_item(ready, r, prev_i, prev_fwd);
      dp_builder.After(r, ready);
    } else {
      after_item(optimizer[r], r, prev_i, prev_fwd);
    }
  }
  if (p.dp > 1) {
    const CollectiveAlgo algo = EstimateCollective(c, CollectiveKind::kAllReduce, work[0].grad_bytes,
                                                   GroupLayout{p.dp, work[0].dp_local}).algo;
    std::vector<int> group(p.dp);
    for (int st = 0; st < p.pp; ++st) {
      for (int t = 0; t < p.tp; ++t) {
        for (int j = 0; j < p.dp; ++j) group[j] = st * L.PerStage() + j * p.tp + t;
        TESSERA_RETURN_IF_ERROR(ExpandCollective(dp_builder, CollectiveKind::kAllReduce, algo, work[st].grad_bytes,
                                                 group, c.supernode.devices));
      }
    }
    for (int r = 0; r < n; ++r) {
      for (int f : dp_builder.last(r)) e.AddDependency(optimizer[r], f);
    }
  }
  TESSERA_RETURN_IF_ERROR(e.Run());

  // Report the pipeline of tp rank 0, dp replica 0 (its ranks are stage * tp * dp).
  StepResult res;
  res.step_time_s = e.makespan();
  res.flows = e.num_flows();
  res.events = e.events();
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
