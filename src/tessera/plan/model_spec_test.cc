#include "tessera/plan/model_spec.h"

#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tessera/plan/testing.h"

namespace tessera::plan {
namespace {

// A tiny GPT whose counts are worked out by hand below.
constexpr const char* kTiny = R"(
name = "tiny"
layers = 2
hidden = 8
heads = 2
ffn_hidden = 32
vocab = 10
seq_len = 4
dropout = 0.1
)";

TEST(ModelSpecTest, TinyGptCountsByHand) {
  auto m = ParseModelSpec(kTiny, "tiny.toml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ParamCounts c = CountParams(*m);
  // Attention: QKV 8x24 + 24 bias, out 8x8 + 8 bias = 192 + 24 + 64 + 8 = 288.
  EXPECT_EQ(c.attention_per_layer, 288);
  // Two LayerNorms of 8 weights + 8 biases.
  EXPECT_EQ(c.norms_per_layer, 32);
  // MLP: 8x32 + 32 + 32x8 + 8 = 552.
  EXPECT_EQ(c.dense_ffn_per_layer, 552);
  // Embedding: tokens 10x8 + positions 4x8 = 112; final LayerNorm 16; tied head.
  EXPECT_EQ(c.embedding, 112);
  EXPECT_EQ(c.output_head, 0);
  EXPECT_EQ(c.total, 2 * (288 + 32 + 552) + 112 + 16);
  EXPECT_EQ(c.active, c.total);
  // Forward FLOPs per token: 2 x (192 + 64 + 256 + 256) per layer = 1536; attention
  // core 2 x 4 (seq) x 2 heads x (4 + 4) = 128 per layer; logits 2 x 8 x 10 = 160.
  const FlopsPerToken f = ForwardFlopsPerToken(*m);
  EXPECT_DOUBLE_EQ(f.layers_matmul, 2 * 1536.0);
  EXPECT_DOUBLE_EQ(f.attention_core, 2 * 128.0);
  EXPECT_DOUBLE_EQ(f.logits, 160.0);
}

// Narayanan et al. 2021: P = 12lh²(1 + 13/12h + (V+s)/12lh) (+ the final
// LayerNorm, 2h, which the formula leaves out), and per-iteration FLOPs with
// full recompute F = 96Bslh²(1 + s/6h + V/16lh).
TEST(ModelSpecTest, MegatronRowsMatchNarayananFormulas) {
  for (const NarayananRow& row : NarayananTable()) {
    const ModelSpec m = TestModel(row.model_file);
    const double l = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    const ParamCounts c = CountParams(m);
    const double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h)) + 2 * h;
    EXPECT_NEAR(static_cast<double>(c.total), formula, 1.0) << row.model_file;
    EXPECT_NEAR(c.total / 1e9, row.params_b, 0.05 * row.params_b) << row.model_file;
    const FlopsPerToken f = ForwardFlopsPerToken(m);
    const double per_token_full_recompute = f.Training() + f.layers_matmul + f.attention_core;
    const double megatron = 96 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    EXPECT_NEAR(per_token_full_recompute / megatron, 1.0, 1e-12) << row.model_file;
    // Without recompute: 6N-ish plus attention: 72lh²(1 + s/6h + V/12lh).
    EXPECT_NEAR(f.Training() / (72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))), 1.0, 1e-12);
  }
}

TEST(ModelSpecTest, PresetTotals) {
  auto gpt3 = LoadModelSpec(ModelPath("gpt3-175b.toml"));
  ASSERT_TRUE(gpt3.ok()) << gpt3.status().ToString();
  EXPECT_NEAR(CountParams(*gpt3).total / 1e9, 175.0, 1.0);

  // DeepSeek-V3: 671 B total, 37 B active (technical report, without the MTP module).
  auto ds = LoadModelSpec(ModelPath("deepseek-v3.toml"));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->NumMoeLayers(), 58);
  const ParamCounts dc = CountParams(*ds);
  EXPECT_NEAR(dc.total / 1e9, 671.0, 671.0 * 0.01);
  EXPECT_NEAR(dc.active / 1e9, 37.0, 37.0 * 0.02);

  auto big = LoadModelSpec(ModelPath("moe-10t.toml"));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const ParamCounts bc = CountParams(*big);
  EXPECT_NEAR(bc.total / 1e12, 10.0, 0.3);
  EXPECT_GT(bc.active / 1e9, 90.0);
  EXPECT_LT(bc.active / 1e9, 115.0);
  // MoE FLOPs count only the routed top-k + shared experts: 2 x active matmul weights.
  const FlopsPerToken f = ForwardFlopsPerToken(*big);
  EXPECT_NEAR(f.layers_matmul + f.logits, 2.0 * bc.active, 0.02 * 2.0 * bc.active);
}

TEST(ModelSpecTest, EveryPresetLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/configs/models")) {
    if (e.path().extension() != ".toml") continue;
    auto m = LoadModelSpec(e.path().string());
    EXPECT_TRUE(m.ok()) << e.path() << ": " << m.status().ToString();
    ++n;
  }
  EXPECT_GE(n, 14);
}

TEST(ModelSpecTest, ErrorsNameFileLineAndKey) {
  auto typo = ParseModelSpec(std::string(kTiny) + "hiden = 4\n", "typo.toml");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("typo.toml:10"), std::string::npos) << typo.status().ToString();
  EXPECT_NE(typo.status().message().find("did you mean 'hidden'"), std::string::npos) << typo.status().ToString();

  auto bad_enum = ParseModelSpec(std::string(kTiny) + "ffn = \"relu\"\n", "enum.toml");
  ASSERT_FALSE(bad_enum.ok());
  EXPECT_NE(bad_enum.status().message().find("ffn: must be \"swiglu\" or \"gelu\""), std::string::npos)
      << bad_enum.status().ToString();

  auto topk = ParseModelSpec(std::string(kTiny) + "[moe]\nexperts = 4\ntop_k = 5\nexpert_ffn_hidden = 8\n", "k.toml");
  ASSERT_FALSE(topk.ok());
  EXPECT_NE(topk.status().ToString().find("top_k (5) exceeds moe.experts (4)"), std::string::npos)
      << topk.status().ToString();

  EXPECT_EQ(LoadModelSpec("/nonexistent/model.toml").status().code(), StatusCode::kNotFound);
}

TEST(ModelSpecTest, MoeLayerPattern) {
  auto m = ParseModelSpec(std::string(kTiny) +
                              "[moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 16\n"
                              "first_dense_layers = 1\nevery = 1\nshared_experts = 1\n",
                          "moe.toml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->moe_layer[0]);
  EXPECT_TRUE(m->moe_layer[1]);
  const ParamCounts c = CountParams(*m);
  // Expert: 8x16 + 16 + 16x8 + 8 = 280; router 8x4; 5 experts (4 routed + 1 shared).
  EXPECT_EQ(c.expert, 280);
  EXPECT_EQ(c.total, 2 * (288 + 32) + 552 + 32 + 5 * 280 + 112 + 16);
  EXPECT_EQ(c.active, 2 * (288 + 32) + 552 + 32 + 3 * 280 + 112 + 16);
}

}  // namespace
}  // namespace tessera::plan
