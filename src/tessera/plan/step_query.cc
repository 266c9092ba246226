#include "tessera/plan/step_query.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <utility>

#include "tessera/plan/sim_step.h"
#include "tessera/sim/chrome_trace.h"
#include "tessera/sim/topology.h"

namespace tessera::plan {

StatusOr<StepAnswer> RunStepQuery(const StepQuery& q) {
  StepAnswer a;
  TESSERA_ASSIGN_OR_RETURN(a.cluster, sim::LoadClusterSpec(q.cluster));
  TESSERA_ASSIGN_OR_RETURN(a.plan, sim::LoadPlanSpec(q.plan));
  const auto t0 = std::chrono::steady_clock::now();
  TESSERA_ASSIGN_OR_RETURN(sim::Routing routing, sim::ParseRouting(q.routing));
  // Closed form: priced by the planner's cost model, scheduled as a DAG
  // (plan/sim_step.h); flows: the communication on the flow engine (the
  // reduced replay; full_flows: every rank).
  sim::FlowReplayOptions flow_options;
  flow_options.routing = routing;
  flow_options.full = q.full_flows;
  flow_options.replicas = q.replicas;
  a.flows = q.flows || q.full_flows;
  a.full_flows = q.full_flows;
  double compute_s = 0;
  if (a.flows) {
    TESSERA_ASSIGN_OR_RETURN(a.result, sim::ReplayStepFlows(a.cluster, a.plan, flow_options));
    compute_s = a.result.compute_s;
  } else {
    TESSERA_ASSIGN_OR_RETURN(PlannedStep ps, ReplayPlannedStep(a.cluster, a.plan));
    a.result = std::move(ps.replay);
    a.planner_s = ps.closed.step_time;
    compute_s = ps.closed.compute;
  }
  a.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TESSERA_ASSIGN_OR_RETURN(a.dvfs, sim::SteadyStateStep(a.cluster.device, a.result.step_time_s,
                                                        std::min(compute_s, a.result.step_time_s), a.plan.Devices()));
  if (!q.trace.empty()) {
    std::ofstream out(q.trace);
    out << sim::ChromeTraceJson(a.result);
    if (!out) return IoError("cannot write trace '{}'", q.trace);
  }
  a.tflops_per_device = a.plan.StepFlops() / a.plan.Devices() / a.result.step_time_s / 1e12;
  return a;
}

nlohmann::json StepAnswerJson(const StepAnswer& a) {
  const sim::StepResult& r = a.result;
  nlohmann::json j = {{"cluster", a.cluster.name},   {"devices", a.plan.Devices()},
                      {"step_time_s", r.step_time_s}, {"tflops_per_device", a.tflops_per_device},
                      {"mfu", r.mfu},                 {"bubble_fraction", r.bubble_fraction},
                      {"compute_s", r.compute_s},     {"tp_comm_s", r.tp_comm_s},
                      {"dp_comm_s", r.dp_comm_s},     {"sim_wall_s", a.wall_s}};
  if (!a.flows) j["planner_closed_form_s"] = a.planner_s;
  j["dvfs"] = {{"throttled_step_time_s", a.dvfs.step_s},
               {"mean_clock", a.dvfs.mean_clock},
               {"temp_c", a.dvfs.temp_c},
               {"power_w", a.dvfs.power_w},
               {"energy_per_device_j", a.dvfs.energy_per_device_j},
               {"energy_total_j", a.dvfs.energy_total_j}};
  if (a.flows) {
    j["flow_replay"] = {{"full", a.full_flows},
                        {"simulated_ranks", r.simulated_ranks},
                        {"flows", r.flows},
                        {"events", r.events}};
  }
  return j;
}

}  // namespace tessera::plan
