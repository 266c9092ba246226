#include "tessera/sim/twin.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/base/partition.h"
#include "tessera/comm/algo/selector.h"
#include "tessera/sim/collective_cost.h"
#include "tessera/sim/pipeline_replay.h"
#include "tessera/sim/twin_ops.h"

namespace tessera::sim {
namespace {

using twin_detail::AddStage;
using twin_detail::AllocatedBytes;
using twin_detail::MoeLayers;
using twin_detail::StageParams;
using twin_detail::StageWork;

// AdamW reads parameter, gradient and both moments and writes three of them.
constexpr double kAdamBytesPerParam = 28;
// Kernels per parameter tensor in a step: gradient-norm partial, clip
// scale, AdamW update, gradient reset.
constexpr double kOptimizerKernelsPerTensor = 4;

// Seconds of a collective over `n` ranks of this machine moving `bytes`
// (all-reduce: the buffer; all-gather / reduce-scatter: the whole gathered
// buffer; all-to-all: everything a rank sends): the algorithm the
// communication library's selector picks for a communicator of that size
// and its own α-β prediction (comm/algo/cost_model.h, constants measured by
// the runtime and recorded by the calibration); without a recorded model,
// sim's closed form on the calibrated spec.
double CollectiveSeconds(const MachineCalibration& c, const ClusterSpec& spec, CollectiveKind kind, double bytes,
                         int n) {
  if (n <= 1 || bytes <= 0) return 0;
  if (auto it = c.comm_models.find(n); it != c.comm_models.end()) {
    auto model = comm::algo::ParseModel(it->second);  // validated when the file was read
    if (model.ok()) {
      comm::CollectiveArgs args;
      double count = bytes / 4;  // fp32 elements; gathered / scattered kinds count one rank's part
      switch (kind) {
        case CollectiveKind::kAllReduce: args.kind = comm::CollectiveKind::kAllReduce; break;
        case CollectiveKind::kAllGather: args.kind = comm::CollectiveKind::kAllGather, count /= n; break;
        case CollectiveKind::kReduceScatter: args.kind = comm::CollectiveKind::kReduceScatter, count /= n; break;
        case CollectiveKind::kAllToAll: args.kind = comm::CollectiveKind::kAllToAll, count /= n; break;
        case CollectiveKind::kBroadcast: args.kind = comm::CollectiveKind::kBroadcast; break;
        case CollectiveKind::kReduce: args.kind = comm::CollectiveKind::kReduce; break;
      }
      args.count = static_cast<size_t>(std::max(1.0, count));
      const comm::algo::Selector selector(model->first, model->second, comm::algo::ForcedAlgos{}, false);
      return selector.Choose(args).predicted_s;
    }
  }
  return EstimateCollective(spec, kind, bytes, GroupLayout::Contiguous(spec, n)).time_s;
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

// First layer of each pipeline stage, cut as the parallel runtime cuts
// them (train/layer_costs.h): by each block's forward + backward on one
// process holding the whole model (no tp, ep, sequence parallelism or
// recompute), embedding added to the first block, head + loss to the last.
std::vector<int> StageStarts(const TwinModel& m, const TwinRun& r, const HostCalibration& h) {
  if (r.pp <= 1) return {0};
  TwinRun middle{.global_batch = r.micro_batch, .micro_batch = r.micro_batch};
  middle.pp = 3;  // stage 1 of 3 holds neither the embedding nor the head
  auto cost = [&](int s, int first, int n) {
    StageWork w(h);
    StageParams p;
    AddStage(m, middle, s, first, n, w, p);
    return w.Seconds();
  };
  std::vector<double> layer_costs;
  for (int i = 0; i < m.layers; ++i) layer_costs.push_back(cost(1, i, 1));
  layer_costs.front() += cost(0, 0, 0);
  layer_costs.back() += cost(2, 0, 0);
  return base::PartitionLayers(layer_costs, r.pp);
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
  const HostCalibration& h = calibration.PerRank(out.ranks);
  out.threads_per_rank = h.threads;
  out.micro_batches = r.global_batch / (r.micro_batch * r.dp);
  const double m_count = static_cast<double>(out.micro_batches);
  const double tokens = static_cast<double>(r.micro_batch * m.seq);
  const double d = static_cast<double>(m.d_model);
  const bool parallel = out.ranks > 1;
  // The meeting probe's cost is wall time with every rank busy; the
  // pipeline's processor sharing stretches a rank's work by ranks / cores.
  const double share = std::min(1.0, static_cast<double>(calibration.cores) / out.ranks);
  const double meeting_s = calibration.MeetingSeconds(out.ranks) * share;

  PipelineCost pipe;
  pipe.micro_batches = static_cast<int>(out.micro_batches);
  pipe.schedule = PipelineSchedule::kOneFOneB;
  pipe.cores = parallel ? calibration.cores : 0;
  pipe.ranks_per_stage = r.dp * r.tp;
  const double act_bytes = tokens * d * 4;
  const double expert_group = std::max(1, r.dp / r.ep);  // replicas of an expert
  // Uneven routing: while the busiest expert-parallel rank works on, the
  // others of its group wait at the all-to-all. A waiting rank sleeps and
  // frees its core, so the wait costs time only while cores would idle:
  // fully with a core per rank, not at all once the ranks still working
  // (1 in ep) fill the cores; in between linearly. Time is priced with
  // that effective load, memory with the measured peak.
  TwinModel timed = m;
  const double cores = static_cast<double>(calibration.cores);
  const double waste = parallel && r.ep > 1 ? std::clamp((r.ep * cores - out.ranks) / ((r.ep - 1) * cores), 0.0, 1.0)
                                            : 1.0;
  for (double& load : timed.expert_load) load = 1 + (std::max(load, 1.0) - 1) * waste;
  // Stages as the parallel runtime cuts them: balanced by each layer's
  // cost (the embedding's added to the first layer, head + loss to the
  // last; base/partition.h), from the twin's own prices.
  const std::vector<int> first = StageStarts(timed, r, h);
  int layer = 0;
  double critical_compute = -1;
  for (int s = 0; s < r.pp; ++s) {
    const int n = (s + 1 < r.pp ? first[s + 1] : m.layers) - first[s];
    StageWork w(h);
    StageParams p;
    AddStage(timed, r, s, layer, n, w, p);
    const int moe_here = MoeLayers(m, layer, layer + n);
    layer += n;
    out.parameters += p.params * r.tp;  // experts counted per rank; close enough for reporting

    // Communication and meetings per micro-batch (half forward, half backward).
    double tp_mb = 0, ep_mb = 0, pp_mb = 0, meetings = 0;
    if (r.tp > 1) {
      const double one = CollectiveSeconds(calibration, spec, CollectiveKind::kAllReduce, act_bytes, r.tp);
      tp_mb = (4.0 * n + 2) * one;
      meetings += 4.0 * n + 2;
    }
    if (r.ep > 1 && moe_here > 0) {
      // Each exchange takes as long as the busiest rank's share; a token
      // crosses once per rank that holds one of its experts (comm/moe).
      const double per_token = twin_detail::RanksPerToken(m, r.ep);
      for (int i = layer - n; i < layer; ++i) {
        if (!twin_detail::IsMoeLayer(m, i)) continue;
        out.expert_load = std::max(out.expert_load, twin_detail::ExpertLoad(m, i));
        ep_mb += 4.0 * CollectiveSeconds(calibration, spec, CollectiveKind::kAllToAll,
                                         act_bytes * per_token * twin_detail::ExpertLoad(timed, i), r.ep);
      }
      // Forward: counts, layout metadata, dispatch, combine; backward: the
      // combine's dispatch, the gates' return, the dispatch's combine.
      meetings += 7.0 * moe_here;
    }
    if (r.pp > 1) {
      pp_mb = (s > 0 ? 1 : 0) * EstimateP2P(spec, act_bytes / r.tp, true) +
              (s < r.pp - 1 ? 1 : 0) * EstimateP2P(spec, act_bytes / r.tp, true);
      meetings += (s > 0 ? 1 : 0) + (s < r.pp - 1 ? 1 : 0);
    }
    // ZeRO (parallel/zero.h): 0/1 all-reduce the gradients, 2/3
    // reduce-scatter them; 1/2 then all-gather the updated shards; 3
    // gathers every block's parameters around each forward and backward.
    double dp_s = 0, gather_mb = 0;
    const double shard = (p.params - p.expert_params) / r.dp + p.expert_params / expert_group;
    if (r.dp > 1) {
      const double bytes = p.params * 4;
      auto cost = [&](CollectiveKind kind, double b) { return CollectiveSeconds(calibration, spec, kind, b, r.dp); };
      dp_s = r.zero >= 2 ? cost(CollectiveKind::kReduceScatter, bytes) : cost(CollectiveKind::kAllReduce, bytes);
      if (r.zero == 1 || r.zero == 2) dp_s += cost(CollectiveKind::kAllGather, bytes);
      if (r.zero >= 3) {
        gather_mb = 2 * cost(CollectiveKind::kAllGather, bytes);
        meetings += 2.0 * (n + (s == 0 ? 1 : 0) + (s == r.pp - 1 ? 1 : 0));
      }
    }
    const double ctx = calibration.ContextFactor(out.ranks);
    const double sync_mb = meetings * meeting_s;
    const double extra = tp_mb + ep_mb + pp_mb + sync_mb + gather_mb;
    StageCost c;
    c.compute_s = (w.fwd_s + w.bwd_s) * ctx;
    c.fwd_s = w.fwd_s * ctx + extra / 2;
    c.bwd_s = w.bwd_s * ctx + extra / 2;
    c.dp_s = dp_s;
    c.dp_overlaps_last_backward = true;
    // The parallel runtime copies the gradients into its flat buckets (read
    // + write, 8 bytes per parameter), then clips and runs AdamW over this
    // rank's shard.
    const double updated = r.zero >= 1 ? shard : p.params;
    const double bucket_copy_s = parallel ? 8 * p.params / h.triad_bytes_per_s : 0.0;
    c.optimizer_s = h.optimizer_per_param_s > 0
                        ? p.tensors * h.optimizer_per_tensor_s + updated * h.optimizer_per_param_s + bucket_copy_s
                        : kAdamBytesPerParam * updated / h.triad_bytes_per_s +
                              kOptimizerKernelsPerTensor * p.tensors * h.kernel_overhead_s + bucket_copy_s;
    pipe.stages.push_back(c);
    if (c.fwd_s + c.bwd_s > critical_compute) {
      critical_compute = c.fwd_s + c.bwd_s;
      out.gemm_s = w.gemm_s * ctx * m_count;
      out.elementwise_s = w.other_s * ctx * m_count;
      out.overhead_s = w.fixed_s * ctx * m_count;
      out.tp_comm_s = tp_mb * m_count;
      out.ep_comm_s = ep_mb * m_count;
      out.pp_comm_s = pp_mb * m_count;
      out.sync_s = sync_mb * m_count;
      out.dp_comm_s = dp_s + gather_mb * m_count;
      out.optimizer_s = c.optimizer_s;
      out.ops_per_micro_batch = w.ops;
    }

    // Memory of this stage's ranks, as the allocator reserves it: the
    // tensors of the micro-batches in flight (under expert parallelism with
    // the routing's peak load, not its mean).
    StageWork wm = w;
    if (r.ep > 1 && moe_here > 0 && !m.expert_peak_load.empty()) {
      TwinModel peak_model = m;
      peak_model.expert_load = m.expert_peak_load;
      StageParams unused;
      wm = w.Fresh();
      AddStage(peak_model, r, s, layer - n, n, wm, unused);
      for (int i = layer - n; i < layer; ++i) {
        out.expert_peak_load = std::max(out.expert_peak_load, twin_detail::ExpertLoad(peak_model, i));
      }
    }
    const double in_flight = parallel ? std::min(m_count, static_cast<double>(r.pp - s)) : 1.0;
    const double activations = 4 * wm.out_floats * in_flight;
    double params_b = p.tensor_bytes, grads_b = p.tensor_bytes, moments_b = 2 * p.tensor_bytes;
    if (parallel) {
      // ZeroOptimizer (parallel/zero.cc): per bucket a flat parameter
      // buffer padded to its group, the flat gradient buffer (stages 0-1)
      // or the own shard (2-3), and AdamW's moments of the elements this
      // rank updates; stage 3 keeps only the parameters' own shard.
      params_b = grads_b = moments_b = 0;
      for (size_t b = 0; b < p.dense_buckets.size(); ++b) {
        for (const auto& [numel, group] : {std::pair{p.dense_buckets[b], static_cast<double>(r.dp)},
                                           std::pair{p.expert_buckets[b], expert_group}}) {
          if (numel <= 0) continue;
          const double own = std::ceil(numel / group);
          const double padded = own * group;
          params_b += AllocatedBytes(r.zero >= 3 ? own : padded);
          grads_b += AllocatedBytes(r.zero >= 2 ? own : padded);
          moments_b += 2 * AllocatedBytes(r.zero >= 1 ? own : numel);
        }
      }
    }
    // The parameters' gradient tensors live from the first backward until
    // the flat copy (the single-process trainer's are its gradients). With
    // one micro-batch a step they appear during its backward while its
    // activations go: the peak is at the backward's start or at its end.
    const double grad_tensors = parallel ? p.tensor_bytes : grads_b;
    // The backward of the largest op: its output gradient and its inputs'.
    const double transient = 4 * wm.transient_floats + 3 * AllocatedBytes(wm.largest_out);
    const bool at_start = m_count > 1 || activations + transient >= grad_tensors;
    const double grads_alive = m_count > 1 || !at_start ? grad_tensors : 0;
    const double activations_alive = at_start ? activations : 0;
    double buffers = at_start ? transient : 0;
    if (r.zero >= 3 && parallel) buffers += 2 * AllocatedBytes(p.largest_block);
    if (parallel) {
      buffers += grads_alive;
    } else {
      grads_b = grads_alive;
    }
    const double peak = activations_alive + params_b + grads_b + moments_b + buffers;
    if (peak > out.peak_memory_bytes) {
      out.peak_memory_bytes = peak;
      out.activation_bytes = activations_alive;
      out.parameter_bytes = params_b;
      out.gradient_bytes = grads_b;
      out.optimizer_state_bytes = moments_b;
      out.buffer_bytes = buffers;
      out.activation_stage = s;
    }
  }
  TESSERA_ASSIGN_OR_RETURN(StepResult replay, ReplayPipeline(pipe));
  out.step_s = replay.step_time_s;
  // The schedule's own idle time (every rank on a core of its own), and
  // what sharing the cores adds on top.
  PipelineCost own = pipe;
  own.cores = 0;
  TESSERA_ASSIGN_OR_RETURN(StepResult alone, ReplayPipeline(own));
  out.bubble_s = alone.bubble_fraction * alone.step_time_s;
  out.sharing_s = replay.step_time_s - alone.step_time_s;

  // Model FLOPs of the whole step (all ranks): 6 N_active per token + attention.
  double active = 0;
  for (int i = 0; i < m.layers; ++i) {
    active += 4 * d * d;
    const double mats = m.gated_ffn ? 3 : 2;
    active += twin_detail::IsMoeLayer(m, i)
                  ? d * m.experts + m.top_k * mats * d * static_cast<double>(m.d_ff_expert)
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
  return w.Seconds();
}

std::string TwinPredictionJson(const TwinPrediction& p) {
  nlohmann::json j = {{"ranks", p.ranks},
                      {"threads_per_rank", p.threads_per_rank},
                      {"micro_batches", p.micro_batches},
                      {"step_time_s", p.step_s},
                      {"gemm_s", p.gemm_s},
                      {"elementwise_s", p.elementwise_s},
                      {"op_overhead_s", p.overhead_s},
                      {"optimizer_s", p.optimizer_s},
                      {"dp_comm_s", p.dp_comm_s},
                      {"tp_comm_s", p.tp_comm_s},
                      {"ep_comm_s", p.ep_comm_s},
                      {"pp_comm_s", p.pp_comm_s},
                      {"sync_s", p.sync_s},
                      {"bubble_s", p.bubble_s},
                      {"core_sharing_s", p.sharing_s},
                      {"ops_per_micro_batch", p.ops_per_micro_batch},
                      {"model_flops", p.model_flops},
                      {"parameters", p.parameters},
                      {"activation_bytes", p.activation_bytes},
                      {"parameter_bytes", p.parameter_bytes},
                      {"gradient_bytes", p.gradient_bytes},
                      {"optimizer_state_bytes", p.optimizer_state_bytes},
                      {"buffer_bytes", p.buffer_bytes},
                      {"peak_memory_bytes", p.peak_memory_bytes},
                      {"activation_stage", p.activation_stage},
                      {"expert_load", p.expert_load},
                      {"expert_peak_load", p.expert_peak_load}};
  for (auto& [key, value] : j.items()) {
    if (value.is_number_float() && !std::isfinite(value.get<double>())) value = nullptr;  // never NaN in JSON
  }
  return j.dump(2);
}

std::string DescribeTwinPrediction(const TwinPrediction& p) {
  return fmt::format(
      "{} rank(s) x {} thread(s), {} micro-batches per rank, {:.0f} autograd ops per micro-batch\n"
      "step_time_s {:.4f}  gemm {:.4f}  elementwise {:.4f}  op_overhead {:.4f}  optimizer {:.4f}  dp_comm {:.4f}  "
      "tp_comm {:.4f}  ep_comm {:.4f}  pp_comm {:.4f}  sync {:.4f}  bubble {:.4f}  core sharing {:.4f}\n"
      "peak memory {:.2f} MB per rank (pipeline stage {}): activations {:.2f}, parameters {:.2f}, gradients {:.2f}, "
      "optimizer state {:.2f}, buffers {:.2f}{}\n",
      p.ranks, p.threads_per_rank, p.micro_batches, p.ops_per_micro_batch, p.step_s, p.gemm_s, p.elementwise_s,
      p.overhead_s, p.optimizer_s, p.dp_comm_s, p.tp_comm_s, p.ep_comm_s, p.pp_comm_s, p.sync_s, p.bubble_s, p.sharing_s,
      p.peak_memory_bytes / 1e6, p.activation_stage, p.activation_bytes / 1e6, p.parameter_bytes / 1e6,
      p.gradient_bytes / 1e6, p.optimizer_state_bytes / 1e6, p.buffer_bytes / 1e6,
      p.expert_load > 1 ? fmt::format("; expert-parallel routing: the busiest rank receives {:.2f}x the balanced "
                                      "rows (mean), one rank up to {:.2f}x over the micro-batches in flight",
                                      p.expert_load, p.expert_peak_load)
                        : std::string());
}

}  // namespace tessera::sim
