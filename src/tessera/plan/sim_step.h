// `tessera sim step`'s closed form, priced by the planner: a sim::PlanSpec
// (the simulator's minimal plan file) read as a planner model + plan
// (Megatron GPT: GeLU FFN 4h, LayerNorm, learned positions, tied embeddings,
// biases, dropout), priced per pipeline rank by PricePipeline (the same
// durations EvaluatePlan's closed form uses) and scheduled by
// sim::ReplayPipeline. So `tessera sim step` and `tessera plan evaluate` give
// the same step time for the same plan (sim_agreement_test), and energy per
// step under DVFS comes from sim::SteadyStateStep. Pure functions;
// thread-safe.
#pragma once

#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/plan/time_model.h"
#include "tessera/sim/device_model.h"
#include "tessera/sim/step_replay.h"

namespace tessera::plan {

struct PlannerView {
  ModelSpec model;
  ParallelPlan plan;
};

// Fails on a plan file with [efficiency] (a roofline curve the planner does
// not use: its constants are plan::Efficiency) or one the planner rejects.
StatusOr<PlannerView> FromSimPlan(const sim::PlanSpec& p);

struct PlannedStep {
  sim::StepResult replay;   // the scheduled DAG (step_time_s, trace, ...)
  StepBreakdown closed;     // EvaluatePlan's closed form of the same plan
  PlannerView view;
};
StatusOr<PlannedStep> ReplayPlannedStep(const sim::ClusterSpec& c, const sim::PlanSpec& p);

// Steady-state DVFS of a step (EvaluatePlan's breakdown): the compute on
// the critical path is what stretches when the clock drops.
StatusOr<sim::StepDvfs> StepEnergy(const sim::ClusterSpec& c, const ParallelPlan& p, const StepBreakdown& b);

}  // namespace tessera::plan
