// Graph-mode training (train.graph = true) against eager: the single-process
// Trainer (the oracle) for one process and for an 8-rank mesh, and the eager
// parallel runtime on the 8-rank default config; the run's summary must show
// segments that really ran as replayed graphs.
#include <mutex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/train/parallel_trainer.h"
#include "tessera/train/auto_micro_batch.h"
#include "tessera/train/parity_test_util.h"

namespace tessera::train {
namespace {

using namespace parity;

// Segments of rank 0 that ran as graphs, and their replays.
int ReplayedSegments(const TrainSummary& s, int* replays) {
  int n = 0;
  *replays = 0;
  for (const auto& seg : s.parallel.at("graph_segments_rank0")) {
    if (seg.at("mode") != "graph") continue;
    ++n;
    *replays += seg.at("replays").get<int>();
  }
  return n;
}

TEST(GraphModeTraining, OneProcessMatchesTheEagerTrainer) {
  RunResult ref = SingleProcess({});
  TrainSummary s;
  RunResult got = Parallel({"train.graph=true"}, {}, &s);
  ExpectMatches(ref, got, 1e-5, "graph, one process");
  ExpectParamsMatch(ref, got, 1, "graph, one process", 2e-5, 2e-4);
  int replays = 0;
  // embed, the dense blocks and the head are graphs; an MoE block's
  // attention half is a graph and its MoE half (host routing) runs eagerly.
  EXPECT_GE(ReplayedSegments(s, &replays), 4) << s.parallel.at("graph_segments_rank0").dump(1);
  EXPECT_GT(replays, 0);
  int attention_halves = 0;
  for (const auto& seg : s.parallel.at("graph_segments_rank0")) {
    EXPECT_EQ(seg.at("mode"), "graph") << seg.dump(1);
    const std::string name = seg.at("segment").get<std::string>();
    if (name.size() > 10 && name.substr(name.size() - 10) == ".attention") ++attention_halves;
  }
  EXPECT_GE(attention_halves, 1) << s.parallel.at("graph_segments_rank0").dump(1);
}

TEST(GraphModeTraining, EightRankMeshMatchesTheEagerTrainer) {
  const std::vector<std::string> mesh = {"parallel.dp=2", "parallel.tp=2",   "parallel.pp=2",
                                         "parallel.ep=2", "parallel.zero=1", "parallel.sequence_parallel=true"};
  RunResult ref = SingleProcess({});
  std::vector<std::string> graph = mesh;
  graph.push_back("train.graph=true");
  TrainSummary s;
  RunResult got = Parallel(graph, {}, &s);
  ExpectMatches(ref, got, 1e-5, "graph, 8 ranks");
  ExpectParamsMatch(ref, got, 2, "graph, 8 ranks", 2e-5, 2e-4);
  int replays = 0;
  EXPECT_GE(ReplayedSegments(s, &replays), 1) << s.parallel.at("graph_segments_rank0").dump(1);
  EXPECT_GT(replays, 0) << s.parallel.at("graph_segments_rank0").dump(1);
}

TEST(GraphModeTraining, ZeroStage3RepointedParametersMatchTheEagerTrainer) {
  // ZeRO-3 gathers each segment's parameters before its forward and its
  // backward and releases them after: a replay must read the gathered values.
  RunResult ref = SingleProcess({});
  TrainSummary s;
  RunResult got = Parallel({"parallel.dp=2", "parallel.zero=3", "train.graph=true"}, {}, &s);
  ExpectMatches(ref, got, 1e-5, "graph, dp2 zero3");
  ExpectParamsMatch(ref, got, 1, "graph, dp2 zero3", 2e-5, 2e-4);
  int replays = 0;
  EXPECT_GE(ReplayedSegments(s, &replays), 3) << s.parallel.at("graph_segments_rank0").dump(1);
  EXPECT_GT(replays, 0) << s.parallel.at("graph_segments_rank0").dump(1);
}

TEST(GraphModeTraining, DefaultConfigOnTheDefaultMeshMatchesEager) {
  // configs/train/default.toml on its 8-rank mesh (dp 2 x tp 2 x pp 2, ep 2),
  // a few steps, graph against eager in the same runtime.
  const std::string config = std::string(TESSERA_SOURCE_DIR) + "/configs/train/default.toml";
  auto run = [&](bool graph, TrainSummary* summary) {
    auto c = TrainConfig::Load(
        config, {"train.steps=6", "eval.every=0", "eval.samples=32", fmt::format("train.graph={}", graph)});
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    std::vector<double> losses;
    std::mutex mu;
    comm::testing::RunRanks(c->parallel.world_size(), comm::testing::TestOptions(),
                            [&](int rank, comm::Communicator& comm) {
                              ParallelTrainerOptions o;
                              o.base = QuietOptions();
                              auto trainer = ParallelTrainer::Create(*c, comm, o);
                              ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
                              TrainSummary s;
                              ASSERT_TRUE((*trainer)->Run(&s).ok());
                              std::lock_guard<std::mutex> lock(mu);
                              if (rank == 0) {
                                losses = (*trainer)->losses();
                                *summary = s;
                              }
                            });
    return losses;
  };
  TrainSummary eager_s, graph_s;
  std::vector<double> eager = run(false, &eager_s), graph = run(true, &graph_s);
  ASSERT_EQ(eager.size(), 6u);
  ASSERT_EQ(graph.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_NEAR(graph[i], eager[i], 1e-5 * eager[i]) << "step " << i + 1;
  int replays = 0;
  EXPECT_GE(ReplayedSegments(graph_s, &replays), 1) << graph_s.parallel.at("graph_segments_rank0").dump(1);
  EXPECT_GT(replays, 0) << graph_s.parallel.at("graph_segments_rank0").dump(1);
}

TEST(AutoMicroBatch, FollowsTheMemoryBudget) {
  // global_batch 32 over dp 2: candidates 1, 2, 4, 8, 16.
  auto pick = [](int64_t limit, bool graph) {
    TrainConfig c = Load({"parallel.dp=2", "train.global_batch=32", "train.micro_batch=\"auto\"",
                          fmt::format("train.device_memory_limit={}", limit), fmt::format("train.graph={}", graph)});
    EXPECT_EQ(c.train.micro_batch, 0);
    EXPECT_EQ(c.ToJson()["train"]["micro_batch"], "auto");
    return ResolveAutoMicroBatch(c, 2, 2);
  };
  StatusOr<AutoMicroBatch> big = pick(int64_t{1} << 34, false);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->micro_batch, 16);  // everything fits
  EXPECT_GT(big->per_sample_bytes, 0);
  // A budget that fits the state and about three sequences.
  const int64_t tight = (big->state_bytes + big->fixed_bytes + 3 * big->per_sample_bytes) * 10 / 9 + 1;
  StatusOr<AutoMicroBatch> small = pick(tight, false);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->micro_batch, 2) << small->Describe();
  // Graph mode keeps fewer activations per sequence.
  StatusOr<AutoMicroBatch> graph = pick(int64_t{1} << 34, true);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  EXPECT_LT(graph->per_sample_bytes, big->per_sample_bytes) << graph->Describe() << " / " << big->Describe();
  // Not even one sequence: an error with the figures.
  StatusOr<AutoMicroBatch> none = pick(big->state_bytes, false);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("even one sequence"), std::string::npos) << none.status().ToString();
  // "auto" or a positive integer only.
  EXPECT_FALSE(TrainConfig::Load(ConfigPath(), {"train.micro_batch=\"big\""}).ok());
  EXPECT_FALSE(TrainConfig::Load(ConfigPath(), {"train.micro_batch=0"}).ok());
}

}  // namespace
}  // namespace tessera::train
