// TensorParallelAttention + TensorParallelMlp as one pre-residual block
// (h = x + attn(x); y = h + mlp(h)) on 1, 2 and 4 thread ranks, with and
// without sequence parallelism, gelu/learned and swiglu/rope variants, fp32,
// bf16 and fp16 activations: outputs, input gradients and the re-assembled
// parameter gradients equal the models:: originals'.
#include "tessera/parallel/tensor_parallel/blocks.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "tessera/base/error.h"
#include "tessera/parallel/tensor_parallel/tp_test_util.h"

namespace tessera::parallel {
namespace {

using testing::ExpectClose;
using testing::LeafCopy;
using testing::Project;
using testing::RandomLeaf;
using testing::RunRanks;
using testing::Shard;

enum class Variant { kGeluLearned, kSwiGluRope, kSwiGluRopeBf16, kGeluLearnedF16 };

models::GptConfig BlockConfig(Variant v) {
  models::GptConfig c;
  c.d_model = 16;
  c.n_heads = 4;
  c.d_ff = 32;
  c.n_layers = 2;
  const bool gelu = v == Variant::kGeluLearned || v == Variant::kGeluLearnedF16;
  c.bias = gelu;
  c.rope = !gelu;
  c.activation = gelu ? models::ActivationKind::kGelu : models::ActivationKind::kSwiGlu;
  c.compute_dtype = v == Variant::kSwiGluRopeBf16 ? DType::kBF16 : v == Variant::kGeluLearnedF16 ? DType::kF16 : DType::kF32;
  c.init_std = 0.2f;
  return c;
}

// Shard axis of a parameter of the TP blocks: column weights/biases along
// 0, row weights along 1, row biases replicated (-1).
int ShardAxis(const std::string& name) {
  const bool row = name.rfind("wo.", 0) == 0 || name.rfind("w_down.", 0) == 0;
  if (!row) return 0;
  return name.find(".weight") != std::string::npos ? 1 : -1;
}

void RandomizeBiases(const graph::Module& m, uint64_t seed) {
  for (auto& [name, t] : m.NamedParameters()) {
    if (name.find("bias") == std::string::npos) continue;
    Tensor b = t;
    FillUniform(b, seed++, -0.3f, 0.3f);
  }
}

class TpBlocks : public ::testing::TestWithParam<std::tuple<int, bool, Variant>> {};

TEST_P(TpBlocks, AttentionAndMlpMatchTheFullModules) {
  const auto [p, sp, variant] = GetParam();
  const models::GptConfig config = BlockConfig(variant);
  const DType dtype = config.compute_dtype;
  models::CausalSelfAttention attn(config);
  attn.InitParameters(21);
  models::Mlp mlp(config.d_model, config.ffn_dim(), config.activation, config.bias, config.init_std, config.init_std,
                  config.param_dtype);
  mlp.InitParameters(22);
  RandomizeBiases(attn, 30);
  RandomizeBiases(mlp, 40);

  constexpr int64_t kB = 2, kT = 8;
  const Tensor x = RandomLeaf({kB, kT, config.d_model}, 1, dtype);
  const Tensor w_out = RandomLeaf({kB, kT, config.d_model}, 2);
  Tensor xf = LeafCopy(x);
  Tensor h = graph::Add(xf, attn.Forward(xf));
  Tensor y_ref = graph::Add(h, mlp.Forward(h));
  graph::Backward(Project(y_ref, w_out));
  std::map<std::string, Tensor> ref_grads;
  for (auto& [name, t] : attn.NamedParameters()) ref_grads["attn." + name] = t.grad();
  for (auto& [name, t] : mlp.NamedParameters()) ref_grads["mlp." + name] = t.grad();

  const double tol = testing::Tolerance(dtype);
  // Parameter gradients compare on the scale of the largest one (wk's bias
  // has an exactly-zero gradient: softmax ignores a per-query constant).
  std::vector<Tensor> all_grads;
  for (auto& [name, g] : ref_grads) all_grads.push_back(g);
  const double grad_scale = testing::MaxAbs(all_grads);
  RunRanks(p, [&](int r, comm::Communicator& c) {
    TensorParallelAttention tp_attn(attn, config, &c, sp);
    TensorParallelMlp tp_mlp(mlp, &c, sp);
    EXPECT_EQ(tp_attn.local_heads(), config.n_heads / p);
    Tensor xr = LeafCopy(sp ? Shard(x, 1, r, p) : x);
    Tensor hr = graph::Add(xr, tp_attn.Forward(xr));
    Tensor yr = graph::Add(hr, tp_mlp.Forward(hr));
    ExpectClose(yr, sp ? Shard(y_ref, 1, r, p) : y_ref, tol, "y");
    graph::Backward(Project(yr, sp ? Shard(w_out, 1, r, p) : w_out));
    ExpectClose(xr.grad(), sp ? Shard(xf.grad(), 1, r, p) : xf.grad(), tol, "x.grad");

    std::vector<Tensor> partial = tp_attn.PartialGradParameters();
    for (const Tensor& t : tp_mlp.PartialGradParameters()) partial.push_back(t);
    AllReduceGradients(partial, &c);
    size_t checked = 0;
    auto check = [&](const graph::Module& m, const std::string& prefix) {
      for (auto& [name, t] : m.NamedParameters()) {
        const int axis = ShardAxis(name);
        Tensor g = axis < 0 ? t.grad() : TensorAllGather(t.grad(), axis, &c);
        ExpectClose(g, ref_grads.at(prefix + name), tol, prefix + name + ".grad", grad_scale);
        ++checked;
      }
    };
    check(tp_attn, "attn.");
    check(tp_mlp, "mlp.");
    EXPECT_EQ(checked, ref_grads.size());
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TpBlocks,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Bool(),
                                            ::testing::Values(Variant::kGeluLearned, Variant::kSwiGluRope,
                                                              Variant::kSwiGluRopeBf16, Variant::kGeluLearnedF16)),
                         [](const auto& info) {
                           const Variant v = std::get<2>(info.param);
                           return "tp" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sp_" : "_") +
                                  (v == Variant::kGeluLearned      ? "gelu"
                                   : v == Variant::kSwiGluRope     ? "swiglu_rope"
                                   : v == Variant::kSwiGluRopeBf16 ? "swiglu_rope_bf16"
                                                                   : "gelu_fp16");
                         });

TEST(TpBlocksErrors, HeadsNotDivisibleByTp) {
  models::GptConfig config = BlockConfig(Variant::kGeluLearned);
  config.n_heads = 2;
  models::CausalSelfAttention attn(config);
  RunRanks(4, [&](int, comm::Communicator& c) {
    testing::ExpectOpError([&] { TensorParallelAttention bad(attn, config, &c); },
                           "TensorParallelAttention: n_heads = 2 is not divisible by tp = 4");
  });
}

}  // namespace
}  // namespace tessera::parallel
