// Speed of the parallel-strategy planner: one plan evaluation, and the full
// search for the 10 T-parameter MoE on 8,192 cards of the brief's Ascend 950
// UBL128 cluster (target: < 10 s) and for the Narayanan et al. 1 T row on
// 3,072 A100s. Reads configs/ from the working directory or a parent.
//   ./plan_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tessera/plan/search.h"
#include "tessera/plan/time_model.h"

namespace {

namespace plan = tessera::plan;
namespace sim = tessera::sim;

// configs/<sub> found from the working directory upwards.
std::string Config(const std::string& sub) {
  std::filesystem::path dir = std::filesystem::current_path();
  for (int i = 0; i < 6; ++i) {
    const std::filesystem::path p = dir / "configs" / sub;
    if (std::filesystem::exists(p)) return p.string();
    dir = dir.parent_path();
  }
  return "configs/" + sub;
}

struct Inputs {
  plan::ModelSpec model;
  sim::ClusterSpec cluster;
};

bool Load(benchmark::State& state, const std::string& model, const std::string& cluster, Inputs* in) {
  auto m = plan::LoadModelSpec(Config("models/" + model));
  auto c = sim::LoadClusterSpec(Config("clusters/" + cluster));
  if (!m.ok() || !c.ok()) {
    state.SkipWithError((m.ok() ? c.status() : m.status()).ToString().c_str());
    return false;
  }
  in->model = *m;
  in->cluster = *c;
  return true;
}

void BM_Evaluate10T(benchmark::State& state) {
  Inputs in;
  if (!Load(state, "moe-10t.toml", "ascend950-ubl128.toml", &in)) return;
  const plan::ParallelPlan p{.dp = 512, .tp = 2, .pp = 8, .ep = 256, .global_batch = 8192, .zero = 1,
                             .recompute = plan::Recompute::kSelective};
  for (auto _ : state) {
    auto r = plan::EvaluatePlan(in.model, in.cluster, p);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Evaluate10T);

void Search(benchmark::State& state, const std::string& model, const std::string& cluster, int64_t devices) {
  Inputs in;
  if (!Load(state, model, cluster, &in)) return;
  plan::SearchOptions o;
  o.devices = devices;
  int64_t candidates = 0;
  for (auto _ : state) {
    auto r = plan::SearchPlans(in.model, in.cluster, o);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    candidates = r->candidates;
  }
  state.counters["plans"] = static_cast<double>(candidates);
  state.counters["plans_per_s"] =
      benchmark::Counter(static_cast<double>(candidates) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Search10TOn8192(benchmark::State& state) { Search(state, "moe-10t.toml", "ascend950-ubl128.toml", 8192); }
BENCHMARK(BM_Search10TOn8192)->Unit(benchmark::kMillisecond);

void BM_SearchTrillionRowOn3072(benchmark::State& state) {
  Search(state, "megatron-1008b.toml", "a100-dgx.toml", 3072);
}
BENCHMARK(BM_SearchTrillionRowOn3072)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
