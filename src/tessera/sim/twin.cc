#include "tessera/sim/twin.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tessera/sim/collective_cost.h"

namespace tessera::sim {
namespace {

// AdamW reads parameter, gradient and both moments and writes three of them.
constexpr double kAdamBytesPerParam = 28;
// Kernels per parameter tensor in a step: gradient-norm partial, clip
// scale, AdamW update, gradient reset.
constexpr double kOptimizerKernelsPerTensor = 4;

// Forward + backward of one micro-batch on one pipeline stage of one rank,
// priced with the fitted op lines.
class StageWork {
 public:
  explicit StageWork(const HostCalibration& h) : h_(&h) {}

  // y[m, n] = x[m, k] W^T: forward and the two backward GEMMs (6 m n k).
  void Linear(double m, double n, double k) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    const double work = 6 * m * n * k;
    ops += 1;
    out_floats += m * n;
    gemm_s += work / (h_->peak_flops * h_->linear.At(work));
  }
  // Fused causal attention over `batch` sequences of `seq` tokens, width `d`.
  void Attention(double batch, double seq, double d, double heads) {
    ops += 1;
    out_floats += batch * seq * d + batch * heads * seq;  // output + log-sum-exp rows
    const OpLine& l = h_->op(OpKind::kAttention);
    gemm_s += l.At(12 * batch * seq * seq * d);
    fixed_s += l.fixed_s;
  }
  // `outputs`: elements of the op's output (default: `elements`).
  void Op(OpKind kind, double elements, double outputs = -1) {
    ops += 1;
    out_floats += outputs >= 0 ? outputs : elements;
    const OpLine& l = h_->op(kind);
    other_s += l.At(elements);
    fixed_s += l.fixed_s;
  }
  double Seconds() const { return (gemm_s + other_s) * h_->context_factor; }

  double gemm_s = 0;   // linear layers and attention
  double other_s = 0;  // every other op
  double fixed_s = 0;  // the per-op fixed part of the op lines (included above)
  double ops = 0;
  // Elements of all op outputs of one micro-batch: Tessera's tape keeps
  // every recorded op's output (and the inputs it saves, themselves earlier
  // outputs) until the micro-batch's backward.
  double out_floats = 0;

 private:
  const HostCalibration* h_;
};

struct StageParams {
  double params = 0;
  double tensors = 0;
};

void AddLayer(const TwinModel& m, const TwinRun& r, bool moe, double mb, StageWork& w, StageParams& p) {
  const double tokens = mb * static_cast<double>(m.seq);
  const double d = static_cast<double>(m.d_model);
  const double d_local = d / r.tp;
  // Attention: norm1, q/k/v projections and their head-major copies, rope on
  // q and k, attention, the copy back, output projection, residual add.
  w.Op(OpKind::kNorm, tokens * d);
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
  w.Op(OpKind::kPointwise, tokens * d);
  p.params += 2 * d + 4 * d * d_local;
  p.tensors += 6;
  // Feed-forward: norm2 ... residual add.
  w.Op(OpKind::kNorm, tokens * d);
  const int mats = m.gated_ffn ? 3 : 2;
  if (!moe) {
    const double f = static_cast<double>(m.d_ff) / r.tp;
    for (int i = 0; i < mats - 1; ++i) w.Linear(tokens, f, d);
    w.Op(OpKind::kActivation, tokens * f);
    w.Linear(tokens, d, f);
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
      w.Op(OpKind::kRows, rows);            // gather its gates
      w.Op(OpKind::kPointwise, rows * d);  // scale by the gates
    }
    w.Op(OpKind::kCopy, tokens * m.top_k * d);  // concat
    w.Op(OpKind::kRows, tokens * m.top_k * d, tokens * d);  // scatter-add rows to token order
    p.params += d * e + local * mats * d * f;
    p.tensors += 1 + local * mats;
  }
  w.Op(OpKind::kPointwise, tokens * d);  // residual add
}

bool IsMoeLayer(const TwinModel& m, int layer) {
  return m.experts > 0 && layer < static_cast<int>(m.moe.size()) && m.moe[layer];
}

int MoeLayers(const TwinModel& m, int begin, int end) {
  int n = 0;
  for (int i = begin; i < end; ++i) n += IsMoeLayer(m, i) ? 1 : 0;
  return n;
}

// Pipeline stage `s` of `r.pp` holding layers [first, first + n): the
// embedding on the first stage, the final norm, LM head, loss and aux-loss
// terms on the last.
void AddStage(const TwinModel& m, const TwinRun& r, int s, int first, int n, StageWork& w, StageParams& p) {
  const double mb = static_cast<double>(r.micro_batch);
  const double tokens = mb * static_cast<double>(m.seq);
  const double d = static_cast<double>(m.d_model);
  if (s == 0) {
    w.Op(OpKind::kRows, tokens * d);  // embedding lookup
    p.params += static_cast<double>(m.vocab) * d;
    p.tensors += 1;
  }
  for (int i = first; i < first + n; ++i) AddLayer(m, r, IsMoeLayer(m, i), mb, w, p);
  if (s == r.pp - 1) {
    w.Op(OpKind::kNorm, tokens * d);  // final norm
    w.Linear(tokens, static_cast<double>(m.vocab) / r.tp, d);
    w.Op(OpKind::kCrossEntropy, tokens * static_cast<double>(m.vocab));
    for (int i = 0; i < MoeLayers(m, 0, m.layers) + 2; ++i) w.Op(OpKind::kPointwise, 1);  // aux-loss sum, scale, add
    p.params += d + (m.tied_embeddings ? 0 : static_cast<double>(m.vocab) * d);
    p.tensors += 1 + (m.tied_embeddings ? 0 : 1);
  }
}

Status Validate(const TwinModel& m, const TwinRun& r) {
  if (m.layers < 1 || m.d_model < 1 || m.seq < 1 || m.vocab < 1 || m.heads < 1 || m.d_ff < 1) {
    return InvalidArgument("twin: model needs layers, d_model, seq, vocab, heads, d_ff >= 1");
  }
  if (r.dp < 1 || r.tp < 1 || r.pp < 1 || r.ep < 1 || r.micro_batch < 1 || r.global_batch < 1) {
    return InvalidArgument("twin: dp, tp, pp, ep, micro_batch, global_batch must be >= 1");
  }
  if (r.global_batch % (r.micro_batch * r.dp) != 0) {
    return InvalidArgument("twin: global_batch {} is not a multiple of micro_batch {} x dp {}", r.global_batch,
                           r.micro_batch, r.dp);
  }
  if (r.pp > m.layers) return InvalidArgument("twin: pp {} exceeds the {} layers", r.pp, m.layers);
  if (m.experts > 0 && (m.top_k < 1 || m.top_k > m.experts || m.d_ff_expert < 1)) {
    return InvalidArgument("twin: MoE needs 1 <= top_k <= experts and d_ff_expert >= 1");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TwinPrediction> PredictTrainStep(const MachineCalibration& calibration, const ClusterSpec& spec,
                                          const TwinModel& m, const TwinRun& r) {
  TESSERA_RETURN_IF_ERROR(Validate(m, r));
  TwinPrediction out;
  out.ranks = r.dp * r.tp * r.pp;
  if (out.ranks > spec.TotalDevices()) {
    return InvalidArgument("twin: {} ranks exceed the spec's {} devices (calibrate with --ranks {})", out.ranks,
                           spec.TotalDevices(), out.ranks);
  }
  const HostCalibration h = calibration.PerRank(out.ranks);
  out.threads_per_rank = h.threads;
  out.micro_batches = r.global_batch / (r.micro_batch * r.dp);
  const double tokens = static_cast<double>(r.micro_batch * m.seq);
  const double d = static_cast<double>(m.d_model);

  // Per pipeline stage: layers split evenly (the first stages take the
  // remainder), embedding on the first, head + loss on the last.
  double worst_stage_s = 0, worst_params = 0, worst_tensors = 0;
  double total_params = 0;
  int layer = 0;
  StageWork critical(h);
  for (int s = 0; s < r.pp; ++s) {
    const int n = m.layers / r.pp + (s < m.layers % r.pp ? 1 : 0);
    StageWork w(h);
    StageParams p;
    AddStage(m, r, s, layer, n, w, p);
    layer += n;
    total_params += p.params;
    // 1F1B: stage s holds the activations of pp - s micro-batches at its
    // peak (fp32 elements, 4 bytes).
    const double in_flight = std::min(static_cast<double>(out.micro_batches), static_cast<double>(r.pp - s));
    if (4 * w.out_floats * in_flight > out.activation_bytes) {
      out.activation_bytes = 4 * w.out_floats * in_flight;
      out.activation_stage = s;
    }
    if (w.Seconds() > worst_stage_s) {
      worst_stage_s = w.Seconds();
      worst_params = p.params;
      worst_tensors = p.tensors;
      critical = w;
    }
  }
  out.parameters = total_params * r.tp;  // experts counted per rank; close enough for reporting
  out.ops_per_micro_batch = critical.ops;

  // Communication per micro-batch on the critical stage.
  const double act_bytes = tokens * d * 4;
  const int layers_on_stage = (m.layers + r.pp - 1) / r.pp;
  double tp_mb = 0, ep_mb = 0, pp_mb = 0;
  if (r.tp > 1) {
    const double one = EstimateCollective(spec, CollectiveKind::kAllReduce, act_bytes,
                                          GroupLayout::Contiguous(spec, r.tp)).time_s;
    tp_mb = (4.0 * layers_on_stage + 2) * one;
  }
  if (r.ep > 1 && m.experts > 0) {
    const int moe_on_stage = (MoeLayers(m, 0, m.layers) + r.pp - 1) / r.pp;
    const double one = EstimateCollective(spec, CollectiveKind::kAllToAll, act_bytes * m.top_k,
                                          GroupLayout::Contiguous(spec, r.ep)).time_s;
    ep_mb = 4.0 * moe_on_stage * one;
  }
  if (r.pp > 1) pp_mb = 2 * EstimateP2P(spec, act_bytes / r.tp, true);
  // Every meeting of ranks inside a micro-batch costs the calibrated
  // meeting time on top of its transfer: tp all-reduces, ep exchanges
  // (forward: counts, rows out, rows back; backward: rows both ways per MoE
  // layer), pp activation and gradient hand-offs.
  double meetings = 0;
  if (r.tp > 1) meetings += 4.0 * layers_on_stage + 2;
  if (r.ep > 1 && m.experts > 0) meetings += 5.0 * ((MoeLayers(m, 0, m.layers) + r.pp - 1) / r.pp);
  if (r.pp > 1) meetings += 2;
  const double sync_mb = meetings * h.meeting_s;
  const double slot = worst_stage_s + tp_mb + ep_mb + pp_mb + sync_mb;
  const double m_count = static_cast<double>(out.micro_batches);
  const double slots = m_count + r.pp - 1;
  out.gemm_s = critical.gemm_s * h.context_factor * m_count;
  out.elementwise_s = critical.other_s * h.context_factor * m_count;
  out.overhead_s = critical.fixed_s * h.context_factor * m_count;
  out.tp_comm_s = tp_mb * m_count;
  out.ep_comm_s = ep_mb * m_count;
  out.pp_comm_s = pp_mb * m_count;
  out.sync_s = sync_mb * m_count;
  out.bubble_s = (slots - m_count) * slot;

  // Data parallel (parallel/zero.h): ZeRO-0/1 all-reduce the gradients,
  // ZeRO-2/3 reduce-scatter them; ZeRO-1/2 then all-gather the updated
  // shards, ZeRO-3 gathers the parameters before every micro-batch's
  // forward and backward instead.
  if (r.dp > 1) {
    const GroupLayout group = GroupLayout::Contiguous(spec, r.dp);
    const double bytes = worst_params * 4;
    auto cost = [&](CollectiveKind kind) { return EstimateCollective(spec, kind, bytes, group).time_s; };
    out.dp_comm_s = r.zero >= 2 ? cost(CollectiveKind::kReduceScatter) : cost(CollectiveKind::kAllReduce);
    if (r.zero == 1 || r.zero == 2) out.dp_comm_s += cost(CollectiveKind::kAllGather);
    if (r.zero >= 3) out.dp_comm_s += 2 * m_count * cost(CollectiveKind::kAllGather);
  }
  // The optimizer step: the parallel runtime first copies the gradients
  // into its flat buckets (read + write, 8 bytes per parameter), then
  // clipping + AdamW over this rank's shard.
  const double shard = r.zero >= 1 ? worst_params / r.dp : worst_params;
  const double bucket_copy_s = out.ranks > 1 ? 8 * worst_params / h.triad_bytes_per_s : 0.0;
  if (h.optimizer_per_param_s > 0) {
    out.optimizer_s = worst_tensors * h.optimizer_per_tensor_s + shard * h.optimizer_per_param_s + bucket_copy_s;
  } else {
    out.optimizer_s = kAdamBytesPerParam * shard / h.triad_bytes_per_s +
                      kOptimizerKernelsPerTensor * worst_tensors * h.kernel_overhead_s + bucket_copy_s;
  }
  out.step_s = slots * slot + out.dp_comm_s + out.optimizer_s;

  // Model FLOPs of the whole step (all ranks): 6 N_active per token + attention.
  double active = 0;
  for (int i = 0; i < m.layers; ++i) {
    active += 4 * d * d;
    const double mats = m.gated_ffn ? 3 : 2;
    active += IsMoeLayer(m, i) ? d * m.experts + m.top_k * mats * d * static_cast<double>(m.d_ff_expert)
                               : mats * d * static_cast<double>(m.d_ff);
  }
  active += static_cast<double>(m.vocab) * d;
  const double step_tokens = static_cast<double>(r.global_batch * m.seq);
  out.model_flops = 6 * active * step_tokens + 12.0 * m.layers * d * static_cast<double>(m.seq) * step_tokens;
  return out;
}

double OpSumSecondsPerMicroBatch(const HostCalibration& h, const TwinModel& m, int64_t micro_batch) {
  const TwinRun one_rank{.global_batch = micro_batch, .micro_batch = micro_batch};
  StageWork w(h);
  StageParams p;
  AddStage(m, one_rank, 0, 0, m.layers, w, p);
  return w.gemm_s + w.other_s;
}

std::string TwinPredictionJson(const TwinPrediction& p) {
  return fmt::format(
      "{{\n  \"ranks\": {},\n  \"threads_per_rank\": {},\n  \"micro_batches\": {},\n  \"step_time_s\": {:.6g},\n"
      "  \"gemm_s\": {:.6g},\n  \"elementwise_s\": {:.6g},\n  \"op_overhead_s\": {:.6g},\n  \"optimizer_s\": {:.6g},\n"
      "  \"dp_comm_s\": {:.6g},\n  \"tp_comm_s\": {:.6g},\n  \"ep_comm_s\": {:.6g},\n  \"pp_comm_s\": {:.6g},\n"
      "  \"sync_s\": {:.6g},\n  \"bubble_s\": {:.6g},\n  \"ops_per_micro_batch\": {:.0f},\n  \"model_flops\": {:.6g},\n"
      "  \"activation_bytes\": {:.6g},\n  \"activation_stage\": {}\n}}",
      p.ranks, p.threads_per_rank, p.micro_batches, p.step_s, p.gemm_s, p.elementwise_s, p.overhead_s,
      p.optimizer_s, p.dp_comm_s, p.tp_comm_s, p.ep_comm_s, p.pp_comm_s, p.sync_s, p.bubble_s,
      p.ops_per_micro_batch, p.model_flops, p.activation_bytes, p.activation_stage);
}

std::string DescribeTwinPrediction(const TwinPrediction& p) {
  return fmt::format(
      "{} rank(s) x {} thread(s), {} micro-batches per rank, {:.0f} autograd ops per micro-batch\n"
      "step_time_s {:.4f}  gemm {:.4f}  elementwise {:.4f}  op_overhead {:.4f}  optimizer {:.4f}  dp_comm {:.4f}  "
      "tp_comm {:.4f}  ep_comm {:.4f}  pp_comm {:.4f}  sync {:.4f}  bubble {:.4f}\n"
      "activations {:.2f} MB per rank (pipeline stage {})\n",
      p.ranks, p.threads_per_rank, p.micro_batches, p.ops_per_micro_batch, p.step_s, p.gemm_s, p.elementwise_s,
      p.overhead_s, p.optimizer_s, p.dp_comm_s, p.tp_comm_s, p.ep_comm_s, p.pp_comm_s, p.sync_s, p.bubble_s,
      p.activation_bytes / 1e6, p.activation_stage);
}

}  // namespace tessera::sim
