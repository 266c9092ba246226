// The router probe: the load statistics from known routing counts, and a
// probe of a tiny MoE config.
#include "tessera/train/router_probe.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tessera::train {
namespace {

// dp 2, ep 2, 2 experts (one per ep rank), 2 micro-batches per dp rank, in
// the trainer's order: dp rank 0's two, then dp rank 1's.
TEST(ExpertLoad, MeanOfTheBusiestAndPeakOverTheWindow) {
  const std::vector<std::vector<int64_t>> counts = {{6, 2}, {4, 4}, {6, 2}, {2, 6}};
  // Exchange 0 meets micro-batch 0 of both dp ranks: expert 0's rank
  // receives 12 of 16 rows (1.5x its share); exchange 1: expert 1's rank
  // receives 10 of 16 (1.25x).
  auto one = ExpertLoadOf(counts, 2, 2, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_DOUBLE_EQ(one->mean, (1.5 + 1.25) / 2);
  EXPECT_DOUBLE_EQ(one->peak, 1.5);
  // Two micro-batches in flight: rank 0 holds (1.5 + 0.75) / 2.
  auto two = ExpertLoadOf(counts, 2, 2, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_DOUBLE_EQ(two->mean, one->mean);
  EXPECT_DOUBLE_EQ(two->peak, 1.125);
  // A window longer than a rank's micro-batches is cut to them.
  EXPECT_DOUBLE_EQ(ExpertLoadOf(counts, 2, 2, 9)->peak, 1.125);
  // Balanced routing is 1; no expert parallelism is 1 whatever the routing.
  const std::vector<std::vector<int64_t>> even = {{3, 3}, {3, 3}};
  EXPECT_DOUBLE_EQ(ExpertLoadOf(even, 2, 2, 1)->mean, 1.0);
  EXPECT_DOUBLE_EQ(ExpertLoadOf(counts, 2, 1, 1)->peak, 1.0);
}

TEST(ExpertLoad, BadShapesAreErrors) {
  const std::vector<std::vector<int64_t>> counts = {{6, 2}, {4, 4}, {6, 2}, {2, 6}};
  EXPECT_NE(ExpertLoadOf(counts, 3, 2, 1).status().message().find("does not divide"), std::string::npos);
  EXPECT_NE(ExpertLoadOf({{1, 1}, {1, 1}, {1, 1}}, 2, 2, 1).status().message().find("not a multiple of dp"),
            std::string::npos);
  EXPECT_NE(ExpertLoadOf({{1, 1, 1}, {1, 1, 1}}, 2, 2, 1).status().message().find("experts"), std::string::npos);
  EXPECT_NE(ExpertLoadOf({{1, 1}, {1, 1, 1, 1}}, 2, 2, 1).status().message().find("different"), std::string::npos);
}

constexpr char kMoeConfig[] = R"(
name = "probe"
[model]
vocab_size = 16
seq_len = 24
n_layers = 2
d_model = 32
n_heads = 2
d_ff = 64
[model.moe]
num_experts = 4
top_k = 2
every = 2
[data]
kind = "arithmetic"
digits = 2
[train]
steps = 3
micro_batch = 4
global_batch = 16
[eval]
samples = 8
batch = 4
[parallel]
dp = 2
ep = 2
)";

TrainConfig Load(const std::vector<std::string>& overrides) {
  char path[] = "/tmp/tessera_router_probeXXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << kMoeConfig;
  auto c = TrainConfig::Load(path, overrides);
  std::remove(path);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// Layer 1 is MoE: its load is measured (>= 1, at most ep), the dense layer
// 0 is 1; the probe is deterministic; without expert parallelism there is
// nothing to probe.
TEST(RouterProbe, MeasuresTheMoeLayers) {
  const TrainConfig config = Load({});
  auto load = ProbeExpertLoad(config);
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  ASSERT_EQ(load->size(), 2u);
  EXPECT_DOUBLE_EQ((*load)[0].mean, 1.0);
  EXPECT_DOUBLE_EQ((*load)[0].peak, 1.0);
  EXPECT_GE((*load)[1].mean, 1.0);
  EXPECT_LE((*load)[1].mean, 2.0);
  EXPECT_GE((*load)[1].peak, (*load)[1].mean);  // one micro-batch in flight (pp 1): peak >= mean
  auto again = ProbeExpertLoad(config);
  ASSERT_TRUE(again.ok());
  EXPECT_DOUBLE_EQ((*again)[1].mean, (*load)[1].mean);
  auto no_ep = ProbeExpertLoad(Load({"parallel.ep=1"}));
  ASSERT_TRUE(no_ep.ok());
  EXPECT_DOUBLE_EQ((*no_ep)[1].mean, 1.0);
}

}  // namespace
}  // namespace tessera::train
