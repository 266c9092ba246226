#include "tessera/plan/stage_layout.h"

#include "tessera/base/check.h"

namespace tessera::plan {

std::vector<RankLayers> LayoutStages(const ModelSpec& m, int pp, int vpp) {
  TESSERA_CHECK(pp >= 1 && vpp >= 1, "pp={} vpp={}", pp, vpp);
  const int64_t chunks = static_cast<int64_t>(pp) * vpp;
  std::vector<RankLayers> ranks(pp);
  for (int64_t j = 0; j < chunks; ++j) {
    RankLayers& r = ranks[j % pp];
    const int64_t begin = j * m.layers / chunks;
    const int64_t end = (j + 1) * m.layers / chunks;
    for (int64_t l = begin; l < end; ++l) {
      if (m.moe_layer[l]) {
        ++r.moe_layers;
      } else {
        ++r.dense_layers;
      }
    }
  }
  ranks.front().first = true;
  ranks.back().last = true;
  return ranks;
}

}  // namespace tessera::plan
