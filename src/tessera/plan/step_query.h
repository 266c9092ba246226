// `tessera sim step` as a library call: one training step of a sim plan
// file replayed (closed form scheduled as a DAG, or the communication on the
// flow engine), with steady-state DVFS. The CLI (tools/tessera/cmd_sim.cc)
// and the Python package (tessera.sim.step) run RunStepQuery on the same
// StepQuery and print / return StepAnswerJson. Lives in plan because the
// closed form is the planner's (plan/sim_step.h). Thread-safe; writes the
// Chrome trace when `trace` names a file.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/device_model.h"
#include "tessera/sim/step_replay.h"

namespace tessera::plan {

struct StepQuery {
  std::string cluster;  // cluster spec TOML
  std::string plan;     // plan TOML
  std::string routing = "adaptive";  // with flows
  std::string trace;    // non-empty: write a Chrome trace-event JSON here
  bool flows = false;       // communication on the flow engine, reduced by symmetry
  bool full_flows = false;  // every rank and collective step on the flow engine
  int replicas = 0;         // flows: dp replicas simulated (0: one super-node's worth)
};

struct StepAnswer {
  sim::ClusterSpec cluster;
  sim::PlanSpec plan;
  sim::StepResult result;
  bool flows = false;
  bool full_flows = false;
  double planner_s = 0;  // the planner's closed form (without flows)
  double wall_s = 0;     // simulation wall time
  double tflops_per_device = 0;
  sim::StepDvfs dvfs;
};

StatusOr<StepAnswer> RunStepQuery(const StepQuery& q);
// `tessera sim step --json`.
nlohmann::json StepAnswerJson(const StepAnswer& a);

}  // namespace tessera::plan
