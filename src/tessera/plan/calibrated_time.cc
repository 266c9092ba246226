#include "tessera/plan/calibrated_time.h"

#include <fmt/format.h>

namespace tessera::plan {

StatusOr<sim::TwinModel> TwinModelFor(const ModelSpec& m) {
  auto unsupported = [&](const char* what) {
    return InvalidArgument("model '{}': the calibrated twin prices Tessera's GPT only, which has no {}", m.name, what);
  };
  if (m.attention != AttentionKind::kStandard) return unsupported("multi-head latent attention");
  if (m.kv_heads != m.heads) return unsupported("grouped-query attention (kv_heads != heads)");
  if (m.head_dim * m.heads != m.hidden) return unsupported("head_dim other than hidden / heads");
  if (m.moe.shared_experts > 0) return unsupported("shared experts");
  if (m.linear_bias) return unsupported("linear biases (set biases = \"none\")");
  sim::TwinModel t;
  t.vocab = m.vocab;
  t.seq = m.seq_len;
  t.layers = static_cast<int>(m.layers);
  t.d_model = m.hidden;
  t.heads = static_cast<int>(m.heads);
  t.d_ff = m.ffn_hidden > 0 ? m.ffn_hidden : 4 * m.hidden;
  t.gated_ffn = m.ffn == FfnKind::kSwiGlu;
  t.tied_embeddings = m.tied_embeddings;
  t.rope = !m.learned_positions;
  t.experts = static_cast<int>(m.moe.experts);
  t.top_k = static_cast<int>(m.moe.top_k);
  t.d_ff_expert = m.moe.expert_ffn_hidden;
  t.moe = m.moe_layer;
  return t;
}

StatusOr<StepBreakdown> EvaluateCalibrated(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                                           const sim::MachineCalibration& calibration) {
  if (p.precision != Precision::kFp32) {
    return InvalidArgument("plan [{}]: the calibrated twin measured fp32 kernels; use --precision fp32",
                           p.ToString());
  }
  if (p.schedule != Schedule::kOneFOneB || p.vpp > 1) {
    return InvalidArgument("plan [{}]: the calibrated twin models the 1F1B schedule only", p.ToString());
  }
  if (p.offload_optimizer) {
    return InvalidArgument("plan [{}]: the calibrated twin models no optimizer offload", p.ToString());
  }
  TESSERA_ASSIGN_OR_RETURN(StepBreakdown out, EvaluatePlan(m, c, p));
  TESSERA_ASSIGN_OR_RETURN(sim::TwinModel model, TwinModelFor(m));
  if (p.Seq(m) != m.seq_len) model.seq = p.Seq(m);
  const sim::TwinRun run{.global_batch = p.global_batch,
                         .micro_batch = p.micro_batch,
                         .dp = p.dp,
                         .tp = p.tp,
                         .pp = p.pp,
                         .ep = p.ep,
                         .zero = p.zero,
                         .sequence_parallel = p.sequence_parallel && p.tp > 1,
                         .recompute = p.recompute == Recompute::kFull        ? sim::Recompute::kFull
                                      : p.recompute == Recompute::kSelective ? sim::Recompute::kSelective
                                                                              : sim::Recompute::kNone};
  TESSERA_ASSIGN_OR_RETURN(sim::TwinPrediction t, sim::PredictTrainStep(calibration, c, model, run));
  out.step_time = t.step_s;
  out.compute = t.gemm_s + t.elementwise_s;
  out.tp_comm = t.tp_comm_s;
  out.ep_comm = t.ep_comm_s;
  out.pp_comm = t.pp_comm_s;
  out.dp_comm = t.dp_comm_s;
  out.sync = t.sync_s;
  out.bubble = t.bubble_s;
  out.optimizer = t.optimizer_s;
  // Activations as Tessera's tape keeps them (every op output, fp32).
  out.memory.activations = t.activation_bytes;
  out.fits = out.memory.Total() <= out.memory_capacity && out.memory.host <= c.HostBytesPerDevice();
  const double devices = static_cast<double>(p.Devices());
  const double peak = c.device.PeakFlops(sim::Precision::kFp32);
  out.tflops_per_device = out.hardware_flops / (out.step_time * devices) / 1e12;
  out.mfu = peak > 0 ? out.model_flops / (out.step_time * devices * peak) : 0;
  out.hfu = peak > 0 ? out.hardware_flops / (out.step_time * devices * peak) : 0;
  out.tokens_per_s = static_cast<double>(p.global_batch * p.Seq(m)) / out.step_time;
  out.bubble_fraction = out.bubble / out.step_time;
  out.comm_fraction = (out.tp_comm + out.ep_comm + out.pp_comm + out.dp_comm + out.sync) / out.step_time;
  return out;
}

}  // namespace tessera::plan
