#include "tessera/plan/model_spec.h"

#include <algorithm>

namespace tessera::plan {
namespace {

// Weights of one FFN of width f (+ biases).
int64_t FfnParams(const ModelSpec& m, int64_t f) {
  const int64_t matrices = m.ffn == FfnKind::kSwiGlu ? 3 : 2;
  int64_t n = matrices * m.hidden * f;
  if (m.linear_bias) n += (matrices - 1) * f + m.hidden;
  return n;
}

int64_t AttentionExtra(const ModelSpec& m) {
  int64_t n = 0;
  if (m.attention == AttentionKind::kMla) {
    n += m.mla.q_lora_rank + m.mla.kv_lora_rank;  // the latent RMSNorms
  }
  if (m.linear_bias) {
    n += m.attention == AttentionKind::kMla ? m.hidden
                                            : m.heads * m.head_dim + 2 * m.kv_heads * m.head_dim + m.hidden;
  }
  return n;
}

int64_t NormParams(const ModelSpec& m) { return m.layernorm ? 2 * m.hidden : m.hidden; }

}  // namespace

int64_t FfnMatmulParams(const ModelSpec& m, int64_t f) { return (m.ffn == FfnKind::kSwiGlu ? 3 : 2) * m.hidden * f; }

int64_t AttentionMatmulParams(const ModelSpec& m) {
  const int64_t h = m.hidden;
  if (m.attention == AttentionKind::kMla) {
    const MlaDims& d = m.mla;
    const int64_t qk = d.qk_nope_head_dim + d.qk_rope_head_dim;
    const int64_t q = d.q_lora_rank > 0 ? h * d.q_lora_rank + d.q_lora_rank * m.heads * qk : h * m.heads * qk;
    const int64_t kv = h * (d.kv_lora_rank + d.qk_rope_head_dim) +
                       d.kv_lora_rank * m.heads * (d.qk_nope_head_dim + d.v_head_dim);
    return q + kv + m.heads * d.v_head_dim * h;
  }
  const int64_t q = m.heads * m.head_dim;
  const int64_t kv = m.kv_heads * m.head_dim;
  return h * (q + 2 * kv) + q * h;
}

int64_t ModelSpec::NumMoeLayers() const {
  return std::count(moe_layer.begin(), moe_layer.end(), true);
}

int64_t ModelSpec::QkHeadDim() const {
  return attention == AttentionKind::kMla ? mla.qk_nope_head_dim + mla.qk_rope_head_dim : head_dim;
}

int64_t ModelSpec::VHeadDim() const { return attention == AttentionKind::kMla ? mla.v_head_dim : head_dim; }

Status ValidateModelSpec(const ModelSpec& m) {
  auto positive = [&](const char* key, int64_t v) -> Status {
    if (v <= 0) return InvalidArgument("model '{}': {} must be positive, got {}", m.name, key, v);
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(positive("layers", m.layers));
  TESSERA_RETURN_IF_ERROR(positive("hidden", m.hidden));
  TESSERA_RETURN_IF_ERROR(positive("heads", m.heads));
  TESSERA_RETURN_IF_ERROR(positive("kv_heads", m.kv_heads));
  TESSERA_RETURN_IF_ERROR(positive("head_dim", m.head_dim));
  TESSERA_RETURN_IF_ERROR(positive("vocab", m.vocab));
  TESSERA_RETURN_IF_ERROR(positive("seq_len", m.seq_len));
  if (m.heads % m.kv_heads != 0) {
    return InvalidArgument("model '{}': heads ({}) must be a multiple of kv_heads ({})", m.name, m.heads,
                           m.kv_heads);
  }
  if (static_cast<int64_t>(m.moe_layer.size()) != m.layers) {
    return InvalidArgument("model '{}': moe_layer has {} entries for {} layers", m.name, m.moe_layer.size(),
                           m.layers);
  }
  if (m.attention == AttentionKind::kMla) {
    TESSERA_RETURN_IF_ERROR(positive("mla.kv_lora_rank", m.mla.kv_lora_rank));
    TESSERA_RETURN_IF_ERROR(positive("mla.qk_nope_head_dim", m.mla.qk_nope_head_dim));
    TESSERA_RETURN_IF_ERROR(positive("mla.v_head_dim", m.mla.v_head_dim));
  }
  const int64_t dense_layers = m.layers - m.NumMoeLayers();
  if (dense_layers > 0) TESSERA_RETURN_IF_ERROR(positive("ffn_hidden", m.ffn_hidden));
  if (m.NumMoeLayers() > 0 || m.IsMoe()) {
    TESSERA_RETURN_IF_ERROR(positive("moe.experts", m.moe.experts));
    TESSERA_RETURN_IF_ERROR(positive("moe.top_k", m.moe.top_k));
    TESSERA_RETURN_IF_ERROR(positive("moe.expert_ffn_hidden", m.moe.expert_ffn_hidden));
    if (m.moe.top_k > m.moe.experts) {
      return InvalidArgument("model '{}': moe.top_k ({}) exceeds moe.experts ({})", m.name, m.moe.top_k,
                             m.moe.experts);
    }
    if (m.moe.shared_experts < 0) {
      return InvalidArgument("model '{}': moe.shared_experts must be >= 0, got {}", m.name,
                             m.moe.shared_experts);
    }
    if (m.NumMoeLayers() == 0) {
      return InvalidArgument("model '{}': [moe] is given but no layer is an MoE layer", m.name);
    }
  }
  return Status::Ok();
}

ParamCounts CountParams(const ModelSpec& m) {
  ParamCounts c;
  c.attention_per_layer = AttentionMatmulParams(m) + AttentionExtra(m);
  c.norms_per_layer = 2 * NormParams(m);
  c.dense_ffn_per_layer = m.ffn_hidden > 0 ? FfnParams(m, m.ffn_hidden) : 0;
  if (m.IsMoe()) {
    c.expert = FfnParams(m, m.moe.expert_ffn_hidden);
    c.router = m.hidden * m.moe.experts;
  }
  c.embedding = m.vocab * m.hidden + (m.learned_positions ? m.seq_len * m.hidden : 0);
  c.output_head = m.tied_embeddings ? 0 : m.vocab * m.hidden;
  c.final_norm = NormParams(m);
  const int64_t moe_layers = m.NumMoeLayers();
  const int64_t dense_layers = m.layers - moe_layers;
  const int64_t per_layer_common = c.attention_per_layer + c.norms_per_layer;
  const int64_t outside = c.embedding + c.output_head + c.final_norm;
  c.expert_total = moe_layers * (m.moe.experts + m.moe.shared_experts) * c.expert;
  c.total = m.layers * per_layer_common + dense_layers * c.dense_ffn_per_layer +
            moe_layers * c.router + c.expert_total + outside;
  c.active = m.layers * per_layer_common + dense_layers * c.dense_ffn_per_layer +
             moe_layers * (c.router + (m.moe.top_k + m.moe.shared_experts) * c.expert) + outside;
  return c;
}

FlopsPerToken ForwardFlopsPerToken(const ModelSpec& m, int64_t seq) {
  if (seq <= 0) seq = m.seq_len;
  FlopsPerToken f;
  const double moe_layers = static_cast<double>(m.NumMoeLayers());
  const double dense_layers = static_cast<double>(m.layers) - moe_layers;
  const double attn = static_cast<double>(AttentionMatmulParams(m));
  double matmul = m.layers * attn + dense_layers * (m.ffn_hidden > 0 ? FfnMatmulParams(m, m.ffn_hidden) : 0);
  if (m.IsMoe()) {
    const double expert = static_cast<double>(FfnMatmulParams(m, m.moe.expert_ffn_hidden));
    matmul += moe_layers * (static_cast<double>(m.hidden) * m.moe.experts +
                            (m.moe.top_k + m.moe.shared_experts) * expert);
  }
  f.layers_matmul = 2.0 * matmul;
  f.attention_core = 2.0 * m.layers * static_cast<double>(seq) * m.heads * (m.QkHeadDim() + m.VHeadDim());
  f.logits = 2.0 * static_cast<double>(m.hidden) * m.vocab;
  return f;
}

}  // namespace tessera::plan
