#include "tessera/models/gpt.h"

#include <cmath>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/tensor/rng.h"

namespace tessera::models {
namespace {

constexpr uint64_t kDropoutStream = 0x64726f706f7574ull;  // "dropout"

float ResidualStd(const GptConfig& config) {
  return config.init_std / std::sqrt(2.0f * static_cast<float>(config.n_layers));
}

}  // namespace

Norm::Norm(NormKind kind, int64_t dim, float eps, DType dtype) : kind_(kind), eps_(eps) {
  weight_ = RegisterParameter("weight", Tensor::Empty({dim}, dtype), graph::ParamInit::Ones());
  if (kind == NormKind::kLayerNorm) {
    bias_ = RegisterParameter("bias", Tensor::Empty({dim}, dtype), graph::ParamInit::Zeros());
  }
}

Tensor Norm::Forward(const Tensor& x) const {
  if (kind_ == NormKind::kLayerNorm) return graph::LayerNorm(x, weight_, bias_, eps_);
  return graph::RmsNorm(x, weight_, eps_);
}

CausalSelfAttention::CausalSelfAttention(const GptConfig& config)
    : n_heads_(config.n_heads), head_dim_(config.head_dim()), rope_(config.rope), rope_base_(config.rope_base) {
  const int64_t d = config.d_model;
  auto make = [&](const char* name, float std) {
    auto linear = std::make_unique<graph::nn::Linear>(d, d, config.bias, std, config.param_dtype);
    RegisterModule(name, linear.get());
    return linear;
  };
  wq_ = make("wq", config.init_std);
  wk_ = make("wk", config.init_std);
  wv_ = make("wv", config.init_std);
  wo_ = make("wo", ResidualStd(config));
}

Tensor MultiHeadCausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, int64_t head_dim,
                                bool rope, float rope_base) {
  const int64_t b = q.size(0), t = q.size(1);
  auto split = [&](const Tensor& y) {
    return graph::Contiguous(graph::Transpose(graph::Reshape(y, {b, t, heads, head_dim}), 1, 2));  // [B, H, T, Dh]
  };
  Tensor qh = split(q), kh = split(k), vh = split(v);
  if (rope) {
    qh = graph::Rope(qh, rope_base);
    kh = graph::Rope(kh, rope_base);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  Tensor o = graph::CausalAttention(qh, kh, vh, scale);
  return graph::Reshape(graph::Transpose(o, 1, 2), {b, t, heads * head_dim});
}

Tensor CausalSelfAttention::Forward(const Tensor& x) const {
  Tensor o = MultiHeadCausalAttention(wq_->Forward(x), wk_->Forward(x), wv_->Forward(x), n_heads_, head_dim_, rope_,
                                      rope_base_);
  return wo_->Forward(o);
}

Block::Block(const GptConfig& config, int layer) : dropout_(config.dropout) {
  norm1_ = std::make_unique<Norm>(config.norm, config.d_model, config.norm_eps, config.param_dtype);
  RegisterModule("norm1", norm1_.get());
  attn_ = std::make_unique<CausalSelfAttention>(config);
  RegisterModule("attn", attn_.get());
  norm2_ = std::make_unique<Norm>(config.norm, config.d_model, config.norm_eps, config.param_dtype);
  RegisterModule("norm2", norm2_.get());
  if (config.IsMoeLayer(layer)) {
    moe_ = std::make_unique<MoeFfn>(config);
    RegisterModule("moe", moe_.get());
  } else {
    mlp_ = std::make_unique<Mlp>(config.d_model, config.ffn_dim(), config.activation, config.bias, config.init_std,
                                 ResidualStd(config), config.param_dtype);
    RegisterModule("ffn", mlp_.get());
  }
}

Tensor Block::Forward(const Tensor& x, bool training, uint64_t dropout_seed, Tensor* aux) {
  Tensor a = attn_->Forward(norm1_->Forward(x));
  Tensor h = graph::Add(x, graph::Dropout(a, dropout_, training, DeriveSeed(dropout_seed, 0)));
  Tensor f;
  if (moe_) {
    MoeOutput out = moe_->Forward(norm2_->Forward(h));
    f = out.y;
    *aux = out.aux_loss;
  } else {
    f = mlp_->Forward(norm2_->Forward(h));
  }
  return graph::Add(h, graph::Dropout(f, dropout_, training, DeriveSeed(dropout_seed, 1)));
}

Gpt::Gpt(const GptConfig& config) : config_(config) {
  TESSERA_CHECK_OK(config_.Validate());
  const DType pd = config_.param_dtype;
  tok_emb_ = std::make_unique<graph::nn::Embedding>(config_.vocab_size, config_.d_model, config_.init_std, pd);
  RegisterModule("tok_emb", tok_emb_.get());
  if (!config_.rope) {
    pos_emb_ = std::make_unique<graph::nn::Embedding>(config_.seq_len, config_.d_model, config_.init_std, pd);
    RegisterModule("pos_emb", pos_emb_.get());
  }
  blocks_ = std::make_unique<graph::nn::ModuleList<Block>>();
  for (int i = 0; i < config_.n_layers; ++i) blocks_->Append(std::make_unique<Block>(config_, i));
  RegisterModule("blocks", blocks_.get());
  norm_f_ = std::make_unique<Norm>(config_.norm, config_.d_model, config_.norm_eps, pd);
  RegisterModule("norm_f", norm_f_.get());
  if (!config_.tie_embeddings) {
    lm_head_ = std::make_unique<graph::nn::Linear>(config_.d_model, config_.vocab_size, false, config_.init_std, pd);
    RegisterModule("lm_head", lm_head_.get());
  }
  InitParameters(config_.seed);
}

StatusOr<std::unique_ptr<Gpt>> Gpt::Create(const GptConfig& config) {
  TESSERA_RETURN_IF_ERROR(config.Validate());
  return std::make_unique<Gpt>(config);
}

uint64_t Gpt::BeginForward() {
  if (!training() || config_.dropout <= 0.0f) return 0;
  const uint64_t seed = DeriveSeed(DeriveSeed(config_.seed, kDropoutStream), forward_count_);
  ++forward_count_;
  return seed;
}

uint64_t Gpt::BlockDropoutSeed(uint64_t step_seed, int layer) {
  return DeriveSeed(step_seed, 1 + static_cast<uint64_t>(layer));
}

Tensor Gpt::Embed(const Tensor& ids, uint64_t step_seed) const {
  TESSERA_OP_CHECK(ids.defined() && ids.dim() == 2 && (ids.dtype() == DType::kI64 || ids.dtype() == DType::kI32),
                   "Gpt::Forward: ids must be [B, T] int64/int32, got {} {}",
                   ids.defined() ? ShapeString(ids.shape()) : "undefined",
                   ids.defined() ? DTypeName(ids.dtype()) : "");
  const int64_t b = ids.size(0), t = ids.size(1);
  TESSERA_OP_CHECK(b >= 1 && t >= 1 && t <= config_.seq_len,
                   "Gpt::Forward: ids shape {} needs B >= 1 and 1 <= T <= seq_len = {}", ShapeString(ids.shape()),
                   config_.seq_len);
  Tensor x = tok_emb_->Forward(ids);
  if (pos_emb_) x = graph::Add(x, graph::Slice(pos_emb_->weight(), 0, 0, t));
  x = graph::Cast(x, config_.compute_dtype);
  return graph::Dropout(x, config_.dropout, training(), DeriveSeed(step_seed, 0));
}

Tensor Gpt::Head(const Tensor& x) const {
  Tensor h = norm_f_->Forward(x);
  if (lm_head_) return lm_head_->Forward(h);
  return graph::MatMul(h, graph::Cast(tok_emb_->weight(), h.dtype()), false, true);
}

GptOutput Gpt::Finish(Tensor logits, const Tensor& targets, const std::vector<Tensor>& moe_aux_losses) const {
  GptOutput out;
  out.logits = std::move(logits);
  Tensor aux_sum;
  for (const Tensor& aux : moe_aux_losses) aux_sum = aux_sum.defined() ? graph::Add(aux_sum, aux) : aux;
  const auto moe_layers = static_cast<float>(moe_aux_losses.size());
  out.aux_loss = aux_sum.defined() ? graph::Scale(aux_sum, 1.0f / moe_layers) : Tensor::Zeros({}, DType::kF32);
  if (targets.defined()) {
    TESSERA_OP_CHECK(targets.dim() == 2 && targets.size(0) == out.logits.size(0) &&
                         targets.size(1) == out.logits.size(1) && targets.dtype() == DType::kI64,
                     "Gpt::Forward: targets must be int64 with the ids' shape [{}, {}], got {} {}",
                     out.logits.size(0), out.logits.size(1), ShapeString(targets.shape()),
                     DTypeName(targets.dtype()));
    out.ce_loss = graph::CrossEntropy(out.logits, targets);
    if (aux_sum.defined() && config_.moe.aux_loss_coef > 0.0) {
      out.loss = graph::Add(out.ce_loss, graph::Scale(out.aux_loss, static_cast<float>(config_.moe.aux_loss_coef)));
    } else {
      out.loss = out.ce_loss;
    }
  }
  return out;
}

GptOutput Gpt::Forward(const Tensor& ids, const Tensor& targets) {
  if (targets.defined() && ids.defined()) {
    TESSERA_OP_CHECK(targets.shape() == ids.shape() && targets.dtype() == DType::kI64,
                     "Gpt::Forward: targets must be int64 with the ids' shape {}, got {} {}",
                     ShapeString(ids.shape()), ShapeString(targets.shape()), DTypeName(targets.dtype()));
  }
  const uint64_t step_seed = BeginForward();
  Tensor x = Embed(ids, step_seed);
  std::vector<Tensor> aux_losses;
  for (int i = 0; i < config_.n_layers; ++i) {
    Tensor aux;
    x = (*blocks_)[i].Forward(x, training(), BlockDropoutSeed(step_seed, i), &aux);
    if (aux.defined()) aux_losses.push_back(aux);
  }
  return Finish(Head(x), targets, aux_losses);
}

int64_t Gpt::NumActiveParameters() const {
  int64_t inactive = 0;
  for (int i = 0; i < config_.n_layers; ++i) {
    if (MoeFfn* moe = block(i).moe()) {
      inactive += static_cast<int64_t>(config_.moe.num_experts - config_.moe.top_k) * moe->ParametersPerExpert();
    }
  }
  return NumParameters() - inactive;
}

int64_t Gpt::NumEmbeddingParameters() const {
  return tok_emb_->weight().numel() + (pos_emb_ ? pos_emb_->weight().numel() : 0);
}

int64_t Gpt::NumFlopParameters() const {
  const int64_t head = config_.tie_embeddings ? config_.vocab_size * config_.d_model : 0;
  return NumActiveParameters() - NumEmbeddingParameters() + head;
}

double Gpt::TrainingFlopsPerToken() const {
  return 6.0 * static_cast<double>(NumFlopParameters()) +
         12.0 * config_.n_layers * static_cast<double>(config_.seq_len) * static_cast<double>(config_.d_model);
}

}  // namespace tessera::models
