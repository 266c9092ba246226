// Pipeline parallelism over GPT blocks (models::Block, dropout on), with and
// without activation recompute inside the stages: the loss and every block
// parameter's gradient match the single-thread run.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/graph/checkpoint.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/pipeline/block_test_util.h"
#include "tessera/parallel/pipeline/executor.h"
#include "tessera/parallel/pipeline/pipeline_test_util.h"

namespace tessera::parallel {
namespace {

using namespace testing;  // NOLINT: block and pipeline helpers

constexpr int kBlocks = 4;
constexpr int kMicro = 4;
constexpr int64_t kMicroBatch = 2;

struct Case {
  PipelineSchedule schedule;
  int v;
  bool recompute;
};

TEST(BlockPipelineTest, GptBlocksMatchTheSingleThreadRun) {
  const models::GptConfig config = BlockConfig(kBlocks, 32, 16);
  // Reference: all blocks on this thread.
  std::map<std::string, std::vector<float>> want;
  double want_loss = 0;
  {
    models::Gpt gpt(config);
    for (int mb = 0; mb < kMicro; ++mb) {
      Tensor loss = BlockLoss(RunBlocks(gpt, BlockInput(config, kMicroBatch, mb), 0, kBlocks, mb), kMicro);
      want_loss += loss.Item();
      graph::Backward(loss);
    }
    for (const auto& [name, p] : gpt.NamedParameters()) {
      if (p.grad().defined()) want[name] = p.grad().ToFloatVector();
    }
  }
  const size_t per_block = want.size() / kBlocks;  // only block parameters get gradients
  ASSERT_TRUE(per_block > 0 && want.size() % kBlocks == 0) << want.size();
  const std::vector<Case> cases = {{PipelineSchedule::k1F1B, 1, false},
                                   {PipelineSchedule::kGpipe, 1, true},
                                   {PipelineSchedule::kInterleaved1F1B, 2, false},
                                   {PipelineSchedule::kInterleaved1F1B, 2, true}};
  constexpr int p = 2;
  std::mutex mu;
  comm::testing::RunRanks(p, PipelineTestOptions("ppgpt"), [&](int rank, comm::Communicator& comm) {
    models::Gpt gpt(config);
    auto ex = PipelineExecutor::Create(comm, {PipelineSchedule::k1F1B, kMicro, 1});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    for (const Case& c : cases) {
      const std::string name = fmt::format("{} v={} recompute={} rank {}", PipelineScheduleName(c.schedule), c.v,
                                           c.recompute, rank);
      ASSERT_TRUE((*ex)->SetConfig({c.schedule, kMicro, c.v}).ok());
      gpt.ZeroGrad();
      const int total = p * c.v, per = kBlocks / total;
      PipelineStage stage;
      stage.forward = [&, c, total, per](int chunk, int mb, const Tensor& input) {
        const int vs = VirtualStage(rank, chunk, p);
        const Tensor x = vs == 0 ? BlockInput(config, kMicroBatch, mb) : input;
        Tensor h;
        if (c.recompute) {
          h = graph::Checkpoint(
              [&gpt, vs, per, mb](const std::vector<Tensor>& in) {
                return std::vector<Tensor>{RunBlocks(gpt, in[0], vs * per, (vs + 1) * per, mb)};
              },
              {x})[0];
        } else {
          h = RunBlocks(gpt, x, vs * per, (vs + 1) * per, mb);
        }
        return vs == total - 1 ? BlockLoss(h, kMicro) : h;
      };
      stage.input_spec = [&](int, int) {
        return std::make_pair(Shape{kMicroBatch, config.seq_len, config.d_model}, DType::kF32);
      };
      Status st = (*ex)->RunStep(stage);
      ASSERT_TRUE(st.ok()) << name << ": " << st.ToString();
      std::lock_guard<std::mutex> lock(mu);
      if (rank == p - 1) {
        EXPECT_TRUE(CloseRel((*ex)->last_step().loss, want_loss, want_loss)) << name;
      }
      int checked = 0;
      for (const auto& [pname, param] : gpt.NamedParameters()) {
        if (!param.grad().defined()) continue;
        ++checked;
        ExpectGradientClose(name + " " + pname, param.grad(), want.at(pname));
      }
      EXPECT_EQ(static_cast<size_t>(checked), kBlocks / p * per_block) << name;  // this stage's blocks, all of them
    }
  });
}

}  // namespace
}  // namespace tessera::parallel
