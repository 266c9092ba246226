#include "tessera/plan/report.h"

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"

namespace tessera::plan {
namespace {

// The JSON carries every figure `plan evaluate` promises, equal to the
// breakdown it came from, and the text names the plan and the memory verdict.
TEST(ReportTest, EvaluateJsonAndText) {
  const ModelSpec m = TestModel("gpt3-175b.toml");
  const sim::ClusterSpec c = TestCluster("a100-dgx.toml");
  ParallelPlan p = Plan3D(16, 8, 8, 1536);
  p.zero = 1;
  p.recompute = Recompute::kSelective;
  auto r = EvaluatePlan(m, c, p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json j = BreakdownJson(*r);
  EXPECT_DOUBLE_EQ(j.at("step_time_s").get<double>(), r->step_time);
  EXPECT_DOUBLE_EQ(j.at("tflops_per_device").get<double>(), r->tflops_per_device);
  EXPECT_DOUBLE_EQ(j.at("mfu").get<double>(), r->mfu);
  EXPECT_DOUBLE_EQ(j.at("bubble_fraction").get<double>(), r->bubble_fraction);
  EXPECT_DOUBLE_EQ(j.at("comm_fraction").get<double>(), r->comm_fraction);
  EXPECT_DOUBLE_EQ(j.at("memory_bytes_per_device").get<double>(), r->memory.Total());
  const nlohmann::json& mem = j.at("memory");
  EXPECT_DOUBLE_EQ(mem.at("weights").get<double>() + mem.at("gradients").get<double>() +
                       mem.at("optimizer").get<double>() + mem.at("activations").get<double>() +
                       mem.at("workspace").get<double>(),
                   r->memory.Total());
  const nlohmann::json pj = PlanJson(p);
  EXPECT_EQ(pj.at("micro_batches").get<int64_t>(), 1536 / 16);
  EXPECT_EQ(pj.at("recompute").get<std::string>(), "selective");
  EXPECT_EQ(ModelJson(m).at("params").get<int64_t>(), CountParams(m).total);

  const std::string text = FormatEvaluation(m, c, p, *r, std::nullopt);
  EXPECT_NE(text.find("dp=16 tp=8 pp=8"), std::string::npos) << text;
  EXPECT_NE(text.find(r->fits ? "fits" : "DOES NOT FIT"), std::string::npos) << text;
}

}  // namespace
}  // namespace tessera::plan
