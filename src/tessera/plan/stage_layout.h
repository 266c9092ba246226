// StageLayout: which layers each pipeline rank holds. The model is cut into
// pp*vpp contiguous chunks (chunk j holds layers [j*L/C, (j+1)*L/C) rounded
// down, C = pp*vpp); pipeline rank i holds chunks i, i+pp, i+2pp, ... (the
// interleaved assignment; vpp = 1 is the plain one). Rank 0 also holds the
// embedding, the last rank the final norm, the output head and the loss (and,
// with tied embeddings, its copy of the embedding). Value type; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"

namespace tessera::plan {

struct RankLayers {
  int64_t dense_layers = 0;  // layers with a dense FFN
  int64_t moe_layers = 0;    // layers with an MoE FFN
  bool first = false;        // holds the embedding
  bool last = false;         // holds the output head and the loss
  int64_t Layers() const { return dense_layers + moe_layers; }
};

// One entry per pipeline rank (size pp).
std::vector<RankLayers> LayoutStages(const ModelSpec& m, int pp, int vpp);

}  // namespace tessera::plan
