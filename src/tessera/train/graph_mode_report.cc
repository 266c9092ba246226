#include "tessera/train/graph_mode_report.h"

#include <fmt/format.h>

#include "tessera/graph/compiled_function.h"

namespace tessera::train {

nlohmann::json GraphModeJson(const parallel::GptStage& stage) { return GraphModeJson(stage.GraphFunctions()); }

nlohmann::json GraphModeJson(const std::vector<std::pair<std::string, const graph::GraphFunction*>>& functions) {
  nlohmann::json segments = nlohmann::json::array();
  for (const auto& [name, f] : functions) {
    // The training signature (grad mode on) when there is one: evaluation
    // captures its own graph of the forward.
    std::vector<graph::GraphFunction::SignatureInfo> sigs = f->signatures();
    if (sigs.empty()) continue;
    const graph::GraphFunction::SignatureInfo* info = &sigs.front();
    for (const auto& s : sigs) {
      if (s.training) info = &s;
    }
    nlohmann::json j = {{"segment", name},
                        {"signature", info->signature},
                        {"signatures", sigs.size()},
                        {"calls", info->calls},
                        {"replays", info->replays}};
    const graph::CompiledGraph* c = info->compiled;
    if (c == nullptr) {
      j["mode"] = "eager";
      j["reason"] = info->fallback.empty() ? "not captured yet" : info->fallback;
      segments.push_back(j);
      continue;
    }
    const graph::GraphStats before = graph::Stats(c->unoptimized), after = graph::Stats(c->graph);
    j["mode"] = "graph";
    j["nodes_before"] = {{"forward", before.forward_nodes}, {"backward", before.backward_nodes}};
    j["nodes_after"] = {{"forward", after.forward_nodes}, {"backward", after.backward_nodes}};
    j["passes"] = {{"dead", c->report.removed_dead},   {"folded", c->report.folded},
                   {"cse", c->report.merged_common},   {"fused_groups", c->report.fused_groups},
                   {"fused_ops", c->report.fused_ops}, {"recomputed", c->report.recomputed}};
    j["arena_bytes"] = c->plan.arena_bytes;
    j["peak_live_bytes"] = c->plan.peak_live_bytes;
    j["saved_for_backward_bytes"] = c->graph_saved_bytes;
    j["eager_tape_saved_bytes"] = c->eager_saved_bytes;
    segments.push_back(j);
  }
  return segments;
}

std::string GraphModeLine(const nlohmann::json& graph) {
  int replayed = 0;
  int64_t saved = 0, eager = 0;
  for (const auto& s : graph) {
    if (s.value("mode", "") != "graph") continue;
    ++replayed;
    saved += s.value("saved_for_backward_bytes", int64_t{0});
    eager += s.value("eager_tape_saved_bytes", int64_t{0});
  }
  return fmt::format(
      "graph mode: {} of {} segments run as graphs; activations kept for the backward {:.2f} MiB "
      "against the eager tape's {:.2f} MiB",
      replayed, graph.size(), saved / 1048576.0, eager / 1048576.0);
}

}  // namespace tessera::train
