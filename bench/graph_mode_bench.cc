// Graph mode against eager on one process: the step time (forward + backward
// of one micro-batch through every segment of a train config's GPT) and the
// peak activation memory (allocator high-water mark during that step, above
// what was allocated before it), for the same model, initialization and
// micro-batches. Eager and graph alternate within each repeat (which goes
// first alternates too) so the machine's drift hits both alike; medians and
// their ratio are printed, and with --json written for docs/perf.md.
//   ./graph_mode_bench [--config configs/train/default.toml] [--set KEY=VALUE]...
//                      [--micro-batch N] [--repeats 21] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/graph/compiled_function.h"
#include "tessera/hal/device.h"
#include "tessera/train/stage_probe.h"

namespace {

using tessera::Tensor;
using tessera::train::StageProbe;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Sample {
  double seconds;
  int64_t peak_bytes;
};

Sample Step(tessera::parallel::GptStage& stage, const tessera::parallel::MicroBatchInput& mb) {
  // Gradients stay allocated (zeroed): the peak above `before` is activations and temporaries.
  for (auto& [name, p] : stage.NamedParameters()) {
    Tensor g = p.grad();
    if (g.defined()) g.ZeroFill();
  }
  auto& alloc = tessera::hal::CpuDevice().allocator();
  const int64_t before = alloc.Stats().current_bytes;
  alloc.ResetPeak();
  const auto t0 = std::chrono::steady_clock::now();
  tessera::train::RunForwardBackward(stage, mb);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {s, alloc.Stats().peak_bytes - before};
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = std::string(TESSERA_SOURCE_DIR) + "/configs/train/default.toml";
  std::vector<std::string> overrides;
  int64_t micro_batch = 0;
  int repeats = 21;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (!std::strcmp(argv[i], "--config"))
      config_path = next();
    else if (!std::strcmp(argv[i], "--set"))
      overrides.push_back(next());
    else if (!std::strcmp(argv[i], "--micro-batch"))
      micro_batch = std::stoll(next());
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::stoi(next());
    else if (!std::strcmp(argv[i], "--json"))
      json_path = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  auto config = tessera::train::TrainConfig::Load(config_path, overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().ToString().c_str());
    return 1;
  }
  const int64_t batch = micro_batch > 0 ? micro_batch : config->train.micro_batch;
  auto eager = tessera::train::BuildStageProbe(*config, false);
  auto graph = tessera::train::BuildStageProbe(*config, true);
  if (!eager.ok() || !graph.ok()) {
    std::fprintf(stderr, "error: %s\n", (eager.ok() ? graph.status() : eager.status()).ToString().c_str());
    return 1;
  }
  std::vector<tessera::parallel::MicroBatchInput> mbs;
  for (int i = 0; i < 4; ++i) mbs.push_back(tessera::train::SyntheticMicroBatch(config->model, batch, 10 + i));
  // Warm-up: capture (call 1), check (call 2), then the replays that measure
  // the inter-op schedule's choices (graph/inter_op.h: kTrials each way).
  for (int i = 0; i < 4 + 2 * tessera::graph::InterOpSchedule::kTrials + 2; ++i) {
    Step(*eager->stage, mbs[i % mbs.size()]);
    Step(*graph->stage, mbs[i % mbs.size()]);
  }
  std::vector<double> te, tg, ratio;
  std::vector<double> me, mg;
  for (int r = 0; r < repeats; ++r) {
    const auto& mb = mbs[r % mbs.size()];
    Sample a, b;
    if (r % 2 == 0) {
      a = Step(*eager->stage, mb);
      b = Step(*graph->stage, mb);
    } else {
      b = Step(*graph->stage, mb);
      a = Step(*eager->stage, mb);
    }
    te.push_back(a.seconds);
    tg.push_back(b.seconds);
    ratio.push_back(a.seconds / b.seconds);
    me.push_back(static_cast<double>(a.peak_bytes));
    mg.push_back(static_cast<double>(b.peak_bytes));
  }
  int graphs = 0, segments = 0;
  int64_t arena = 0, peak_live = 0;
  for (const auto& [name, f] : graph->stage->GraphFunctions()) {
    ++segments;
    if (const auto* c = f->compiled()) {
      ++graphs;
      std::fprintf(stderr, "%s: forward %s; backward %s\n", name.c_str(), c->forward_train.Summary().c_str(),
                   c->backward.Summary().c_str());
      arena += c->plan.arena_bytes;
      peak_live += c->plan.peak_live_bytes;
    }
  }
  const double eager_ms = 1e3 * Median(te), graph_ms = 1e3 * Median(tg);
  std::printf(
      "%s micro-batch %lld: eager %.2f ms, graph %.2f ms, speed-up (median of paired ratios) %.3fx; "
      "peak activation memory eager %.3f MiB, graph %.3f MiB (%.3fx); %d of %d segments as graphs; "
      "planned arenas %.3f MiB vs peak-live bound %.3f MiB (%.3fx)\n",
      config->name.c_str(), static_cast<long long>(batch), eager_ms, graph_ms, Median(ratio), Median(me) / 1048576.0,
      Median(mg) / 1048576.0, Median(mg) / Median(me), graphs, segments, arena / 1048576.0, peak_live / 1048576.0,
      peak_live > 0 ? static_cast<double>(arena) / peak_live : 1.0);
  if (!json_path.empty()) {
    nlohmann::json j = {{"config", config_path},          {"overrides", overrides},
                        {"micro_batch", batch},           {"repeats", repeats},
                        {"eager_ms", eager_ms},           {"graph_ms", graph_ms},
                        {"speedup", Median(ratio)},       {"eager_peak_bytes", Median(me)},
                        {"graph_peak_bytes", Median(mg)}, {"memory_ratio", Median(mg) / Median(me)},
                        {"graph_segments", graphs},       {"segments", segments},
                        {"arena_bytes", arena},           {"peak_live_bytes", peak_live}};
    std::ofstream(json_path) << j.dump(1) << "\n";
  }
  return 0;
}
