// Plans on a calibrated host: when a cluster spec comes from `tessera sim
// calibrate` (this machine; its `.twin.toml` beside it), the step time is
// the twin's (sim/twin.h: every op of Tessera's GPT priced at measured
// costs, measured context factor and meeting cost) rather than the
// roofline, which CPU kernels at these sizes are far from, and the
// activation memory is the twin's count of what Tessera's tape keeps (every
// op output of a micro-batch, fp32, times the micro-batches in flight).
// Training-state memory, FLOP counts and the plan checks stay the
// planner's (EvaluatePlan).
// The twin models Tessera's own GPT in fp32: standard multi-head attention
// (no GQA, no MLA), no shared experts, no biases; the plan must use
// --precision fp32, the 1F1B schedule and no offload (recompute and
// sequence parallelism are the twin's). Other
// inputs are errors naming the field.
// Pure functions of their arguments; thread-safe.
#pragma once

#include "tessera/base/status.h"
#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/plan/time_model.h"
#include "tessera/sim/calibrate.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/twin.h"

namespace tessera::plan {

// The twin's view of a model spec; errors for what the twin cannot price.
StatusOr<sim::TwinModel> TwinModelFor(const ModelSpec& m);

// EvaluatePlan, then the time fields (step_time, compute, tp/ep/pp/dp
// communication, bubble, optimizer and the rates) and memory.activations
// from the twin.
StatusOr<StepBreakdown> EvaluateCalibrated(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                                           const sim::MachineCalibration& calibration);

}  // namespace tessera::plan
