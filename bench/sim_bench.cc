// Simulator speed: the analytic collective cost (what the planner calls in
// its search), and the flow engine on the brief's UBL128 super-node —
// 128-card all-to-all of 1 GiB per rank (target < 1 s of wall time) — plus
// all-to-all scaling with the number of flows (n ranks: n(n-1) flows), and
// one 8,192-card training step (closed form and every flow simulated).
// Counters: sim_time_s (simulated), flows, events, busbw_GBps, utilization.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/collective_cost.h"
#include "tessera/sim/simulate.h"
#include "tessera/sim/step_replay.h"

namespace {

using namespace tessera::sim;  // NOLINT

const ClusterSpec& Preset(const std::string& name) {
  static std::map<std::string, ClusterSpec> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto path = std::filesystem::path(TESSERA_SOURCE_DIR) / "configs/clusters" / (name + ".toml");
    auto spec = LoadClusterSpec(path.string());
    if (!spec.ok()) {
      std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
      std::abort();
    }
    it = cache.emplace(name, *spec).first;
  }
  return it->second;
}

void BM_EstimateCollective(benchmark::State& state) {
  const ClusterSpec& c = Preset("ascend950-ubl128");
  double bytes = 1e6, sink = 0;
  for (auto _ : state) {
    for (int n : {8, 128, 1024}) {
      sink += EstimateCollective(c, CollectiveKind::kAllReduce, bytes, GroupLayout::Contiguous(c, n)).time_s;
      sink += EstimateCollective(c, CollectiveKind::kAllToAll, bytes, GroupLayout{n, n / 8}).time_s;
    }
    bytes *= 1.0000001;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * 6);
}
BENCHMARK(BM_EstimateCollective);

void RunFlow(benchmark::State& state, const std::string& preset, CollectiveKind kind, double bytes, int ranks,
             Routing routing) {
  SimCollectiveOptions o;
  o.kind = kind;
  o.bytes = bytes;
  o.ranks = ranks;
  o.routing = routing;
  SimCollectiveResult r;
  for (auto _ : state) {
    auto res = SimulateCollective(Preset(preset), o);
    if (!res.ok()) {
      state.SkipWithError(res.status().ToString().c_str());
      return;
    }
    r = *res;
  }
  state.counters["sim_time_s"] = r.time_s;
  state.counters["flows"] = static_cast<double>(r.flows);
  state.counters["events"] = static_cast<double>(r.events);
  state.counters["busbw_GBps"] = r.busbw / 1e9;
  state.counters["utilization"] = r.utilization;
}

void BM_Ubl128AllToAll1GiB(benchmark::State& state) {
  RunFlow(state, "ascend950-ubl128", CollectiveKind::kAllToAll, 1 << 30, 128,
          state.range(0) ? Routing::kAdaptive : Routing::kEcmp);
}
BENCHMARK(BM_Ubl128AllToAll1GiB)->Arg(0)->Arg(1)->ArgName("adaptive")->Unit(benchmark::kMillisecond);

// Flow scaling: n ranks over super-nodes of 128 (the fat-tree beyond 128).
void BM_AllToAllScaling(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  RunFlow(state, "ascend950-ubl128", CollectiveKind::kAllToAll, 256.0 * (1 << 20), n, Routing::kEcmp);
}
BENCHMARK(BM_AllToAllScaling)->Arg(32)->Arg(64)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

void BM_A100HierarchicalAllReduce(benchmark::State& state) {
  RunFlow(state, "a100-dgx", CollectiveKind::kAllReduce, 1 << 30, static_cast<int>(state.range(0)),
          Routing::kAdaptive);
}
BENCHMARK(BM_A100HierarchicalAllReduce)->Arg(64)->Arg(512)->Arg(3072)->Unit(benchmark::kMillisecond);

// One training step of a 8,192-card plan on the brief's cluster: the closed
// form (one pipeline simulated; dp and tp replicas are symmetric) and the
// flow replay (every rank's communication as flows over the topology).
tessera::StatusOr<PlanSpec> Plan8192() {
  return ParsePlanSpec(
      "[model]\nlayers = 128\nhidden = 16384\nseq = 4096\nvocab = 128000\n"
      "[parallel]\ndp = 64\ntp = 16\npp = 8\nmicro_batch = 1\nglobal_batch = 4096\n",
      "bench-plan");
}

void RunStep(benchmark::State& state, bool flows, Routing routing) {
  auto plan = Plan8192();
  if (!plan.ok()) {
    state.SkipWithError(plan.status().ToString().c_str());
    return;
  }
  StepResult r;
  for (auto _ : state) {
    auto res = flows ? ReplayStepFlows(Preset("ascend950-ubl128"), *plan, routing)
                     : ReplayStep(Preset("ascend950-ubl128"), *plan);
    if (!res.ok()) {
      state.SkipWithError(res.status().ToString().c_str());
      return;
    }
    r = std::move(*res);
  }
  state.counters["step_time_s"] = r.step_time_s;
  state.counters["mfu"] = r.mfu;
  state.counters["bubble"] = r.bubble_fraction;
  state.counters["tp_comm_s"] = r.tp_comm_s;
  state.counters["dp_comm_s"] = r.dp_comm_s;
  state.counters["tasks"] = static_cast<double>(r.trace.size());
  if (flows) {
    state.counters["flows"] = static_cast<double>(r.flows);
    state.counters["events"] = static_cast<double>(r.events);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    state.counters["peak_rss_GiB"] = usage.ru_maxrss / 1048576.0;  // ru_maxrss is in KiB
  }
}

void BM_StepReplay8192(benchmark::State& state) { RunStep(state, false, Routing::kAdaptive); }
BENCHMARK(BM_StepReplay8192)->Unit(benchmark::kMillisecond);

// Run alone (--benchmark_filter=Flows) for a meaningful peak RSS.
void BM_StepReplay8192Flows(benchmark::State& state) {
  RunStep(state, true, state.range(0) ? Routing::kAdaptive : Routing::kEcmp);
}
BENCHMARK(BM_StepReplay8192Flows)->Arg(1)->Arg(0)->ArgName("adaptive")->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
