// ModelSpec: the shape of a dense or MoE decoder-only transformer as the
// planner sees it (configs/models/*.toml), plus its parameter counts and
// FLOPs per token. Counting conventions (docs/plan.md):
//  - matmul FLOPs are 2 per weight element per token (biases, norms and
//    element-wise work are not FLOPs here);
//  - attention scores QK^T and AV count the full s x s matrix (Megatron's
//    convention, so the 96·B·s·l·h²·(1 + s/6h + V/16lh) formula of
//    Narayanan et al. 2021 is reproduced exactly);
//  - training = forward + 2x forward for backward; full recompute adds one
//    more forward of every layer (not of the logits); selective recompute
//    adds one more forward of the attention core.
// Plain value type; all functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::plan {

enum class FfnKind { kGelu, kSwiGlu };          // 2 or 3 weight matrices
enum class AttentionKind { kStandard, kMla };   // MHA/GQA, or DeepSeek's MLA

// Multi-head latent attention (DeepSeek-V2/V3) low-rank dimensions.
struct MlaDims {
  int64_t q_lora_rank = 0;   // 0: queries projected directly
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
};

struct MoeSpec {
  int64_t experts = 0;            // routed experts per MoE layer (0: dense model)
  int64_t top_k = 0;              // routed experts per token
  int64_t shared_experts = 0;     // always-active experts per MoE layer
  int64_t expert_ffn_hidden = 0;  // FFN width of one expert
};

struct ModelSpec {
  std::string name;
  std::string description;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;    // = heads for MHA
  int64_t head_dim = 0;    // = hidden / heads unless given
  int64_t ffn_hidden = 0;  // FFN width of dense layers
  int64_t vocab = 0;
  int64_t seq_len = 0;
  int64_t global_batch = 0;  // sequences per step of the reference recipe (0: not given)
  FfnKind ffn = FfnKind::kGelu;
  AttentionKind attention = AttentionKind::kStandard;
  MlaDims mla;
  bool tied_embeddings = true;
  bool learned_positions = true;
  bool linear_bias = true;
  bool layernorm = true;  // false: RMSNorm (no bias)
  bool dropout = true;    // dropout masks are kept for backward
  MoeSpec moe;
  std::vector<bool> moe_layer;  // per layer: true = MoE FFN (size `layers`)

  bool IsMoe() const { return moe.experts > 0; }
  int64_t NumMoeLayers() const;
  // Query/key width per head and value width per head.
  int64_t QkHeadDim() const;
  int64_t VHeadDim() const;
};

// Checks internal consistency (positive sizes, divisibility, top_k <= experts).
Status ValidateModelSpec(const ModelSpec& m);

// Loads a model spec from TOML (format in docs/plan.md); errors name the
// file, line and key.
StatusOr<ModelSpec> LoadModelSpec(const std::string& path);
StatusOr<ModelSpec> ParseModelSpec(const std::string& toml_text, const std::string& source);

// Weight-matmul elements of one attention block / of one FFN of width f
// (no biases, no norms): 2 FLOPs per element per token.
int64_t AttentionMatmulParams(const ModelSpec& m);
int64_t FfnMatmulParams(const ModelSpec& m, int64_t f);

// Parameter counts (elements).
struct ParamCounts {
  int64_t attention_per_layer = 0;   // weights + biases of the attention block
  int64_t norms_per_layer = 0;       // the two norms of one layer
  int64_t dense_ffn_per_layer = 0;   // FFN of a dense layer
  int64_t expert = 0;                // one routed/shared expert
  int64_t router = 0;                // router of one MoE layer
  int64_t embedding = 0;             // token (+ position) embedding
  int64_t output_head = 0;           // untied output projection (0 if tied)
  int64_t final_norm = 0;
  int64_t total = 0;
  int64_t active = 0;                // used per token (top_k + shared experts)
  int64_t expert_total = 0;          // all routed+shared expert weights
};
ParamCounts CountParams(const ModelSpec& m);

// Forward FLOPs per token (at sequence length `seq`, 0 = the model's).
struct FlopsPerToken {
  double layers_matmul = 0;     // all layers' weight matmuls (active experts only)
  double attention_core = 0;    // all layers' QK^T + AV
  double logits = 0;            // output projection
  double Forward() const { return layers_matmul + attention_core + logits; }
  // Training FLOPs without recompute (= "model FLOPs": 3 x forward).
  double Training() const { return 3.0 * Forward(); }
};
FlopsPerToken ForwardFlopsPerToken(const ModelSpec& m, int64_t seq = 0);

}  // namespace tessera::plan
