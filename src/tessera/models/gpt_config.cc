#include "tessera/models/gpt_config.h"

#include <algorithm>
#include <set>

namespace tessera::models {

std::string_view NormKindName(NormKind kind) { return kind == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }

std::string_view ActivationKindName(ActivationKind kind) {
  return kind == ActivationKind::kGelu ? "gelu" : "swiglu";
}

StatusOr<NormKind> ParseNormKind(std::string_view name) {
  if (name == "layernorm") return NormKind::kLayerNorm;
  if (name == "rmsnorm") return NormKind::kRmsNorm;
  return InvalidArgument("unknown norm '{}' (expected 'layernorm' or 'rmsnorm')", name);
}

StatusOr<ActivationKind> ParseActivationKind(std::string_view name) {
  if (name == "gelu") return ActivationKind::kGelu;
  if (name == "swiglu") return ActivationKind::kSwiGlu;
  return InvalidArgument("unknown activation '{}' (expected 'gelu' or 'swiglu')", name);
}

bool GptConfig::IsMoeLayer(int layer) const {
  if (moe.num_experts <= 0) return false;
  if (!moe.layers.empty()) return std::find(moe.layers.begin(), moe.layers.end(), layer) != moe.layers.end();
  return moe.every >= 1 && (layer + 1) % moe.every == 0;
}

int GptConfig::NumMoeLayers() const {
  int n = 0;
  for (int i = 0; i < n_layers; ++i) n += IsMoeLayer(i) ? 1 : 0;
  return n;
}

Status GptConfig::Validate() const {
  if (vocab_size < 2) return InvalidArgument("gpt config: vocab_size must be >= 2, got {}", vocab_size);
  if (seq_len < 1) return InvalidArgument("gpt config: seq_len must be >= 1, got {}", seq_len);
  if (n_layers < 1) return InvalidArgument("gpt config: n_layers must be >= 1, got {}", n_layers);
  if (d_model < 1 || n_heads < 1) {
    return InvalidArgument("gpt config: d_model ({}) and n_heads ({}) must be positive", d_model, n_heads);
  }
  if (d_model % n_heads != 0) {
    return InvalidArgument("gpt config: d_model ({}) must be divisible by n_heads ({})", d_model, n_heads);
  }
  if (rope && head_dim() % 2 != 0) {
    return InvalidArgument("gpt config: rope needs an even head dimension, d_model / n_heads = {} / {} = {}",
                           d_model, n_heads, head_dim());
  }
  if (rope && !(rope_base > 1.0f)) return InvalidArgument("gpt config: rope_base must be > 1, got {}", rope_base);
  if (d_ff < 0) return InvalidArgument("gpt config: d_ff must be >= 0 (0 = 4 * d_model), got {}", d_ff);
  if (!(dropout >= 0.0f && dropout < 1.0f)) return InvalidArgument("gpt config: dropout must lie in [0, 1), got {}", dropout);
  if (!(init_std > 0.0f)) return InvalidArgument("gpt config: init_std must be positive, got {}", init_std);
  if (!(norm_eps > 0.0f)) return InvalidArgument("gpt config: norm_eps must be positive, got {}", norm_eps);
  if (!IsFloating(param_dtype) || !IsFloating(compute_dtype)) {
    return InvalidArgument("gpt config: param_dtype ({}) and compute_dtype ({}) must be floating types",
                           DTypeName(param_dtype), DTypeName(compute_dtype));
  }
  if (moe.num_experts < 0) return InvalidArgument("gpt config: moe.num_experts must be >= 0, got {}", moe.num_experts);
  if (moe.num_experts == 0) return Status::Ok();
  if (moe.top_k < 1 || moe.top_k > moe.num_experts) {
    return InvalidArgument("gpt config: moe.top_k ({}) must lie in [1, moe.num_experts = {}]", moe.top_k,
                           moe.num_experts);
  }
  if (moe.layers.empty() && moe.every < 1) {
    return InvalidArgument("gpt config: moe.every must be >= 1, got {}", moe.every);
  }
  std::set<int> seen;
  for (int layer : moe.layers) {
    if (layer < 0 || layer >= n_layers) {
      return InvalidArgument("gpt config: moe.layers contains {}, outside [0, n_layers = {})", layer, n_layers);
    }
    if (!seen.insert(layer).second) return InvalidArgument("gpt config: moe.layers lists layer {} twice", layer);
  }
  if (NumMoeLayers() == 0) {
    return InvalidArgument("gpt config: moe.num_experts = {} but no layer is MoE (moe.every = {} with n_layers = {})",
                           moe.num_experts, moe.every, n_layers);
  }
  if (moe.d_ff_expert < 0) return InvalidArgument("gpt config: moe.d_ff_expert must be >= 0, got {}", moe.d_ff_expert);
  if (!(moe.aux_loss_coef >= 0.0)) {
    return InvalidArgument("gpt config: moe.aux_loss_coef must be >= 0, got {}", moe.aux_loss_coef);
  }
  if (!(moe.capacity_factor >= 0.0)) {
    return InvalidArgument("gpt config: moe.capacity_factor must be >= 0 (0 = no dropping), got {}",
                           moe.capacity_factor);
  }
  return Status::Ok();
}

}  // namespace tessera::models
