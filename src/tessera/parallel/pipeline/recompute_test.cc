// Activation recompute (graph::Checkpoint) on GPT blocks: exact gradients
// and the activation memory it saves, measured from the allocator.
#include <gtest/gtest.h>

#include <cstdio>

#include "tessera/graph/checkpoint.h"
#include "tessera/graph/tape.h"
#include "tessera/hal/device.h"
#include "tessera/parallel/pipeline/block_test_util.h"

namespace tessera::parallel {
namespace {

using namespace testing;  // NOLINT: block helpers

// Forward + backward of the whole block stack, each block checkpointed or
// not; returns the loss.
double Step(models::Gpt& gpt, const Tensor& x, bool checkpoint) {
  const int layers = gpt.config().n_layers;
  Tensor h = x;
  for (int i = 0; i < layers; ++i) {
    if (checkpoint) {
      h = graph::Checkpoint(
          [&gpt, i](const std::vector<Tensor>& in) { return std::vector<Tensor>{RunBlocks(gpt, in[0], i, i + 1, 0)}; },
          {h})[0];
    } else {
      h = RunBlocks(gpt, h, i, i + 1, 0);
    }
  }
  Tensor loss = BlockLoss(h, 1);
  const double value = loss.Item();
  graph::Backward(loss);
  return value;
}

std::vector<std::vector<float>> Gradients(const models::Gpt& gpt, const Tensor& x) {
  std::vector<std::vector<float>> grads;
  for (const auto& [name, p] : gpt.NamedParameters()) {
    if (p.grad().defined()) grads.push_back(p.grad().ToFloatVector());
  }
  grads.push_back(x.grad().ToFloatVector());
  return grads;
}

TEST(RecomputeTest, CheckpointedGptBlocksGiveTheSameGradients) {
  const models::GptConfig config = BlockConfig(3, 32, 16);
  models::Gpt gpt(config);
  Tensor x = BlockInput(config, 2, 0);
  x.set_requires_grad(true);
  const double plain_loss = Step(gpt, x, false);
  const auto plain = Gradients(gpt, x);
  gpt.ZeroGrad();
  x.ZeroGrad();
  const double ckpt_loss = Step(gpt, x, true);
  const auto ckpt = Gradients(gpt, x);
  EXPECT_EQ(plain_loss, ckpt_loss);
  ASSERT_EQ(plain.size(), ckpt.size());
  ASSERT_GT(plain.size(), 3u * 4u);  // every block's parameters got gradients
  for (size_t t = 0; t < plain.size(); ++t) {
    ASSERT_EQ(plain[t].size(), ckpt[t].size());
    for (size_t i = 0; i < plain[t].size(); ++i) ASSERT_FLOAT_EQ(plain[t][i], ckpt[t][i]) << "tensor " << t;
  }
}

// Peak bytes above the starting point during one training step.
int64_t StepPeak(models::Gpt& gpt, const Tensor& x, bool checkpoint) {
  hal::Allocator& alloc = hal::CpuDevice().allocator();
  gpt.ZeroGrad(/*set_to_none=*/false);  // gradient buffers exist already: not counted
  const int64_t base = alloc.Stats().current_bytes;
  alloc.ResetPeak();
  (void)Step(gpt, x, checkpoint);
  return alloc.Stats().peak_bytes - base;
}

TEST(RecomputeTest, CheckpointingAStackOfBlocksLowersThePeak) {
  const models::GptConfig config = BlockConfig(8, 64, 32);
  models::Gpt gpt(config);
  Tensor x = BlockInput(config, 2, 0);
  (void)Step(gpt, x, false);  // allocate the gradient buffers
  const int64_t plain = StepPeak(gpt, x, false);
  const int64_t ckpt = StepPeak(gpt, x, true);
  const int64_t activation = x.nbytes();  // one block's input
  std::printf("activation peak of 8 GPT blocks (B=2, T=32, d=64): %.2f MiB plain, %.2f MiB checkpointed (%.2fx)\n",
              plain / 1048576.0, ckpt / 1048576.0, static_cast<double>(plain) / ckpt);
  RecordProperty("plain_peak_bytes", std::to_string(plain));
  RecordProperty("checkpoint_peak_bytes", std::to_string(ckpt));
  // Plain keeps every block's intermediates (attention probabilities, MLP
  // hidden, norms); checkpointed keeps 8 block inputs plus one block's
  // intermediates during its recompute.
  EXPECT_LT(ckpt * 3, plain);
  EXPECT_GT(plain, 8 * 4 * activation);
}

}  // namespace
}  // namespace tessera::parallel
