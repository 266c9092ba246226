#include "tessera/parallel/pipeline/executor.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "tessera/parallel/pipeline/pipeline_test_util.h"

namespace tessera::parallel {
namespace {

using namespace testing;  // NOLINT: the toy model helpers

constexpr int kLayers = 8;

struct Config {
  PipelineSchedule schedule;
  int m, v;
};

std::vector<Config> Matrix(int p) {
  std::vector<Config> configs;
  for (int m = 1; m <= 8; ++m) {
    configs.push_back({PipelineSchedule::kGpipe, m, 1});
    configs.push_back({PipelineSchedule::k1F1B, m, 1});
    if (m % p == 0) configs.push_back({PipelineSchedule::kInterleaved1F1B, m, 2});
  }
  return configs;
}

std::string Name(const Config& c, int p) {
  return fmt::format("{} p={} m={} v={}", PipelineScheduleName(c.schedule), p, c.m, c.v);
}

// Every configuration of the matrix on p thread ranks: the summed loss and
// every parameter gradient match the single-thread run of the whole stack.
void CheckMatrix(int p, int layers = kLayers) {
  const std::vector<Config> configs = Matrix(p);
  std::map<int, Reference> refs;
  for (int m = 1; m <= 8; ++m) refs[m] = SingleThreadReference(layers, m);
  std::mutex mu;
  comm::testing::RunRanks(p, PipelineTestOptions(fmt::format("pp{}", p)), [&](int rank, comm::Communicator& comm) {
    ToyStack model(layers);
    auto ex = PipelineExecutor::Create(comm, {PipelineSchedule::kGpipe, 1, 1});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    for (const Config& c : configs) {
      const std::string name = Name(c, p) + fmt::format(" rank {}", rank);
      PipelineConfig config{c.schedule, c.m, c.v};
      ASSERT_TRUE((*ex)->SetConfig(config).ok()) << name;
      model.ZeroGrad();
      Status st = (*ex)->RunStep(ToyStage(model, rank, p, c.v, c.m));
      ASSERT_TRUE(st.ok()) << name << ": " << st.ToString();
      const PipelineStepStats& stats = (*ex)->last_step();
      const Reference& ref = refs[c.m];
      std::lock_guard<std::mutex> lock(mu);
      if (rank == p - 1) {
        EXPECT_TRUE(CloseRel(stats.loss, ref.loss, ref.loss)) << name << ": " << stats.loss << " vs " << ref.loss;
      } else {
        EXPECT_EQ(stats.loss, 0.0) << name;
      }
      const auto schedule = BuildPipelineSchedule(c.schedule, p, c.m, c.v);
      EXPECT_EQ(stats.max_in_flight, MaxInFlight(schedule[rank])) << name;
      int compute_events = 0;
      for (const PipelineEvent& e : stats.timeline) compute_events += e.category == "compute";
      EXPECT_EQ(compute_events, 2 * c.m * c.v) << name;
      EXPECT_GE(stats.bubble_fraction, 0.0) << name;
      EXPECT_LT(stats.bubble_fraction, 1.0) << name;
      for (const auto& [pname, param] : model.NamedParameters()) {
        const bool owned = OwnsLayer(LayerOf(pname), layers, rank, p, c.v);
        ASSERT_EQ(param.grad().defined(), owned) << name << " " << pname;
        if (!owned) continue;
        ExpectGradientClose(name + " " + pname, param.grad(), ref.grads.at(pname));
      }
    }
  });
}

TEST(PipelineExecutorTest, MatchesSingleThreadTwoStages) { CheckMatrix(2); }

TEST(PipelineExecutorTest, MatchesSingleThreadFourStages) { CheckMatrix(4); }

// An odd ring: the interleaved schedule's closing link takes the third
// channel colour.
TEST(PipelineExecutorTest, MatchesSingleThreadThreeStages) { CheckMatrix(3, 12); }

TEST(PipelineExecutorTest, OneStageRunsInterleavedChunksLocally) {
  const Reference ref = SingleThreadReference(kLayers, 4);
  comm::testing::RunRanks(1, PipelineTestOptions("pp1"), [&](int, comm::Communicator& comm) {
    ToyStack model(kLayers);
    auto ex = PipelineExecutor::Create(comm, {PipelineSchedule::kInterleaved1F1B, 4, 4});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    ASSERT_TRUE((*ex)->RunStep(ToyStage(model, 0, 1, 4, 4)).ok());
    EXPECT_TRUE(CloseRel((*ex)->last_step().loss, ref.loss, ref.loss));
    for (const auto& [pname, param] : model.NamedParameters()) {
      const std::vector<float> got = param.grad().ToFloatVector();
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref.grads.at(pname)[i], 1e-6) << pname;
    }
  });
}

TEST(PipelineExecutorTest, FailingForwardIsAStatusOnEveryStage) {
  std::vector<Status> results(3);
  comm::CommOptions options = PipelineTestOptions("ppfail");
  options.timeout = std::chrono::milliseconds(20000);
  comm::testing::RunRanks(3, options, [&](int rank, comm::Communicator& comm) {
    ToyStack model(6);
    auto ex = PipelineExecutor::Create(comm, {PipelineSchedule::k1F1B, 4, 1});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    PipelineStage stage = ToyStage(model, rank, 3, 1, 4);
    if (rank == 1) {
      auto forward = stage.forward;
      stage.forward = [forward](int chunk, int mb, const Tensor& input) {
        // A bad shape on micro-batch 2: the layer throws OpError.
        return forward(chunk, mb, mb == 2 ? graph::Slice(input, 1, 0, 5) : input);
      };
    }
    results[rank] = (*ex)->RunStep(stage);
    EXPECT_FALSE((*ex)->RunStep(stage).ok());  // broken for good
  });
  ASSERT_FALSE(results[1].ok());
  EXPECT_NE(results[1].ToString().find("pipeline stage 1 of 3"), std::string::npos) << results[1].ToString();
  EXPECT_NE(results[1].ToString().find("micro-batch 2"), std::string::npos) << results[1].ToString();
  EXPECT_NE(results[1].ToString().find("Linear"), std::string::npos) << results[1].ToString();
  for (int r : {0, 2}) {
    ASSERT_FALSE(results[r].ok()) << "stage " << r;
    EXPECT_NE(results[r].ToString().find(fmt::format("pipeline stage {} of 3", r)), std::string::npos)
        << results[r].ToString();
  }
}

TEST(PipelineExecutorTest, ClearConfigErrors) {
  comm::testing::RunRanks(2, PipelineTestOptions("ppcfg"), [&](int, comm::Communicator& comm) {
    auto bad = PipelineExecutor::Create(comm, {PipelineSchedule::kInterleaved1F1B, 3, 2});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("multiple"), std::string::npos);
    auto ex = PipelineExecutor::Create(comm, {PipelineSchedule::k1F1B, 3, 1});
    ASSERT_TRUE(ex.ok());
    EXPECT_FALSE((*ex)->SetConfig({PipelineSchedule::k1F1B, 3, 2}).ok());
    EXPECT_FALSE((*ex)->RunStep(PipelineStage{}).ok());
  });
}

TEST(PipelineExecutorTest, StalledPeerFailsWithinTheCommunicatorDeadline) {
  comm::CommOptions options = PipelineTestOptions("ppstall");
  options.timeout = std::chrono::milliseconds(1000);
  std::vector<Status> results(2);
  std::vector<double> seconds(2);
  comm::testing::RunRanks(2, options, [&](int rank, comm::Communicator& comm) {
    ToyStack model(4);
    auto ex = PipelineExecutor::Create(comm, {PipelineSchedule::k1F1B, 2, 1});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // stalls: never serves stage 0
    const auto start = std::chrono::steady_clock::now();
    results[rank] = (*ex)->RunStep(ToyStage(model, rank, 2, 1, 2));
    seconds[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].ToString().find("pipeline stage 0 of 2"), std::string::npos) << results[0].ToString();
  EXPECT_NE(results[0].ToString().find("micro-batch 0"), std::string::npos) << results[0].ToString();
  EXPECT_LT(seconds[0], 30.0);
  // The stalled stage finds its channels aborted by stage 0 and fails at once.
  ASSERT_FALSE(results[1].ok());
  EXPECT_LT(seconds[1], 30.0);
}

TEST(PipelineExecutorTest, WrongInputSpecIsAnError) {
  std::vector<Status> results(2);
  comm::testing::RunRanks(2, PipelineTestOptions("ppspec"), [&](int rank, comm::Communicator& comm) {
    ToyStack model(4);
    auto ex = PipelineExecutor::Create(comm, {PipelineSchedule::kGpipe, 2, 1});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    PipelineStage stage = ToyStage(model, rank, 2, 1, 2);
    stage.input_spec = [](int, int) { return std::make_pair(Shape{kBatch, kDim / 2}, DType::kF32); };
    results[rank] = (*ex)->RunStep(stage);
  });
  ASSERT_FALSE(results[1].ok());
  EXPECT_NE(results[1].ToString().find("pipeline stage 1 of 2"), std::string::npos) << results[1].ToString();
  EXPECT_FALSE(results[0].ok());
}

}  // namespace
}  // namespace tessera::parallel
