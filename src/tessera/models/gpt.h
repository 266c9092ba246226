// Gpt: a decoder-only transformer (GPT-2 / LLaMA family) with optional
// Mixture-of-Experts feed-forward layers, built from graph:: modules and
// differentiable functions, so Backward(output.loss) trains it.
//
//   x = tok_emb(ids) (+ pos_emb[:T] unless rope); x = dropout(x)
//   per block (pre-norm):
//     x = x + dropout(attn(norm1(x)))       attn: causal MHA on [B, H, T, Dh] (+ rope on q, k)
//     x = x + dropout(ffn(norm2(x)))        ffn: Mlp or MoeFfn (see ffn.h)
//   logits = lm_head(norm_f(x))             lm_head = tok_emb (tied) or its own Linear
//   loss = ce + moe.aux_loss_coef · aux     aux = mean of the MoE layers' Switch losses
//
// Parameter names: tok_emb.weight, pos_emb.weight, blocks.<i>.norm1.{weight,bias},
// blocks.<i>.attn.{wq,wk,wv,wo}.{weight,bias}, blocks.<i>.norm2.*,
// blocks.<i>.ffn.{w_gate,w_up,w_down}.* (dense) or blocks.<i>.moe.router.weight
// and blocks.<i>.moe.experts.<e>.{w_gate,w_up,w_down}.* (MoE), norm_f.*,
// lm_head.weight (untied only). Linear weights are [out, in].
// Init (GPT-2): N(0, init_std) for embeddings and linears, init_std/√(2L) for
// the residual projections (wo, w_down), zeros for biases, ones for gains;
// seeded by (config.seed, parameter name).
// Dropout masks depend on (config.seed, forward_count(), site), so a run is
// reproducible and resumable (restore forward_count). No attention-probability
// dropout (the fused attention kernel has none).
// The model holds no parallelism; plans apply it from outside.
// Thread-safety: one thread runs Forward at a time (MoE routing stats and
// the dropout counter are mutated).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/graph/layers.h"
#include "tessera/models/ffn.h"
#include "tessera/models/gpt_config.h"

namespace tessera::models {

struct GptOutput {
  Tensor logits;    // [B, T, V] in compute_dtype
  Tensor loss;      // ce_loss + aux_loss_coef · aux_loss; undefined without targets
  Tensor ce_loss;   // mean cross-entropy over non-ignored targets (fp32 scalar)
  Tensor aux_loss;  // mean MoE load-balancing loss (fp32 scalar; 0 for dense models)
};

// LayerNorm or RMSNorm over the last axis with parameters weight (and bias
// for layernorm).
class Norm : public graph::Module {
 public:
  Norm(NormKind kind, int64_t dim, float eps, DType dtype);
  Tensor Forward(const Tensor& x) const;

 private:
  NormKind kind_;
  float eps_;
  Tensor weight_;
  Tensor bias_;
};

// Causal multi-head attention on projected q, k, v [B, T, heads·head_dim]:
// splits the heads, applies rotary positions (rope), runs the fused causal
// attention with scale 1/√head_dim and merges the heads back to
// [B, T, heads·head_dim]. CausalSelfAttention uses it with all heads, the
// tensor-parallel attention with its local heads.
Tensor MultiHeadCausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, int64_t head_dim,
                                bool rope, float rope_base);

class CausalSelfAttention : public graph::Module {
 public:
  explicit CausalSelfAttention(const GptConfig& config);
  Tensor Forward(const Tensor& x) const;  // [B, T, d] -> [B, T, d]

 private:
  int64_t n_heads_;
  int64_t head_dim_;
  bool rope_;
  float rope_base_;
  std::unique_ptr<graph::nn::Linear> wq_, wk_, wv_, wo_;
};

class Block : public graph::Module {
 public:
  Block(const GptConfig& config, int layer);
  // Returns the updated residual stream. For MoE blocks, *aux receives the
  // layer's load-balancing loss.
  Tensor Forward(const Tensor& x, bool training, uint64_t dropout_seed, Tensor* aux);
  bool is_moe() const { return moe_ != nullptr; }
  MoeFfn* moe() const { return moe_.get(); }
  Mlp* mlp() const { return mlp_.get(); }  // dense blocks
  const Norm& norm1() const { return *norm1_; }
  const Norm& norm2() const { return *norm2_; }
  const CausalSelfAttention& attn() const { return *attn_; }
  float dropout() const { return dropout_; }

 private:
  float dropout_;
  std::unique_ptr<Norm> norm1_, norm2_;
  std::unique_ptr<CausalSelfAttention> attn_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<MoeFfn> moe_;
};

class Gpt : public graph::Module {
 public:
  // CHECKs config.Validate(); use Create to get the error as a Status.
  explicit Gpt(const GptConfig& config);
  static StatusOr<std::unique_ptr<Gpt>> Create(const GptConfig& config);

  // ids: [B, T] int64 (or int32) token ids in [0, vocab_size), T <= seq_len.
  // targets: [B, T] int64 with -100 = ignored, or undefined (no loss).
  // Bad shapes/ids throw OpError.
  GptOutput Forward(const Tensor& ids, const Tensor& targets = {});

  const GptConfig& config() const { return config_; }
  Block& block(int layer) const { return (*blocks_)[layer]; }

  // The pieces Forward is made of, for runtimes that place them on
  // different ranks (parallel/): Forward(ids, targets) equals
  //   seed = BeginForward(); x = Embed(ids, seed);
  //   x = block(i).Forward(x, training(), BlockDropoutSeed(seed, i), &aux_i) for each layer;
  //   Finish(Head(x), targets, {aux_i of the MoE layers}).
  // BeginForward advances forward_count() in training mode with dropout.
  uint64_t BeginForward();
  Tensor Embed(const Tensor& ids, uint64_t step_seed) const;  // checks ids; [B, T, d] in compute_dtype
  static uint64_t BlockDropoutSeed(uint64_t step_seed, int layer);
  Tensor Head(const Tensor& x) const;  // norm_f + LM head -> logits
  GptOutput Finish(Tensor logits, const Tensor& targets, const std::vector<Tensor>& moe_aux_losses) const;
  const graph::nn::Embedding& tok_emb() const { return *tok_emb_; }
  const graph::nn::Embedding* pos_emb() const { return pos_emb_.get(); }
  const Norm& norm_f() const { return *norm_f_; }
  const graph::nn::Linear* lm_head() const { return lm_head_.get(); }  // null when tied

  // All parameters (a tied matrix counted once) = Module::NumParameters().
  // Parameters one token uses: all dense parameters plus top_k of the
  // num_experts experts of each MoE layer.
  int64_t NumActiveParameters() const;
  // Lookup tables: token (and learned position) embeddings.
  int64_t NumEmbeddingParameters() const;
  // N in the FLOP formula: active parameters that take part in matmuls =
  // NumActiveParameters − NumEmbeddingParameters + (tied ? V·d : 0), i.e.
  // the LM-head matrix counts once, lookups do not.
  int64_t NumFlopParameters() const;
  // Model FLOPs per trained token (forward + backward), PaLM appendix B:
  //   6·N + 12·n_layers·seq_len·d_model
  // with N = NumFlopParameters(). The attention term counts QKᵀ and AV over
  // the full (unmasked) context, as PaLM and Megatron do. Numerator of MFU.
  double TrainingFlopsPerToken() const;

  // Number of Forward calls in training mode (the dropout stream position).
  uint64_t forward_count() const { return forward_count_; }
  void set_forward_count(uint64_t count) { forward_count_ = count; }

 private:
  GptConfig config_;
  std::unique_ptr<graph::nn::Embedding> tok_emb_;
  std::unique_ptr<graph::nn::Embedding> pos_emb_;  // learned positions only
  std::unique_ptr<graph::nn::ModuleList<Block>> blocks_;
  std::unique_ptr<Norm> norm_f_;
  std::unique_ptr<graph::nn::Linear> lm_head_;  // untied only
  uint64_t forward_count_ = 0;
};

}  // namespace tessera::models
