// `tessera graph dump CONFIG [--set KEY=VALUE]... [--segment NAME] [--dot DIR] [--micro-batch N]`
//   builds the model of a train config on one process (parallel degrees set
//   to 1), captures each segment (embedding, blocks, head) in graph mode on
//   one synthetic micro-batch, and prints each graph before and after the
//   passes (forward + backward, text), the pass report and the memory plan.
//   --dot DIR writes SEGMENT.before.dot and SEGMENT.after.dot (Graphviz).
//   A segment that cannot be captured is listed with the reason.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "commands.h"
#include "tessera/graph/compiled_function.h"
#include "tessera/train/stage_probe.h"
#include "tessera/train/train_config.h"

namespace tessera::cli {
namespace {

struct DumpArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string segment;
  std::string dot_dir;
  int64_t micro_batch = 0;
};

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) return Status(StatusCode::kIoError, fmt::format("cannot write {}", path));
  return Status::Ok();
}

Status Dump(const DumpArgs& a) {
  std::vector<std::string> overrides = a.overrides;
  for (const char* key :
       {"parallel.dp=1", "parallel.tp=1", "parallel.pp=1", "parallel.ep=1", "train.graph=true", "parallel.zero=0"}) {
    overrides.push_back(key);
  }
  TESSERA_ASSIGN_OR_RETURN(train::TrainConfig config, train::TrainConfig::Load(a.config, overrides));
  if (config.is_image_model()) return Status(StatusCode::kUnimplemented, "graph dump covers GPT configs so far");
  const int64_t batch = a.micro_batch > 0 ? a.micro_batch : config.train.micro_batch;
  TESSERA_ASSIGN_OR_RETURN(train::StageProbe probe, train::BuildStageProbe(config, /*graph=*/true));
  parallel::GptStage* stage = probe.stage.get();
  // One synthetic micro-batch through every segment, forward and backward.
  train::RunForwardBackward(*stage, train::SyntheticMicroBatch(config.model, batch, 1));
  if (!a.dot_dir.empty()) std::filesystem::create_directories(a.dot_dir);
  bool found = a.segment.empty();
  for (const auto& [name, f] : stage->GraphFunctions()) {
    if (!a.segment.empty() && name != a.segment) continue;
    found = true;
    std::printf("=== segment %s ===\n", name.c_str());
    const graph::CompiledGraph* c = f->compiled();
    if (c == nullptr) {
      std::printf("eager (graph break): %s\n\n", f->fallback_reason().c_str());
      continue;
    }
    std::printf("--- before passes (%zu nodes) ---\n%s", c->unoptimized.nodes.size(), c->unoptimized.ToText().c_str());
    std::printf("--- after passes (%zu nodes) ---\n%s", c->graph.nodes.size(), c->graph.ToText().c_str());
    std::printf("passes: %s\n", c->report.ToString().c_str());
    std::printf(
        "memory plan: arena %.3f MiB, peak-live lower bound %.3f MiB (%.3fx); kept for the backward %.3f MiB, "
        "eager tape %.3f MiB\n",
        c->plan.arena_bytes / 1048576.0, c->plan.peak_live_bytes / 1048576.0,
        c->plan.peak_live_bytes > 0 ? static_cast<double>(c->plan.arena_bytes) / c->plan.peak_live_bytes : 1.0,
        c->graph_saved_bytes / 1048576.0, c->eager_saved_bytes / 1048576.0);
    std::printf("inter-op schedule, forward: %s\n%s", c->forward_train.Summary().c_str(),
                c->forward_train.ToText(c->graph).c_str());
    std::printf("inter-op schedule, backward: %s\n%s\n", c->backward.Summary().c_str(),
                c->backward.ToText(c->graph).c_str());
    if (!a.dot_dir.empty()) {
      TESSERA_RETURN_IF_ERROR(WriteText(fmt::format("{}/{}.before.dot", a.dot_dir, name), c->unoptimized.ToDot()));
      TESSERA_RETURN_IF_ERROR(WriteText(fmt::format("{}/{}.after.dot", a.dot_dir, name), c->graph.ToDot()));
    }
  }
  if (!found) return Status(StatusCode::kNotFound, fmt::format("no segment named '{}'", a.segment));
  return Status::Ok();
}

void RegisterGraphCommand(CLI::App& app) {
  CLI::App* graph = app.add_subcommand("graph", "graph mode: inspect captured graphs");
  graph->require_subcommand(1);
  auto args = std::make_shared<DumpArgs>();
  CLI::App* dump = graph->add_subcommand("dump", "print each segment's graph before and after the passes");
  dump->add_option("config", args->config, "train config (TOML)")->required();
  dump->add_option("--set", args->overrides, "override a config key (KEY=VALUE), repeatable");
  dump->add_option("--segment", args->segment, "only this segment (embed, blocks.N, head)");
  dump->add_option("--dot", args->dot_dir, "write Graphviz files SEGMENT.{before,after}.dot into this folder");
  dump->add_option("--micro-batch", args->micro_batch, "sequences in the captured micro-batch (default: the config's)");
  dump->callback([args] { ExitWith(Dump(*args)); });
}

}  // namespace

TESSERA_CLI_COMMAND(72, RegisterGraphCommand);

}  // namespace tessera::cli
