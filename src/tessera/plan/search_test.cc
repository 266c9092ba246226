#include "tessera/plan/search.h"

#include <cstdio>

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"

namespace tessera::plan {
namespace {

// For every row of Narayanan et al. 2021, the search on the same GPUs and
// batch finds a plan at least as fast as the published one (its step time
// from the published TF/s and the paper's FLOP formula), that fits in memory,
// and at least as fast as the published configuration under our own model.
TEST(SearchTest, BeatsEveryNarayananRow) {
  const sim::ClusterSpec a100 = TestCluster("a100-dgx.toml");
  for (const NarayananRow& row : NarayananTable()) {
    const ModelSpec m = TestModel(row.model_file);
    SearchOptions o;
    o.devices = row.gpus;
    o.global_batch = row.batch;
    o.top = 3;
    auto r = SearchPlans(m, a100, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_FALSE(r->top.empty()) << row.model_file;
    const RankedPlan& best = r->top.front();
    const FlopsPerToken f = ForwardFlopsPerToken(m);
    const double published_flops = row.batch * 2048.0 * (f.Training() + f.layers_matmul + f.attention_core);
    const double published_step = published_flops / (row.tflops_per_gpu * 1e12 * row.gpus);
    std::printf("%-22s published %.2f s, found %.2f s  %s  (%lld candidates, %lld fit, %.3f s)\n", row.model_file,
                published_step, best.result.step_time, best.plan.ToString().c_str(),
                static_cast<long long>(r->candidates), static_cast<long long>(r->feasible), r->wall_s);
    EXPECT_LE(best.result.step_time, published_step) << row.model_file;
    EXPECT_TRUE(best.result.fits);
    EXPECT_LE(best.result.memory.Total(), a100.device.hbm_bytes * kUsableMemoryFraction);
    for (size_t i = 1; i < r->top.size(); ++i) {
      EXPECT_LE(r->top[i - 1].result.step_time, r->top[i].result.step_time * (1 + 1e-9));
    }
  }
}

}  // namespace
}  // namespace tessera::plan
