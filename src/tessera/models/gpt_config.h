// GptConfig: the typed description of a decoder-only transformer (GPT-2 /
// LLaMA family), dense or with Mixture-of-Experts feed-forward layers.
// Validate() reports the first inconsistency with a message naming the
// fields and values. Plain value type; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/tensor/dtype.h"

namespace tessera::models {

enum class NormKind { kLayerNorm, kRmsNorm };
enum class ActivationKind { kGelu, kSwiGlu };

std::string_view NormKindName(NormKind kind);              // "layernorm" | "rmsnorm"
std::string_view ActivationKindName(ActivationKind kind);  // "gelu" | "swiglu"
StatusOr<NormKind> ParseNormKind(std::string_view name);
StatusOr<ActivationKind> ParseActivationKind(std::string_view name);

struct MoeConfig {
  int num_experts = 0;  // 0 = dense model
  int top_k = 2;
  // Which layers are MoE: the explicit list if non-empty, else every
  // `every`-th layer counting from the end of the first group, i.e. layers i
  // with (i + 1) % every == 0 (every = 1: all layers; 2: layers 1, 3, 5, ...).
  std::vector<int> layers;
  int every = 1;
  int64_t d_ff_expert = 0;  // hidden size of each expert; 0 = the dense d_ff
  // Weight of the Switch load-balancing loss (mean over MoE layers).
  double aux_loss_coef = 0.01;
  // Expert capacity = ceil(capacity_factor · tokens · top_k / num_experts);
  // assignments beyond it are dropped (first choices of all tokens take
  // precedence over second choices, then token order). 0 = no dropping.
  double capacity_factor = 0.0;
  // Renormalize the top-k router probabilities of each token to sum to 1
  // (Mixtral). With top_k = 1 this makes the gate constant 1, so set it to
  // false for Switch-style top-1 routing (gate = router probability).
  bool normalize_top_k = true;
};

struct GptConfig {
  int64_t vocab_size = 256;
  int64_t seq_len = 128;  // maximum context length
  int n_layers = 2;
  int64_t d_model = 128;
  int n_heads = 4;
  int64_t d_ff = 0;  // 0 = 4 · d_model
  NormKind norm = NormKind::kLayerNorm;
  ActivationKind activation = ActivationKind::kGelu;
  float dropout = 0.0f;     // residual and embedding dropout (training only)
  bool rope = false;        // rotary positions; false = learned positions
  float rope_base = 10000.0f;
  bool tie_embeddings = true;  // lm head shares the token embedding
  bool bias = false;           // biases in the linear layers
  float init_std = 0.02f;      // residual projections use init_std / sqrt(2 · n_layers)
  float norm_eps = 1e-5f;
  DType param_dtype = DType::kF32;    // storage of the parameters (fp32 masters)
  DType compute_dtype = DType::kF32;  // activations (bf16 for mixed precision)
  uint64_t seed = 1234;               // parameter init and dropout streams
  MoeConfig moe;

  Status Validate() const;

  int64_t head_dim() const { return d_model / n_heads; }
  int64_t ffn_dim() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  int64_t expert_ffn_dim() const { return moe.d_ff_expert > 0 ? moe.d_ff_expert : ffn_dim(); }
  bool IsMoeLayer(int layer) const;
  int NumMoeLayers() const;
};

}  // namespace tessera::models
