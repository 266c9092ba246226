#include "tessera/plan/memory_model.h"

#include <algorithm>

#include "tessera/plan/stage_layout.h"

namespace tessera::plan {
namespace {

struct Dims {
  double tokens;      // s * b of one micro-batch
  double seq;
  double h;
  double r;           // divisor of the tensors TP leaves whole (t with SP, else 1)
  double t;
  double gemm_bytes;  // bytes per element of a saved GEMM input
  double heads;       // heads per device
  double kv_heads;    // kv heads per device
};

Dims MakeDims(const ModelSpec& m, const ParallelPlan& p) {
  Dims d;
  d.seq = static_cast<double>(p.Seq(m));
  d.tokens = d.seq * static_cast<double>(p.micro_batch);
  d.h = static_cast<double>(m.hidden);
  d.t = p.tp;
  d.r = p.sequence_parallel ? d.t : 1.0;
  d.gemm_bytes = p.precision == Precision::kFp8 ? 1.0 : p.precision == Precision::kFp32 ? 4.0 : 2.0;
  d.heads = static_cast<double>(m.heads) / p.tp;
  if (m.attention == AttentionKind::kMla) {
    d.kv_heads = d.heads;  // keys and values are expanded per head
  } else {
    d.kv_heads = std::max(1.0, static_cast<double>(m.kv_heads) / p.tp);
  }
  return d;
}

double ActivationFactor(const ModelSpec& m) { return m.ffn == FfnKind::kSwiGlu ? 4.0 : 2.0; }

// Everything one layer keeps for backward without recompute.
double FullLayerBytes(const ModelSpec& m, const ParallelPlan& p, bool moe_layer) {
  const Dims d = MakeDims(m, p);
  const double T = d.tokens;
  const double mask = m.dropout ? T * d.h / d.r : 0.0;
  const double qk = static_cast<double>(m.QkHeadDim());
  const double vd = static_cast<double>(m.VHeadDim());
  // Attention block.
  double attn = 2 * T * d.h / d.r                        // norm input
                + d.gemm_bytes * T * d.h / d.r           // QKV input
                + 2 * T * d.heads * qk                   // Q
                + 2 * T * d.kv_heads * (qk + vd)         // K, V
                + d.gemm_bytes * T * d.heads * vd        // output projection input
                + mask;                                  // residual dropout mask
  if (m.attention == AttentionKind::kMla) {
    attn += 4 * T * static_cast<double>(m.mla.q_lora_rank + m.mla.kv_lora_rank + m.mla.qk_rope_head_dim);
  }
  const bool scores_kept = !p.flash_attention && p.recompute != Recompute::kSelective;
  if (scores_kept) {
    attn += d.heads * d.seq * T * (2.0 + (m.dropout ? 3.0 : 0.0));  // softmax (+ dropout mask and output)
  } else {
    attn += 4 * T * d.heads;  // softmax log-sum-exp (fp32) per row
  }
  // FFN block.
  double ffn = 2 * T * d.h / d.r + d.gemm_bytes * T * d.h / d.r + mask;  // norm input, FFN input, mask
  const double act = ActivationFactor(m);
  if (!moe_layer) {
    const double f = static_cast<double>(m.ffn_hidden) / d.t;
    ffn += act * T * f + d.gemm_bytes * T * f;
  } else {
    const double fe = static_cast<double>(m.moe.expert_ffn_hidden);
    const double tokens = T / d.t;  // MoE tokens are always sequence-split over tp
    ffn += tokens * static_cast<double>(m.moe.experts) * 4;  // router probabilities (fp32)
    ffn += tokens * static_cast<double>(m.moe.top_k) *
           (d.gemm_bytes * d.h + act * fe + d.gemm_bytes * fe + 2 * d.h);  // dispatched copy .. expert output
    const double fs = static_cast<double>(m.moe.shared_experts) * fe / d.t;
    ffn += act * T * fs + d.gemm_bytes * T * fs;
  }
  return attn + ffn;
}

}  // namespace

double LayerActivationBytes(const ModelSpec& m, const ParallelPlan& p, bool moe_layer) {
  if (p.recompute == Recompute::kFull) {
    const Dims d = MakeDims(m, p);
    return 2 * d.tokens * d.h / d.r;  // the layer input only
  }
  return FullLayerBytes(m, p, moe_layer);
}

RankParams ParamsOnRank(const ModelSpec& m, const ParamCounts& c, const ParallelPlan& p, const RankLayers& r) {
  // Split over tp: attention, dense FFNs, shared experts, embeddings; norms and routers stay whole.
  double split = r.Layers() * static_cast<double>(c.attention_per_layer) +
                 r.dense_layers * static_cast<double>(c.dense_ffn_per_layer) +
                 r.moe_layers * static_cast<double>(m.moe.shared_experts * c.expert);
  double whole = r.Layers() * static_cast<double>(c.norms_per_layer) + r.moe_layers * static_cast<double>(c.router);
  if (r.first) split += static_cast<double>(c.embedding);
  if (r.last) {
    split += static_cast<double>(c.output_head);
    whole += static_cast<double>(c.final_norm);
    if (m.tied_embeddings && p.pp > 1) split += static_cast<double>(m.vocab * m.hidden);  // tied copy
  }
  RankParams rp;
  rp.dense = split / p.tp + whole;
  rp.expert = r.moe_layers * static_cast<double>(m.moe.experts * c.expert) / p.ep;
  return rp;
}

int64_t InFlightChunks(const ParallelPlan& p, int rank) {
  const int64_t m = p.MicroBatches();
  if (p.vpp == 1) return std::min<int64_t>(p.pp - rank, m);
  const int64_t warm = 2LL * (p.pp - rank - 1) + static_cast<int64_t>(p.vpp - 1) * p.pp + 1;
  return std::min<int64_t>(warm, m * p.vpp);
}

std::vector<MemoryBreakdown> EstimateMemoryPerRank(const ModelSpec& m, const ParallelPlan& p) {
  const ParamCounts c = CountParams(m);
  const std::vector<RankLayers> ranks = LayoutStages(m, p.pp, p.vpp);
  const double dense_act = LayerActivationBytes(m, p, false);
  const double moe_act = m.IsMoe() ? LayerActivationBytes(m, p, true) : 0.0;
  double working_layer = 0;  // one layer's full activations while it is recomputed
  if (p.recompute == Recompute::kFull) {
    working_layer = FullLayerBytes(m, p, false);
    if (m.IsMoe()) working_layer = std::max(working_layer, FullLayerBytes(m, p, true));
  }
  const double tokens = static_cast<double>(p.Seq(m)) * p.micro_batch;
  const double layer_common = static_cast<double>(c.attention_per_layer + c.norms_per_layer);
  const double shared = static_cast<double>(c.router + m.moe.shared_experts * c.expert);
  const double experts_per_layer = static_cast<double>(m.moe.experts * c.expert);

  const bool fp32 = p.state_layout == StateLayout::kFp32Adam;
  const double weight_bytes = fp32 ? 4 : 2, grad_bytes = fp32 ? 4 : 2, optimizer_bytes = fp32 ? 8 : 12;
  std::vector<MemoryBreakdown> out;
  out.reserve(p.pp);
  for (int i = 0; i < p.pp; ++i) {
    const RankLayers& r = ranks[i];
    const RankParams rp = ParamsOnRank(m, c, p, r);
    const double full = rp.dense + rp.expert;
    const double sharded = rp.Sharded(p);

    MemoryBreakdown b;
    b.rank = i;
    b.params = full;
    const double weight_elems = p.zero >= 3 ? sharded : full;
    b.weights = weight_bytes * weight_elems + (p.precision == Precision::kFp8 ? weight_elems : 0.0);
    b.gradients = grad_bytes * (p.zero >= 2 ? sharded : full);
    const double opt = optimizer_bytes * (p.zero >= 1 ? sharded : full);
    if (p.offload_optimizer) {
      b.host = opt;
    } else {
      b.optimizer = opt;
    }
    const double per_chunk = (r.dense_layers * dense_act + r.moe_layers * moe_act) / p.vpp;
    b.activations = per_chunk * static_cast<double>(InFlightChunks(p, i)) + working_layer;
    if (r.last) b.workspace = tokens * static_cast<double>(m.vocab) / p.tp * (2 + 4);
    if (p.zero >= 3) {
      const double layer = layer_common / p.tp + std::max(static_cast<double>(c.dense_ffn_per_layer) / p.tp,
                                                          shared / p.tp + experts_per_layer / p.ep);
      b.workspace = std::max(b.workspace, 2 * 2 * layer);  // two layers gathered (prefetch)
    }
    out.push_back(b);
  }
  return out;
}

MemoryBreakdown EstimateMemory(const ModelSpec& m, const ParallelPlan& p) {
  const std::vector<MemoryBreakdown> ranks = EstimateMemoryPerRank(m, p);
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const MemoryBreakdown& a, const MemoryBreakdown& b) { return a.Total() < b.Total(); });
}

}  // namespace tessera::plan
