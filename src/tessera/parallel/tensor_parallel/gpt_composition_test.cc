// The tensor-parallel pieces composed into a whole dense GPT (rope, rmsnorm,
// swiglu, tied embeddings) on 2 and 4 thread ranks, with and without
// sequence parallelism: vocab-parallel embedding -> per block replicated
// norms + TensorParallelAttention + TensorParallelMlp -> norm_f -> tied
// vocab-parallel LM head -> VocabParallelCrossEntropy. The loss and every
// parameter gradient (sharded ones re-assembled; replicated ones applied to
// sequence shards summed over tp) equal models::Gpt::Forward's.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/models/gpt.h"
#include "tessera/parallel/tensor_parallel/blocks.h"
#include "tessera/parallel/tensor_parallel/layers.h"
#include "tessera/parallel/tensor_parallel/tp_test_util.h"

namespace tessera::parallel {
namespace {

using testing::ExpectClose;
using testing::RunRanks;

models::GptConfig TinyGpt() {
  models::GptConfig c;
  c.vocab_size = 32;
  c.seq_len = 8;
  c.n_layers = 2;
  c.d_model = 16;
  c.n_heads = 4;
  c.d_ff = 32;
  c.norm = models::NormKind::kRmsNorm;
  c.activation = models::ActivationKind::kSwiGlu;
  c.rope = true;
  c.tie_embeddings = true;
  c.init_std = 0.2f;
  c.seed = 3;
  return c;
}

// A rank's own copy of a replicated norm (the full model's is shared by the threads).
std::unique_ptr<models::Norm> CopyNorm(const models::Norm& full, const models::GptConfig& c) {
  auto norm = std::make_unique<models::Norm>(c.norm, c.d_model, c.norm_eps, c.param_dtype);
  EXPECT_TRUE(norm->LoadStateDict(full.StateDict()).ok());
  return norm;
}

// How a parameter of the composed model is laid out across tp.
enum class Layout { kRows, kColumns, kReplicated, kPartial };

Layout LayoutOf(const std::string& name, bool sp) {
  if (name == "tok_emb.weight") return Layout::kRows;
  if (name.find(".wo.") != std::string::npos || name.find(".w_down.") != std::string::npos) return Layout::kColumns;
  if (name.find(".wq.") != std::string::npos || name.find(".wk.") != std::string::npos ||
      name.find(".wv.") != std::string::npos || name.find(".w_gate.") != std::string::npos ||
      name.find(".w_up.") != std::string::npos) {
    return Layout::kRows;
  }
  return sp ? Layout::kPartial : Layout::kReplicated;  // norms
}

class TpGpt : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(TpGpt, LossAndGradientsMatchTheSingleProcessModel) {
  const auto [p, sp] = GetParam();
  const models::GptConfig config = TinyGpt();
  models::Gpt gpt(config);
  constexpr int64_t kB = 2, kT = 8;
  std::vector<int64_t> ids_v, tgt_v;
  for (int64_t i = 0; i < kB * kT; ++i) {
    ids_v.push_back((i * 11 + 3) % config.vocab_size);
    tgt_v.push_back(i % 7 == 6 ? -100 : (i * 5 + 1) % config.vocab_size);
  }
  const Tensor ids = Tensor::FromInts(ids_v, {kB, kT}), targets = Tensor::FromInts(tgt_v, {kB, kT});
  models::GptOutput ref = gpt.Forward(ids, targets);
  graph::Backward(ref.loss);
  std::map<std::string, Tensor> ref_grads;
  std::vector<Tensor> all;
  for (auto& [name, t] : gpt.NamedParameters()) {
    ref_grads[name] = t.grad();
    all.push_back(t.grad());
  }
  const double grad_scale = testing::MaxAbs(all);

  RunRanks(p, [&, p = p, sp = sp](int, comm::Communicator& c) {
    // Build the rank's model; parameters keyed by their full-model names.
    VocabParallelEmbedding emb(gpt.tok_emb(), &c, sp);
    std::vector<std::unique_ptr<models::Norm>> norms;
    std::vector<std::unique_ptr<TensorParallelAttention>> attn;
    std::vector<std::unique_ptr<TensorParallelMlp>> mlp;
    std::map<std::string, Tensor> params{{"tok_emb.weight", emb.weight()}};
    std::vector<Tensor> partial;
    auto add = [&](const std::string& prefix, const graph::Module& m) {
      for (auto& [name, t] : m.NamedParameters()) params[prefix + name] = t;
    };
    for (int i = 0; i < config.n_layers; ++i) {
      const models::Block& block = gpt.block(i);
      const std::string prefix = "blocks." + std::to_string(i) + ".";
      norms.push_back(CopyNorm(block.norm1(), config));
      add(prefix + "norm1.", *norms.back());
      norms.push_back(CopyNorm(block.norm2(), config));
      add(prefix + "norm2.", *norms.back());
      attn.push_back(std::make_unique<TensorParallelAttention>(block.attn(), config, &c, sp));
      add(prefix + "attn.", *attn.back());
      mlp.push_back(std::make_unique<TensorParallelMlp>(*block.mlp(), &c, sp));
      add(prefix + "ffn.", *mlp.back());
    }
    norms.push_back(CopyNorm(gpt.norm_f(), config));
    add("norm_f.", *norms.back());
    ASSERT_EQ(params.size(), ref_grads.size());

    // Forward: under SP the residual stream is the rank's sequence shard.
    Tensor x = emb.Forward(ids);
    for (int i = 0; i < config.n_layers; ++i) {
      Tensor h = graph::Add(x, attn[i]->Forward(norms[2 * i]->Forward(x)));
      x = graph::Add(h, mlp[i]->Forward(norms[2 * i + 1]->Forward(h)));
    }
    Tensor loss = VocabParallelCrossEntropy(emb.LmHead(norms.back()->Forward(x)), targets, emb.vocab_start(), &c);
    ExpectClose(loss, ref.loss, 1e-5, "loss");
    graph::Backward(loss);

    for (auto& [name, t] : params) {
      if (LayoutOf(name, sp) == Layout::kPartial) partial.push_back(t);
    }
    AllReduceGradients(partial, &c);
    for (auto& [name, t] : params) {
      Tensor g = t.grad();
      switch (LayoutOf(name, sp)) {
        case Layout::kRows: g = TensorAllGather(g, 0, &c); break;
        case Layout::kColumns: g = name.find(".weight") != std::string::npos ? TensorAllGather(g, 1, &c) : g; break;
        default: break;
      }
      ExpectClose(g, ref_grads.at(name), 1e-5, name + ".grad (tp " + std::to_string(p) + ")", grad_scale);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TpGpt, ::testing::Combine(::testing::Values(2, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return "tp" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sp" : "");
                         });

}  // namespace
}  // namespace tessera::parallel
