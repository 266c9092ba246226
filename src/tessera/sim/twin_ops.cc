#include "tessera/sim/twin_ops.h"

#include <algorithm>

namespace tessera::sim::twin_detail {

void StageWork::Add(double seconds, double forward_share, bool gemm) {
  (gemm ? gemm_s : other_s) += seconds;
  fwd_s += forward_share * seconds;
  bwd_s += (1 - forward_share) * seconds;
}

void StageWork::Linear(double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  ops += 1;
  out_floats += m * n;
  largest_out = std::max(largest_out, std::max(m * n, m * k));
  fixed_s += h_->linear.fixed_s;
  Add(h_->linear.Seconds(m, n, k, h_->peak_flops), 1.0 / 3, true);
}

void StageWork::Attention(double batch, double seq, double d, double heads) {
  ops += 1;
  out_floats += batch * seq * d + batch * heads * seq;  // output + log-sum-exp rows
  fixed_s += h_->attention.fixed_s;
  Add(h_->attention.Seconds(batch * heads, seq, d / heads), 0.3, true);
}

void StageWork::Op(OpKind kind, double elements, double outputs) {
  ops += 1;
  out_floats += outputs >= 0 ? outputs : elements;
  largest_out = std::max(largest_out, std::max(elements, outputs));
  const OpLine& l = h_->op(kind);
  fixed_s += l.fixed_s;
  Add(l.At(elements), 0.5, false);
}

bool IsMoeLayer(const TwinModel& m, int layer) {
  return m.experts > 0 && layer < static_cast<int>(m.moe.size()) && m.moe[layer];
}

int MoeLayers(const TwinModel& m, int begin, int end) {
  int n = 0;
  for (int i = begin; i < end; ++i) n += IsMoeLayer(m, i) ? 1 : 0;
  return n;
}

namespace {

// Norm, q/k/v projections and their head-major copies, rope on q and k,
// attention, the copy back, output projection (parallel/gpt_stage.cc's
// attention part, the unit selective recompute checkpoints).
void AddAttentionPart(const TwinModel& m, const TwinRun& r, double mb, StageWork& w, StageParams& p) {
  const double tokens = mb * static_cast<double>(m.seq);
  const double d = static_cast<double>(m.d_model);
  const double d_local = d / r.tp;
  const double sp = r.sequence_parallel ? r.tp : 1;
  w.Op(OpKind::kNorm, tokens * d / sp);
  if (r.sequence_parallel) w.Received(tokens * d);  // all-gather of the normed shard
  for (int i = 0; i < 3; ++i) {
    w.Linear(tokens, d_local, d);
    w.Op(OpKind::kCopy, tokens * d_local);
  }
  if (m.rope) {
    w.Op(OpKind::kRope, tokens * d_local);
    w.Op(OpKind::kRope, tokens * d_local);
  }
  w.Attention(mb, static_cast<double>(m.seq), d_local, static_cast<double>(m.heads) / r.tp);
  w.Op(OpKind::kCopy, tokens * d_local);
  w.Linear(tokens, d, d_local);
  if (r.tp > 1) w.Received(tokens * d / sp);  // all-reduce (reduce-scatter) of the output projection
  p.params += d + 4 * d * d_local;
  p.tensors += 5;
}

void AddFeedForward(const TwinModel& m, const TwinRun& r, bool moe, double mb, StageWork& w, StageParams& p) {
  const double tokens = mb * static_cast<double>(m.seq);
  const double d = static_cast<double>(m.d_model);
  const double sp = r.sequence_parallel ? r.tp : 1;
  w.Op(OpKind::kPointwise, tokens * d / sp);  // residual add after attention
  w.Op(OpKind::kNorm, tokens * d / sp);
  p.params += d;
  p.tensors += 1;
  const int mats = m.gated_ffn ? 3 : 2;
  if (r.sequence_parallel) w.Received(tokens * d);  // all-gather of the normed shard (MoE: whole sequences)
  if (!moe) {
    const double f = static_cast<double>(m.d_ff) / r.tp;
    for (int i = 0; i < mats - 1; ++i) w.Linear(tokens, f, d);
    w.Op(OpKind::kActivation, tokens * f);
    w.Linear(tokens, d, f);
    if (r.tp > 1) w.Received(tokens * d / sp);  // all-reduce (reduce-scatter) of the down projection
    p.params += mats * d * f;
    p.tensors += mats;
  } else {
    const double e = m.experts;
    const double local = std::max(1.0, e / r.ep);
    const double f = static_cast<double>(m.d_ff_expert);
    // Router (fp32), softmax, top-k, gate normalization (sum, div), the
    // load-balancing loss (mean, mul, sum, scale).
    w.Linear(tokens, e, d);
    w.Op(OpKind::kSoftmax, tokens * e);
    w.Op(OpKind::kSoftmax, tokens * e);
    for (int i = 0; i < 6; ++i) w.Op(OpKind::kPointwise, tokens * e, tokens * m.top_k);
    // Each local expert gets tokens * top_k / E rows (balanced routing; with
    // ep > 1 the rows of the ep group's tokens arrive by all-to-all).
    const double rows = tokens * m.top_k / e * (r.ep > 1 ? r.ep : 1);
    for (int i = 0; i < static_cast<int>(local); ++i) {
      w.Op(OpKind::kRows, rows * d);  // gather the expert's token rows
      for (int j = 0; j < mats - 1; ++j) w.Linear(rows, f, d);
      w.Op(OpKind::kActivation, rows * f);
      w.Linear(rows, d, f);
      w.Op(OpKind::kRows, rows);           // gather its gates
      w.Op(OpKind::kPointwise, rows * d);  // scale by the gates
    }
    // Expert parallel: the rows sent out, received and sent back.
    if (r.ep > 1) w.Received(3 * tokens * m.top_k * d);
    w.Op(OpKind::kCopy, tokens * m.top_k * d);              // concat
    w.Op(OpKind::kRows, tokens * m.top_k * d, tokens * d);  // scatter-add rows to token order
    p.params += d * e + local * mats * d * f;
    p.expert_params += local * mats * d * f;
    p.tensors += 1 + local * mats;
  }
  w.Op(OpKind::kPointwise, tokens * d / sp);  // residual add
}

// Adds `part` to `w`; a recomputed part keeps only its input (`kept`
// elements) on the tape and runs its forward again in the backward.
void Merge(StageWork& w, const StageWork& part, bool recomputed, double kept) {
  w.fwd_s += part.fwd_s;
  w.bwd_s += part.bwd_s + (recomputed ? part.fwd_s : 0);
  w.gemm_s += part.gemm_s * (recomputed ? 1 + 1.0 / 3 : 1);
  w.other_s += part.other_s * (recomputed ? 1.5 : 1);
  w.fixed_s += part.fixed_s * (recomputed ? 2 : 1);
  w.ops += part.ops * (recomputed ? 2 : 1);
  w.out_floats += recomputed ? kept : part.out_floats;
  w.largest_out = std::max(w.largest_out, part.largest_out);
}

}  // namespace

void AddStage(const TwinModel& m, const TwinRun& r, int s, int first, int n, StageWork& w, StageParams& p) {
  const double mb = static_cast<double>(r.micro_batch);
  const double tokens = mb * static_cast<double>(m.seq);
  const double d = static_cast<double>(m.d_model);
  const double sp = r.sequence_parallel ? r.tp : 1;
  if (s > 0) w.Received(tokens * d / sp);  // the previous stage's activations
  if (s == 0) {
    w.Op(OpKind::kRows, tokens * d / sp);  // embedding lookup
    p.params += static_cast<double>(m.vocab) * d;
    p.tensors += 1;
  }
  for (int i = first; i < first + n; ++i) {
    const double before = p.params;
    StageWork attention = w.Fresh(), ffn = w.Fresh();
    AddAttentionPart(m, r, mb, attention, p);
    AddFeedForward(m, r, IsMoeLayer(m, i), mb, ffn, p);
    const double input = tokens * d / sp;
    if (r.recompute == Recompute::kFull) {
      StageWork block = attention;
      Merge(block, ffn, false, 0);
      Merge(w, block, true, input);
      w.transient_floats = std::max(w.transient_floats, block.out_floats);
    } else {
      Merge(w, attention, r.recompute == Recompute::kSelective, input);
      Merge(w, ffn, false, 0);
      if (r.recompute == Recompute::kSelective) {
        w.transient_floats = std::max(w.transient_floats, attention.out_floats);
      }
    }
    p.largest_block = std::max(p.largest_block, p.params - before);
  }
  if (s == r.pp - 1) {
    w.Op(OpKind::kNorm, tokens * d / sp);  // final norm
    w.Linear(tokens, static_cast<double>(m.vocab) / r.tp, d);
    w.Op(OpKind::kCrossEntropy, tokens * static_cast<double>(m.vocab) / r.tp);
    for (int i = 0; i < MoeLayers(m, 0, m.layers) + 2; ++i) w.Op(OpKind::kPointwise, 1);  // aux-loss sum, scale, add
    p.params += d + (m.tied_embeddings ? 0 : static_cast<double>(m.vocab) * d);
    p.tensors += 1 + (m.tied_embeddings ? 0 : 1);
  }
}

}  // namespace tessera::sim::twin_detail
