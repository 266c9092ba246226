#include "tessera/plan/time_model.h"

#include <algorithm>
#include <cmath>

#include "tessera/plan/stage_layout.h"
#include "tessera/sim/collective_cost.h"
#include "tessera/sim/device_model.h"
#include "tessera/sim/pipeline_replay.h"

namespace tessera::plan {
namespace {

using sim::CollectiveKind;

// Work of one layer for one micro-batch on one device, forward pass.
struct LayerWork {
  double gemm = 0;       // weight GEMMs (seconds)
  double core = 0;       // attention scores QK^T and AV
  double memory = 0;     // element-wise kernels
  double tp = 0;         // tensor-parallel collectives
  double ep = 0;         // expert-parallel all-to-alls
  double recompute = 0;  // extra forward work during backward (compute part)
  double recompute_comm = 0;
};

// One pipeline rank's forward/backward time for one micro-batch.
struct RankTime {
  double fwd = 0, bwd = 0, wgrad = 0;
  double compute = 0, tp = 0, ep = 0, pp = 0;
  double Slot() const { return fwd + bwd; }
};

struct RankCost {
  RankTime time;
  double dp = 0;         // gradient reduction (ZeRO >= 1: reduce-scatter + all-gather) of the rank's parameters
  double dp_exposed = 0; // of which not hidden under compute
  bool dp_overlapped = false;  // hidden under the last micro-batch's backward (overlap_grad_reduce)
  double optimizer = 0;
};

class Evaluator {
 public:
  Evaluator(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p, const Efficiency& e)
      : m_(m), c_(c), p_(p), e_(e) {
    const sim::Precision prec = p.precision == Precision::kFp8    ? sim::Precision::kFp8
                                : p.precision == Precision::kFp32 ? sim::Precision::kFp32
                                                                  : sim::Precision::kBf16;
    peak_ = c.device.PeakFlops(prec);
    gemm_peak_ = peak_ * e.gemm_max * (p.precision == Precision::kFp8 && c.device.peak_flops_fp8 > 0 ? e.fp8_gemm_factor : 1.0);
    // Attention scores run at the bf16 peak, or fp32's in fp32 training.
    bf16_peak_ = c.device.PeakFlops(p.precision == Precision::kFp32 ? sim::Precision::kFp32 : sim::Precision::kBf16);
    mem_bw_ = c.device.hbm_bw * e.memory;
    s_ = static_cast<double>(p.Seq(m));
    tokens_ = s_ * static_cast<double>(p.micro_batch);
    h_ = static_cast<double>(m.hidden);
    t_ = p.tp;
    r_ = p.sequence_parallel ? t_ : 1.0;
    heads_ = static_cast<double>(m.heads) / p.tp;
  }

  double Gemm(double M, double N, double K) const {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    const double q = Q(M) * Q(N) * Q(K);
    return 2 * M * N * K / (gemm_peak_ * q);
  }
  // Attention-score GEMMs run in bf16 even in fp8 training.
  double ScoreGemm(double M, double N, double K) const {
    const double q = Q(M) * Q(N) * Q(K);
    return 2 * M * N * K / (bf16_peak_ * e_.gemm_max * q);
  }
  double Bytes(double b) const { return b / mem_bw_; }

  // Collective over a group of `size` ranks placed `rps` per super-node.
  double Collective(CollectiveKind kind, double bytes, int size, int rps) const {
    if (size <= 1 || bytes <= 0) return 0;
    const int devices = c_.supernode.devices;
    const int min_rps = (size + c_.supernodes - 1) / c_.supernodes;
    rps = std::clamp(rps, std::max(1, min_rps), std::min(size, devices));
    return sim::EstimateCollective(c_, kind, bytes, sim::GroupLayout{size, rps}).time_s;
  }
  // Ranks per super-node of a group of `size` ranks `stride` apart.
  int StridedRps(int size, int stride) const {
    const int devices = c_.supernode.devices;
    return stride >= devices ? 1 : std::min(size, devices / stride);
  }

  LayerWork Layer(bool moe) const {
    LayerWork w;
    const double T = tokens_;
    const double act = m_.ffn == FfnKind::kSwiGlu ? 6.0 : 4.0;  // element-wise bytes per FFN activation element
    // Attention block.
    const double attn_n = static_cast<double>(AttentionMatmulParams(m_)) / (h_ * t_);
    w.gemm += Gemm(T, attn_n, h_);
    const double qk = static_cast<double>(m_.QkHeadDim()), vd = static_cast<double>(m_.VHeadDim());
    const double core_flops = 2 * s_ * T * heads_ * (qk + vd);
    double softmax_bytes = 0;
    if (p_.flash_attention) {
      w.core = 0.5 * core_flops / (bf16_peak_ * e_.flash_attention);  // causal: half the tiles
    } else {
      const double batch = static_cast<double>(p_.micro_batch) * heads_;
      w.core = batch * (ScoreGemm(s_, s_, qk) + ScoreGemm(s_, vd, s_));
      softmax_bytes = heads_ * s_ * T * (4.0 + (m_.dropout ? 5.0 : 0.0));
    }
    w.memory += Bytes(softmax_bytes);
    const double residual = m_.dropout ? 7.0 : 6.0;  // read x and y, write sum (+ mask), bf16
    w.memory += Bytes(2 * (4.0 + residual) * T * h_ / r_);  // two norms, two residual adds
    // FFN block.
    const double nmat = m_.ffn == FfnKind::kSwiGlu ? 3.0 : 2.0;
    if (!moe) {
      const double f = static_cast<double>(m_.ffn_hidden) / t_;
      w.gemm += Gemm(T, nmat * f, h_);
      w.memory += Bytes(act * T * f);
    } else {
      const double local = T / t_;  // MoE tokens are sequence-split over tp
      const double E = static_cast<double>(m_.moe.experts), k = static_cast<double>(m_.moe.top_k);
      const double fe = static_cast<double>(m_.moe.expert_ffn_hidden);
      w.gemm += Gemm(local, E, h_);                                   // router
      const double per_expert = local * k * p_.ep / E;                // tokens per local expert
      w.gemm += (E / p_.ep) * Gemm(per_expert, nmat * fe, h_);        // grouped expert GEMMs
      const double shared = static_cast<double>(m_.moe.shared_experts) * fe;
      w.gemm += Gemm(local, nmat * shared, h_);
      w.memory += Bytes(8 * local * k * h_ + act * local * (k * fe + shared));  // permute/unpermute, activations
      if (p_.ep > 1) {
        const double dispatch =
            local * k * h_ * (p_.precision == Precision::kFp8 ? 1.0 : p_.precision == Precision::kFp32 ? 4.0 : 2.0);
        const double combine = local * k * h_ * (p_.precision == Precision::kFp32 ? 4.0 : 2.0);
        const int rps = std::min(p_.ep, c_.supernode.devices);
        w.ep = Collective(CollectiveKind::kAllToAll, dispatch, p_.ep, rps) +
               Collective(CollectiveKind::kAllToAll, combine, p_.ep, rps);
      }
    }
    // Tensor parallelism: the attention and (dense) FFN outputs are reduced.
    if (p_.tp > 1) {
      const double bytes = T * h_ * 2;
      const int rps = std::min(p_.tp, c_.supernode.devices);
      const double one = p_.sequence_parallel ? Collective(CollectiveKind::kAllGather, bytes, p_.tp, rps) +
                                                    Collective(CollectiveKind::kReduceScatter, bytes, p_.tp, rps)
                                              : Collective(CollectiveKind::kAllReduce, bytes, p_.tp, rps);
      w.tp = one * (moe ? 1.0 : 2.0);  // an MoE FFN exchanges tokens by all-to-all instead
    }
    switch (p_.recompute) {
      case Recompute::kNone: break;
      case Recompute::kSelective: w.recompute = w.core + Bytes(softmax_bytes); break;
      case Recompute::kFull:
        w.recompute = w.gemm + w.core + w.memory;
        w.recompute_comm = w.tp + w.ep;
        break;
    }
    return w;
  }

  StatusOr<StepBreakdown> Run() const;
  // Per pipeline rank: its micro-batch times, gradient reduction and optimizer step.
  std::vector<RankCost> Ranks() const;
  sim::PipelineCost Pipeline() const;

 private:
  double Q(double d) const { return d / (d + e_.gemm_half_dim); }

  const ModelSpec& m_;
  const sim::ClusterSpec& c_;
  const ParallelPlan& p_;
  const Efficiency& e_;
  double peak_ = 0, gemm_peak_ = 0, bf16_peak_ = 0, mem_bw_ = 0, s_ = 0, tokens_ = 0, h_ = 0, t_ = 1, r_ = 1, heads_ = 0;
};


std::vector<RankCost> Evaluator::Ranks() const {
  const ParamCounts counts = CountParams(m_);
  const std::vector<RankLayers> ranks = LayoutStages(m_, p_.pp, p_.vpp);
  const LayerWork dense = Layer(false);
  const LayerWork moe = m_.IsMoe() ? Layer(true) : LayerWork();
  const double T = tokens_;
  const double V = static_cast<double>(m_.vocab);
  const bool same_node_stages = static_cast<int64_t>(p_.dp) * p_.tp * 2 <= c_.supernode.devices;
  const double p2p = p_.pp > 1 ? sim::EstimateP2P(c_, T * h_ * 2 / t_, same_node_stages) : 0.0;
  const int64_t micro = p_.MicroBatches();

  std::vector<RankCost> out;
  for (const RankLayers& r : ranks) {
    RankCost rc;
    RankTime& rt = rc.time;
    auto add = [&](const LayerWork& w, double n) {
      const double comp = w.gemm + w.core + w.memory;
      rt.fwd += n * (comp + w.tp + w.ep);
      rt.bwd += n * (2 * comp + w.tp + w.ep + w.recompute + w.recompute_comm);
      rt.wgrad += n * w.gemm;
      rt.compute += n * (3 * comp + w.recompute);
      rt.tp += n * (2 * w.tp + (p_.recompute == Recompute::kFull ? w.tp : 0));
      rt.ep += n * (2 * w.ep + (p_.recompute == Recompute::kFull ? w.ep : 0));
    };
    add(dense, static_cast<double>(r.dense_layers));
    add(moe, static_cast<double>(r.moe_layers));
    if (r.last) {  // output projection + vocab-parallel cross-entropy (fp32)
      const double logits = Gemm(T, V / t_, h_);
      const double ce = Bytes(T * V / t_ * 12);
      rt.fwd += logits + ce / 2;
      rt.bwd += 2 * logits + ce / 2;
      rt.wgrad += logits;
      rt.compute += 3 * logits + ce;
    }
    if (p_.pp > 1) {  // receive/send activations forward, gradients backward, per chunk
      rt.fwd += p_.vpp * p2p;
      rt.bwd += p_.vpp * p2p;
      rt.pp += 2 * p_.vpp * p2p;
    }

    // Data parallelism, per rank.
    const RankParams rp = ParamsOnRank(m_, counts, p_, r);
    const int edp = p_.dp * p_.tp / p_.ep;
    auto sync = [&](double elems, int size, int stride) {
      const int rps = StridedRps(size, stride);
      if (p_.zero == 0) return Collective(CollectiveKind::kAllReduce, 2 * elems, size, rps);
      return Collective(CollectiveKind::kReduceScatter, 2 * elems, size, rps) +
             Collective(CollectiveKind::kAllGather, 2 * elems, size, rps);
    };
    rc.dp = sync(rp.dense, p_.dp, p_.tp) + sync(rp.expert, edp, p_.ep);
    if (p_.zero >= 3) {
      // Parameters gathered for forward and backward and gradients scattered, per micro-batch;
      // prefetched under the compute of the micro-batch.
      const double per_micro = 1.5 * rc.dp;
      rc.dp_exposed = micro * std::max(0.0, per_micro - rt.Slot());
    } else if (p_.overlap_grad_reduce) {
      rc.dp_exposed = std::max(0.0, rc.dp - rt.bwd);
      rc.dp_overlapped = true;
    } else {
      rc.dp_exposed = rc.dp;
    }
    const double local = p_.zero >= 1 ? rp.Sharded(p_) : rp.dense + rp.expert;
    rc.optimizer = Bytes(28 * local);  // Adam: read master, m, v (fp32) + grad; write master, m, v + bf16 param
    // Offloaded: bf16 grads down and bf16 params up, concurrently (the host link is full duplex).
    if (p_.offload_optimizer) rc.optimizer = sim::OffloadTime(c_.device, 2 * local);
    out.push_back(rc);
  }
  return out;
}

sim::PipelineCost Evaluator::Pipeline() const {
  sim::PipelineCost pc;
  pc.micro_batches = static_cast<int>(p_.MicroBatches());
  pc.vpp = p_.vpp;
  pc.schedule = p_.schedule == Schedule::kInterleaved ? sim::PipelineSchedule::kInterleaved
                                                      : sim::PipelineSchedule::kOneFOneB;
  for (const RankCost& rc : Ranks()) {
    sim::StageCost s;
    s.fwd_s = rc.time.fwd;
    s.bwd_s = rc.time.bwd;
    s.compute_s = rc.time.compute;
    // ZeRO-3's per-micro-batch exposure is charged after the flush, as the closed form does.
    s.dp_s = rc.dp_overlapped ? rc.dp : rc.dp_exposed;
    s.dp_overlaps_last_backward = rc.dp_overlapped;
    s.optimizer_s = rc.optimizer;
    pc.stages.push_back(s);
  }
  return pc;
}

StatusOr<StepBreakdown> Evaluator::Run() const {
  StepBreakdown out;
  const int64_t micro = p_.MicroBatches();
  RankTime slow;
  double dp_exposed = 0, optimizer = 0, slots = 0;
  for (const RankCost& rc : Ranks()) {
    slots += rc.time.Slot();
    if (rc.time.Slot() > slow.Slot()) slow = rc.time;
    dp_exposed = std::max(dp_exposed, rc.dp_exposed);
    optimizer = std::max(optimizer, rc.optimizer);
  }

  const double pm = static_cast<double>(p_.pp) - 1;
  const double mb = static_cast<double>(micro);
  double bubble = 0;
  switch (p_.schedule) {
    // Fill and drain pass every rank once: the critical path is one slot of
    // each rank plus m - 1 of the slowest (= (m + p - 1) slots when ranks are equal).
    case Schedule::kOneFOneB: bubble = slots - slow.Slot(); break;
    case Schedule::kInterleaved: bubble = (slots - slow.Slot()) / p_.vpp; break;
    case Schedule::kZeroBubble: bubble = pm * std::max(0.0, slow.Slot() - 2 * slow.wgrad); break;
  }
  out.bubble = bubble;
  out.compute = mb * slow.compute;
  out.tp_comm = mb * slow.tp;
  out.ep_comm = mb * slow.ep;
  out.pp_comm = mb * slow.pp;
  out.dp_comm = dp_exposed;
  out.optimizer = optimizer;
  out.step_time = mb * slow.Slot() + bubble + dp_exposed + optimizer;

  const FlopsPerToken f = ForwardFlopsPerToken(m_, p_.Seq(m_));
  const double tokens_per_step = s_ * static_cast<double>(p_.global_batch);
  double extra = 0;
  if (p_.recompute == Recompute::kFull) extra = f.layers_matmul + f.attention_core;
  if (p_.recompute == Recompute::kSelective) extra = f.attention_core;
  out.model_flops = tokens_per_step * f.Training();
  out.hardware_flops = tokens_per_step * (f.Training() + extra);
  const double devices = static_cast<double>(p_.Devices());
  out.tflops_per_device = out.hardware_flops / (out.step_time * devices) / 1e12;
  out.mfu = out.model_flops / (out.step_time * devices * peak_);
  out.hfu = out.hardware_flops / (out.step_time * devices * peak_);
  out.tokens_per_s = tokens_per_step / out.step_time;
  out.bubble_fraction = bubble / out.step_time;
  out.comm_fraction = (out.tp_comm + out.ep_comm + out.pp_comm + out.dp_comm) / out.step_time;
  out.memory = EstimateMemory(m_, p_);
  out.memory_capacity = c_.device.hbm_bytes * kUsableMemoryFraction;
  out.fits = out.memory.Total() <= out.memory_capacity && out.memory.host <= c_.HostBytesPerDevice();
  return out;
}

}  // namespace

StatusOr<StepBreakdown> EvaluatePlan(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                                     const Efficiency& eff) {
  TESSERA_RETURN_IF_ERROR(ValidatePlan(m, p));
  if (p.Devices() > c.TotalDevices()) {
    return InvalidArgument("plan [{}] needs {} devices; cluster '{}' has {}", p.ToString(), p.Devices(), c.name,
                           c.TotalDevices());
  }
  if (c.device.PeakFlops(sim::Precision::kBf16) <= 0 || c.device.hbm_bw <= 0) {
    return InvalidArgument("cluster '{}': device '{}' needs peak_tflops_bf16 and hbm_gbyte_s for planning", c.name,
                           c.device.name);
  }
  if (p.offload_optimizer && c.device.ddr_link_bw <= 0) {
    return InvalidArgument("cluster '{}': offload needs the device's ddr_link_gbyte_s", c.name);
  }
  return Evaluator(m, c, p, eff).Run();
}

StatusOr<sim::PipelineCost> PricePipeline(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                                          const Efficiency& eff) {
  TESSERA_RETURN_IF_ERROR(EvaluatePlan(m, c, p, eff).status());
  if (p.schedule == Schedule::kZeroBubble) {
    return InvalidArgument("plan [{}]: the pipeline replay has no zero-bubble schedule (1f1b or interleaved)",
                           p.ToString());
  }
  return Evaluator(m, c, p, eff).Pipeline();
}

}  // namespace tessera::plan
