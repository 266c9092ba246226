#include "tessera/plan/sim_step.h"

#include <algorithm>

#include "tessera/sim/pipeline_replay.h"

namespace tessera::plan {

StatusOr<PlannerView> FromSimPlan(const sim::PlanSpec& p) {
  if (p.custom_efficiency) {
    return InvalidArgument("[efficiency] sets the flow replay's roofline curve; the closed form uses the planner's "
                           "constants (plan::Efficiency, docs/plan.md) — drop the table or use --flows");
  }
  PlannerView v;
  ModelSpec& m = v.model;
  m.name = "sim-plan";
  m.layers = p.layers;
  m.hidden = p.hidden;
  m.heads = p.heads > 0 ? p.heads : std::max(1, p.hidden / 128);
  m.kv_heads = m.heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = 4 * static_cast<int64_t>(p.hidden);
  m.vocab = p.vocab;
  m.seq_len = p.seq;
  m.global_batch = p.global_batch;
  m.dropout = true;
  m.moe_layer.assign(m.layers, false);
  TESSERA_RETURN_IF_ERROR(ValidateModelSpec(m));
  ParallelPlan& q = v.plan;
  q.dp = p.dp;
  q.tp = p.tp;
  q.pp = p.pp;
  q.vpp = p.vpp;
  q.micro_batch = p.micro_batch;
  q.global_batch = p.global_batch;
  q.zero = p.zero;
  q.recompute = p.recompute == "full" ? Recompute::kFull : p.recompute == "selective" ? Recompute::kSelective
                                                                                       : Recompute::kNone;
  q.precision = p.precision == sim::Precision::kFp8    ? Precision::kFp8
                : p.precision == sim::Precision::kFp32 ? Precision::kFp32
                                                       : Precision::kBf16;
  q.schedule = p.vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;  // GPipe: same time, see below
  q.sequence_parallel = p.sequence_parallel;
  q.flash_attention = p.flash_attention;
  q.overlap_grad_reduce = p.overlap_grad_reduce;
  return v;
}

StatusOr<PlannedStep> ReplayPlannedStep(const sim::ClusterSpec& c, const sim::PlanSpec& p) {
  PlannedStep out;
  TESSERA_ASSIGN_OR_RETURN(out.view, FromSimPlan(p));
  TESSERA_ASSIGN_OR_RETURN(out.closed, EvaluatePlan(out.view.model, c, out.view.plan));
  TESSERA_ASSIGN_OR_RETURN(sim::PipelineCost cost, PricePipeline(out.view.model, c, out.view.plan));
  // GPipe runs every forward before any backward: the same step time in this
  // model (the bubble is the same), more activation memory.
  if (!p.one_f_one_b) cost.schedule = sim::PipelineSchedule::kGPipe;
  TESSERA_ASSIGN_OR_RETURN(out.replay, sim::ReplayPipeline(cost));
  out.replay.tp_comm_s = out.closed.tp_comm;
  out.replay.mfu = out.closed.model_flops / (out.replay.step_time_s * static_cast<double>(out.view.plan.Devices()) *
                                             c.device.PeakFlops(p.precision));
  return out;
}

StatusOr<sim::StepDvfs> StepEnergy(const sim::ClusterSpec& c, const ParallelPlan& p, const StepBreakdown& b) {
  return sim::SteadyStateStep(c.device, b.step_time, std::min(b.compute, b.step_time), p.Devices());
}

}  // namespace tessera::plan
