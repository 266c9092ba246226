#include "tessera/sim/twin_ops.h"

#include <algorithm>
#include <cmath>

#include "tessera/hal/pooled_allocator.h"

namespace tessera::sim::twin_detail {

double AllocatedBytes(double floats) {
  if (floats <= 0) return 0;
  return static_cast<double>(hal::PooledAllocator::RoundSize(static_cast<size_t>(std::ceil(4 * floats))));
}

void StageParams::Add(double numel, bool expert, bool expert_bucket) {
  params += numel;
  tensors += 1;
  tensor_bytes += AllocatedBytes(numel);
  if (expert) expert_params += numel;
  if (dense_buckets.empty()) Segment();
  (expert_bucket ? expert_buckets : dense_buckets).back() += numel;
}

void StageWork::Add(double seconds, double forward_share, bool gemm) {
  (gemm ? gemm_s : other_s) += seconds;
  fwd_s += forward_share * seconds;
  bwd_s += (1 - forward_share) * seconds;
}

void StageWork::Linear(double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  ops += 1;
  out_floats += AllocatedFloats(m * n);
  largest_out = std::max(largest_out, std::max(m * n, m * k));
  fixed_s += h_->linear.fixed_s;
  Add(h_->linear.Seconds(m, n, k, h_->peak_flops), 1.0 / 3, true);
}

void StageWork::Attention(double batch, double seq, double d, double heads) {
  ops += 1;
  out_floats += AllocatedFloats(batch * seq * d) + AllocatedFloats(batch * heads * seq);  // output + log-sum-exp rows
  fixed_s += h_->attention.fixed_s;
  Add(h_->attention.Seconds(batch * heads, seq, d / heads), 0.3, true);
}

void StageWork::Op(OpKind kind, double elements, double outputs) {
  ops += 1;
  out_floats += AllocatedFloats(outputs >= 0 ? outputs : elements);
  largest_out = std::max(largest_out, std::max(elements, outputs));
  const OpLine& l = h_->op(kind);
  fixed_s += l.fixed_s;
  Add(l.At(elements), 0.5, false);
}

bool IsMoeLayer(const TwinModel& m, int layer) {
  return m.experts > 0 && layer < static_cast<int>(m.moe.size()) && m.moe[layer];
}

double ExpertLoad(const TwinModel& m, int layer) {
  if (layer < 0 || layer >= static_cast<int>(m.expert_load.size())) return 1.0;
  return std::max(1.0, m.expert_load[layer]);
}

double RanksPerToken(const TwinModel& m, int ep) {
  if (ep <= 1 || m.experts <= 0) return 1.0;
  // 1 - C(E - L, k) / C(E, k): the chance that a rank holds none of a
  // token's k distinct experts (uniformly routed) is the ratio of choices.
  const int e = m.experts, l = std::max(1, m.experts / ep), k = std::min(m.top_k, m.experts);
  double none = 1.0;
  for (int i = 0; i < k; ++i) none *= static_cast<double>(e - l - i) / static_cast<double>(e - i);
  return ep * (1.0 - std::max(0.0, none));
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
  p.Add(d);  // norm
  for (int i = 0; i < 4; ++i) p.Add(d * d_local);  // q, k, v, output projection
}

void AddFeedForward(const TwinModel& m, const TwinRun& r, int layer, double mb, StageWork& w, StageParams& p) {
  const double tokens = mb * static_cast<double>(m.seq);
  const double d = static_cast<double>(m.d_model);
  const double sp = r.sequence_parallel ? r.tp : 1;
  w.Op(OpKind::kPointwise, tokens * d / sp);  // residual add after attention
  w.Op(OpKind::kNorm, tokens * d / sp);
  p.Add(d);
  const int mats = m.gated_ffn ? 3 : 2;
  if (r.sequence_parallel) w.Received(tokens * d);  // all-gather of the normed shard (MoE: whole sequences)
  if (!IsMoeLayer(m, layer)) {
    const double f = static_cast<double>(m.d_ff) / r.tp;
    for (int i = 0; i < mats - 1; ++i) w.Linear(tokens, f, d);
    w.Op(OpKind::kActivation, tokens * f);
    w.Linear(tokens, d, f);
    if (r.tp > 1) w.Received(tokens * d / sp);  // all-reduce (reduce-scatter) of the down projection
    for (int i = 0; i < mats; ++i) p.Add(d * f);
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
    // Dropless routing: this rank's tokens make `assigned` rows; its local
    // experts receive `received` of the expert-parallel group's rows (the
    // busiest rank's share when the routing was measured).
    const double assigned = tokens * m.top_k;
    const double received = assigned * (r.ep > 1 ? ExpertLoad(m, layer) : 1.0);
    const double rows = received / local;  // per local expert
    if (r.ep > 1) {
      // parallel/expert_parallel/moe.cc over comm/moe (DeepEP's dispatch and
      // combine): each token's vector is packed once per rank that holds one
      // of its experts (staging, not a tensor) and arrives, unpacked, in the
      // rows grouped by local expert; each expert runs on its block (a
      // view); the outputs, concatenated, are in dispatch order; the combine
      // sums the gated rows per token and rank (staging) and adds the
      // ranks' sums at the source into the output.
      const double sent = tokens * RanksPerToken(m, r.ep);
      w.Op(OpKind::kCopy, sent * d, 0);
      w.Received(received * d);
      w.Op(OpKind::kCopy, received * d, 0);
      for (int i = 0; i < static_cast<int>(local); ++i) {
        for (int j = 0; j < mats - 1; ++j) w.Linear(rows, f, d);
        w.Op(OpKind::kActivation, rows * f);
        w.Linear(rows, d, f);
      }
      w.Op(OpKind::kCopy, received * d);
      w.Op(OpKind::kPointwise, received * d, 0);
      w.Op(OpKind::kPointwise, sent * d, tokens * d);
    } else {
      // models/ffn.cc (MoeFfn): per expert its rows, the expert, its gates
      // and the gated output; then one concatenation.
      for (int i = 0; i < static_cast<int>(local); ++i) {
        w.Op(OpKind::kRows, rows * d);
        for (int j = 0; j < mats - 1; ++j) w.Linear(rows, f, d);
        w.Op(OpKind::kActivation, rows * f);
        w.Linear(rows, d, f);
        w.Op(OpKind::kRows, rows);
        w.Op(OpKind::kPointwise, rows * d);
      }
      w.Op(OpKind::kCopy, assigned * d);
    }
    if (r.ep <= 1) w.Op(OpKind::kRows, assigned * d, tokens * d);  // scatter-add rows to token order
    p.Add(d * e);                                   // router
    for (int i = 0; i < static_cast<int>(local) * mats; ++i) p.Add(d * f, true, r.ep > 1);
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
    p.Segment();
    p.Add(static_cast<double>(m.vocab) / r.tp * d);  // (vocabulary-parallel under tp)
    if (!m.rope) p.Add(static_cast<double>(m.seq) * d);
  }
  for (int i = first; i < first + n; ++i) {
    const double before = p.params;
    p.Segment();
    StageWork attention = w.Fresh(), ffn = w.Fresh();
    AddAttentionPart(m, r, mb, attention, p);
    AddFeedForward(m, r, i, mb, ffn, p);
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
    p.Segment();
    p.Add(d);  // final norm
    // The head; tied over pipeline stages, the last stage keeps a copy of
    // the embedding (parallel/gpt_stage.cc).
    if (!m.tied_embeddings || r.pp > 1) p.Add(static_cast<double>(m.vocab) / r.tp * d);
  }
}

}  // namespace tessera::sim::twin_detail
