// The graph-mode section of a run's summary.json (train.graph = true): per
// segment of this rank, whether it runs as a graph or eagerly (and why), how
// often it was replayed, what the passes did, and the memory plan against its
// lower bound and against what the eager tape would keep.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/parallel/gpt_stage.h"

namespace tessera::train {

nlohmann::json GraphModeJson(const parallel::GptStage& stage);
// The same for any named graph functions (the image trainer's one).
nlohmann::json GraphModeJson(const std::vector<std::pair<std::string, const graph::GraphFunction*>>& functions);

// One line for the end of the run ("graph mode: 4 of 6 segments replayed ...").
std::string GraphModeLine(const nlohmann::json& graph);

}  // namespace tessera::train
