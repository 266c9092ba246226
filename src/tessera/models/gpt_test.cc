#include "tessera/models/gpt.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/graph/tape.h"
#include "tessera/optim/adamw.h"
#include "tessera/tensor/rng.h"

namespace tessera::models {
namespace {

GptConfig Tiny(bool moe) {
  GptConfig c;
  c.vocab_size = 32;
  c.seq_len = 16;
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 4;
  c.d_ff = 64;
  if (moe) {
    c.norm = NormKind::kRmsNorm;
    c.activation = ActivationKind::kSwiGlu;
    c.rope = true;
    c.moe.num_experts = 4;
    c.moe.top_k = 2;
    c.moe.every = 2;  // layer 1
    c.moe.d_ff_expert = 32;
  }
  return c;
}

Tensor RandomIds(const Shape& shape, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(UniformAt(seed, i) * vocab) % vocab;
  return Tensor::FromInts(v, shape);
}

std::string ErrorOf(const GptConfig& c) {
  Status st = c.Validate();
  return st.ok() ? "" : st.message();
}

TEST(GptConfigTest, ValidationMessagesNameTheFields) {
  EXPECT_EQ(ErrorOf(Tiny(false)), "");
  EXPECT_EQ(ErrorOf(Tiny(true)), "");
  GptConfig c = Tiny(false);
  c.n_heads = 5;
  EXPECT_NE(ErrorOf(c).find("d_model (32) must be divisible by n_heads (5)"), std::string::npos) << ErrorOf(c);
  c = Tiny(true);
  c.moe.top_k = 5;
  EXPECT_NE(ErrorOf(c).find("moe.top_k (5) must lie in [1, moe.num_experts = 4]"), std::string::npos);
  c = Tiny(true);
  c.moe.layers = {0, 2};
  EXPECT_NE(ErrorOf(c).find("moe.layers contains 2, outside [0, n_layers = 2)"), std::string::npos);
  c = Tiny(true);
  c.moe.every = 3;
  EXPECT_NE(ErrorOf(c).find("no layer is MoE"), std::string::npos);
  c = Tiny(true);
  c.d_model = 30;
  c.n_heads = 6;  // head_dim 5
  EXPECT_NE(ErrorOf(c).find("rope needs an even head dimension"), std::string::npos) << ErrorOf(c);
  c = Tiny(false);
  c.vocab_size = 1;
  EXPECT_NE(ErrorOf(c).find("vocab_size"), std::string::npos);
  c = Tiny(false);
  c.dropout = 1.0f;
  EXPECT_NE(ErrorOf(c).find("dropout"), std::string::npos);
  c = Tiny(true);
  c.moe.capacity_factor = -1;
  EXPECT_NE(ErrorOf(c).find("capacity_factor"), std::string::npos);
  EXPECT_FALSE(Gpt::Create(c).ok());
  EXPECT_FALSE(ParseNormKind("batchnorm").ok());
  EXPECT_EQ(*ParseActivationKind("swiglu"), ActivationKind::kSwiGlu);
}

TEST(GptConfigTest, MoeLayerSelection) {
  GptConfig c = Tiny(true);
  c.n_layers = 6;
  c.moe.every = 2;
  std::vector<int> moe;
  for (int i = 0; i < 6; ++i) if (c.IsMoeLayer(i)) moe.push_back(i);
  EXPECT_EQ(moe, (std::vector<int>{1, 3, 5}));
  c.moe.layers = {0, 4};
  EXPECT_TRUE(c.IsMoeLayer(0) && c.IsMoeLayer(4) && !c.IsMoeLayer(1));
  EXPECT_EQ(c.NumMoeLayers(), 2);
}

TEST(GptTest, ShapesAndInitialLoss) {
  for (bool moe : {false, true}) {
    Gpt model(Tiny(moe));
    Tensor ids = RandomIds({2, 16}, 32, 1), targets = RandomIds({2, 16}, 32, 2);
    GptOutput out = model.Forward(ids, targets);
    EXPECT_EQ(out.logits.shape(), (Shape{2, 16, 32}));
    EXPECT_EQ(out.loss.numel(), 1);
    // Small init: logits ~ 0, so the loss is close to log(V).
    EXPECT_NEAR(out.ce_loss.Item(), std::log(32.0), 0.1) << "moe=" << moe;
    if (moe) {
      EXPECT_GT(out.aux_loss.Item(), 0.9);
      EXPECT_NEAR(out.loss.Item(), out.ce_loss.Item() + 0.01 * out.aux_loss.Item(), 1e-5);
    } else {
      EXPECT_EQ(out.aux_loss.Item(), 0.0);
      EXPECT_EQ(out.loss.impl(), out.ce_loss.impl());
    }
    graph::ClearTape();
    GptOutput no_targets = model.Forward(ids.Slice(1, 0, 5));
    EXPECT_EQ(no_targets.logits.shape(), (Shape{2, 5, 32}));
    EXPECT_FALSE(no_targets.loss.defined());
    graph::ClearTape();
  }
}

TEST(GptTest, BadInputsThrowOpError) {
  Gpt model(Tiny(false));
  EXPECT_THROW(model.Forward(RandomIds({1, 17}, 32, 1)), OpError);  // T > seq_len
  EXPECT_THROW(model.Forward(Tensor::Zeros({1, 4})), OpError);     // float ids
  EXPECT_THROW(model.Forward(RandomIds({1, 4}, 32, 1), RandomIds({1, 5}, 32, 2)), OpError);
  EXPECT_THROW(model.Forward(Tensor::FromInts({0, 40}, {1, 2})), OpError);  // id >= V
  graph::ClearTape();
}

TEST(GptTest, ParameterCountsAndFlops) {
  GptConfig c;
  c.vocab_size = 16;
  c.seq_len = 8;
  c.n_layers = 2;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  Gpt dense(c);
  // tok 16·8 + pos 8·8 + 2 × (norm1 16 + attn 4·64 + norm2 16 + mlp 2·8·16) + norm_f 16.
  EXPECT_EQ(dense.NumParameters(), 128 + 64 + 2 * (16 + 256 + 16 + 256) + 16);
  EXPECT_EQ(dense.NumActiveParameters(), dense.NumParameters());
  EXPECT_EQ(dense.NumEmbeddingParameters(), 128 + 64);
  EXPECT_EQ(dense.NumFlopParameters(), 1296 - 192 + 128);  // tied head counts as a matmul
  EXPECT_DOUBLE_EQ(dense.TrainingFlopsPerToken(), 6.0 * 1232 + 12.0 * 2 * 8 * 8);
  c.moe.num_experts = 4;
  c.moe.top_k = 2;
  c.moe.layers = {1};
  c.moe.d_ff_expert = 16;
  Gpt moe(c);
  // Layer 1's MLP (256) becomes router 8·4 + 4 experts × 256.
  EXPECT_EQ(moe.NumParameters(), 1296 - 256 + 32 + 4 * 256);
  EXPECT_EQ(moe.NumActiveParameters(), moe.NumParameters() - 2 * 256);
  c.tie_embeddings = false;
  c.rope = true;
  Gpt untied(c);
  EXPECT_EQ(untied.NumEmbeddingParameters(), 128);
  EXPECT_EQ(untied.NumFlopParameters(), untied.NumActiveParameters() - 128);
}

TEST(GptTest, SameSeedSameModelAndNames) {
  Gpt a(Tiny(true)), b(Tiny(true));
  auto sa = a.StateDict(), sb = b.StateDict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [name, t] : sa) EXPECT_EQ(t.ToFloatVector(), sb.at(name).ToFloatVector()) << name;
  EXPECT_TRUE(sa.count("blocks.1.moe.experts.3.w_gate.weight"));
  EXPECT_TRUE(sa.count("blocks.0.ffn.w_down.weight"));
  EXPECT_TRUE(sa.count("blocks.0.attn.wq.weight"));
  EXPECT_FALSE(sa.count("pos_emb.weight"));  // rope
  EXPECT_FALSE(sa.count("lm_head.weight"));  // tied
}

TEST(GptTest, DropoutOnlyInTrainingAndReproducible) {
  GptConfig c = Tiny(false);
  c.dropout = 0.2f;
  Gpt a(c), b(c);
  Tensor ids = RandomIds({2, 8}, 32, 3);
  std::vector<float> a1 = a.Forward(ids).logits.ToFloatVector();
  std::vector<float> a2 = a.Forward(ids).logits.ToFloatVector();
  EXPECT_NE(a1, a2);  // a new mask per forward
  EXPECT_EQ(a.forward_count(), 2u);
  EXPECT_EQ(b.Forward(ids).logits.ToFloatVector(), a1);  // same stream position, same mask
  a.SetTraining(false);
  EXPECT_EQ(a.Forward(ids).logits.ToFloatVector(), a.Forward(ids).logits.ToFloatVector());
  EXPECT_EQ(a.forward_count(), 2u);
  graph::ClearTape();
}

TEST(MoeTest, RoutingPicksTopKDistinctExpertsWithNormalizedGates) {
  Gpt model(Tiny(true));
  Tensor ids = RandomIds({2, 16}, 32, 4);
  model.Forward(ids);
  graph::ClearTape();
  const MoeRouting& r = model.block(1).moe()->last_routing();
  ASSERT_EQ(r.tokens, 32);
  ASSERT_EQ(r.expert_indices.size(), 64u);
  int64_t kept = 0;
  for (int64_t t = 0; t < r.tokens; ++t) {
    std::set<int64_t> experts = {r.expert_indices[t * 2], r.expert_indices[t * 2 + 1]};
    EXPECT_EQ(experts.size(), 2u);
    for (int64_t e : experts) EXPECT_TRUE(e >= 0 && e < 4);
    EXPECT_NEAR(r.gates[t * 2] + r.gates[t * 2 + 1], 1.0f, 1e-6);
    EXPECT_GE(r.gates[t * 2], r.gates[t * 2 + 1]);  // descending
  }
  for (int64_t n : r.tokens_per_expert) kept += n;
  EXPECT_EQ(kept, 64);
  EXPECT_EQ(r.dropped, 0);
  EXPECT_EQ(r.capacity, -1);
}

TEST(MoeTest, CapacityDropsDeterministically) {
  GptConfig c = Tiny(true);
  c.moe.capacity_factor = 0.5;  // capacity = ceil(0.5 · 32 · 2 / 4) = 8
  Gpt model(c);
  Tensor ids = RandomIds({2, 16}, 32, 5);
  std::vector<float> first = model.Forward(ids).logits.ToFloatVector();
  const MoeRouting r = model.block(1).moe()->last_routing();
  EXPECT_EQ(r.capacity, 8);
  int64_t kept = 0;
  for (int64_t n : r.tokens_per_expert) {
    EXPECT_LE(n, 8);
    kept += n;
  }
  EXPECT_EQ(kept + r.dropped, 64);
  EXPECT_GT(r.dropped, 0);
  EXPECT_EQ(model.Forward(ids).logits.ToFloatVector(), first);
  graph::ClearTape();
}

TEST(MoeTest, LoadBalancingLossValues) {
  // Uniform router probabilities: aux = E · Σ f_e / E = 1 whatever the choice.
  Tensor uniform = Tensor::Full({6, 3}, 1.0 / 3.0);
  Tensor idx = Tensor::FromInts({0, 0, 0, 1, 1, 2}, {6, 1});
  EXPECT_NEAR(LoadBalancingLoss(uniform, idx, 3).Item(), 1.0, 1e-6);
  // Balanced assignments and balanced mean probability, non-uniform rows.
  Tensor probs = Tensor::FromVector({0.7f, 0.2f, 0.1f, 0.1f, 0.7f, 0.2f, 0.2f, 0.1f, 0.7f}, {3, 3});
  Tensor diag = Tensor::FromInts({0, 1, 2}, {3, 1});
  EXPECT_NEAR(LoadBalancingLoss(probs, diag, 3).Item(), 1.0, 1e-6);
  // Everything to expert 0 with probability 1: aux = E.
  Tensor collapsed = Tensor::FromVector({1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}, {3, 4});
  EXPECT_NEAR(LoadBalancingLoss(collapsed, Tensor::FromInts({0, 0, 0}, {3, 1}), 4).Item(), 4.0, 1e-6);
  // A model whose router weights are zero routes uniformly: aux loss is 1.
  Gpt model(Tiny(true));
  Tensor router = model.block(1).moe()->router().weight();
  router.ZeroFill();
  GptOutput out = model.Forward(RandomIds({2, 8}, 32, 6), RandomIds({2, 8}, 32, 7));
  EXPECT_NEAR(out.aux_loss.Item(), 1.0, 1e-6);
  graph::ClearTape();
}

// Loss after `steps` AdamW steps on one fixed batch, relative to the start.
double OverfitRatio(const GptConfig& config, int steps) {
  Gpt model(config);
  Tensor ids = RandomIds({4, 16}, config.vocab_size, 10), targets = RandomIds({4, 16}, config.vocab_size, 11);
  optim::AdamWOptions opt;
  opt.weight_decay = 0.0;
  optim::AdamW adam(model.NamedParameters(), opt);
  double first = 0, last = 0;
  for (int s = 0; s < steps; ++s) {
    model.ZeroGrad();
    GptOutput out = model.Forward(ids, targets);
    last = out.ce_loss.Item();
    if (s == 0) first = last;
    graph::Backward(out.loss);
    adam.Step(1e-2);
  }
  return last / first;
}

TEST(GptTest, DenseModelOverfitsOneBatch) { EXPECT_LT(OverfitRatio(Tiny(false), 50), 0.5); }

TEST(GptTest, MoeModelOverfitsOneBatch) { EXPECT_LT(OverfitRatio(Tiny(true), 50), 0.5); }

TEST(GptTest, MoeGradientsMatchFiniteDifferences) {
  GptConfig c = Tiny(true);
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 16;
  c.moe.d_ff_expert = 8;
  c.moe.aux_loss_coef = 0.5;  // make the router's aux-loss gradient visible
  c.init_std = 0.2f;
  c.tie_embeddings = false;
  Gpt model(c);
  Tensor ids = RandomIds({2, 6}, 32, 12), targets = RandomIds({2, 6}, 32, 13);
  auto params = model.StateDict();
  std::vector<Tensor> checked = {params.at("blocks.1.moe.router.weight"),
                                 params.at("blocks.1.moe.experts.2.w_up.weight"),
                                 params.at("blocks.1.moe.experts.0.w_down.weight"),
                                 params.at("blocks.0.attn.wq.weight"),
                                 params.at("blocks.1.norm2.weight"),
                                 params.at("tok_emb.weight"),
                                 params.at("lm_head.weight")};
  graph::testing::GradCheckOptions opt;
  opt.eps = 2e-3;
  opt.atol = 5e-4;
  opt.rtol = 2e-2;
  opt.max_samples = 8;
  model.ZeroGrad();
  graph::testing::ExpectGradientsMatch("moe gpt", checked,
                                       [&](const std::vector<Tensor>&) { return model.Forward(ids, targets).loss; },
                                       opt);
}

TEST(GptTest, Bf16ComputeWithFp32Masters) {
  GptConfig c = Tiny(true);
  Gpt ref(c);
  c.compute_dtype = DType::kBF16;
  Gpt mixed(c);
  Tensor ids = RandomIds({2, 16}, 32, 14), targets = RandomIds({2, 16}, 32, 15);
  const double ref_loss = ref.Forward(ids, targets).loss.Item();
  graph::ClearTape();
  GptOutput out = mixed.Forward(ids, targets);
  EXPECT_EQ(out.logits.dtype(), DType::kBF16);
  EXPECT_NEAR(out.loss.Item(), ref_loss, 0.05);
  graph::Backward(out.loss);
  for (const auto& [name, p] : mixed.NamedParameters()) {
    if (!p.grad().defined()) continue;  // an expert without tokens
    EXPECT_EQ(p.grad().dtype(), DType::kF32) << name;
  }
  EXPECT_TRUE(mixed.StateDict().at("tok_emb.weight").grad().defined());
}

}  // namespace
}  // namespace tessera::models
