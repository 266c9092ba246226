#include "tessera/plan/query.h"

#include <filesystem>
#include <utility>

#include "tessera/plan/calibrated_time.h"
#include "tessera/plan/report.h"
#include "tessera/plan/sim_step.h"

namespace tessera::plan {
namespace {

struct Inputs {
  ModelSpec model;
  sim::ClusterSpec cluster;
};

StatusOr<Inputs> Load(const PlanQueryCommon& q) {
  Inputs in;
  TESSERA_ASSIGN_OR_RETURN(in.model, LoadModelSpec(q.model));
  TESSERA_ASSIGN_OR_RETURN(in.cluster, sim::LoadClusterSpec(q.cluster));
  return in;
}

StatusOr<std::optional<RunCost>> Cost(const PlanQueryCommon& q, const StepBreakdown& r, double devices,
                                      const sim::ClusterSpec& c) {
  if (q.tokens <= 0) return std::optional<RunCost>();
  ReliabilityOptions o;
  o.restart_s = q.restart_s;
  o.spare_fraction = q.spare_fraction;
  o.checkpoint_write_s = q.checkpoint_s;
  o.mtbf_hours = q.mtbf_hours;
  TESSERA_ASSIGN_OR_RETURN(RunCost cost, EstimateRunCost(r, devices, q.tokens, c, o));
  return std::optional<RunCost>(cost);
}

}  // namespace

StatusOr<EvaluateAnswer> RunEvaluateQuery(const EvaluateQuery& q) {
  TESSERA_ASSIGN_OR_RETURN(Inputs in, Load(q.common));
  EvaluateAnswer a;
  ParallelPlan& p = a.plan;
  p = q.plan;
  p.global_batch = q.common.global_batch > 0 ? q.common.global_batch : in.model.global_batch;
  if (p.global_batch <= 0) {
    return InvalidArgument("model '{}' has no global_batch: give --global-batch", in.model.name);
  }
  p.seq_len = q.common.seq;
  TESSERA_ASSIGN_OR_RETURN(p.recompute, ParseRecompute(q.recompute));
  TESSERA_ASSIGN_OR_RETURN(p.precision, ParsePrecision(q.precision));
  const std::string schedule = !q.schedule.empty() ? q.schedule : p.vpp > 1 ? "interleaved" : "1f1b";
  TESSERA_ASSIGN_OR_RETURN(p.schedule, ParseSchedule(schedule));
  p.sequence_parallel = !q.no_sp;
  p.flash_attention = !q.no_flash;
  p.overlap_grad_reduce = !q.no_overlap;
  if (p.precision == Precision::kFp32) p.state_layout = StateLayout::kFp32Adam;
  // A calibrated host (`tessera sim calibrate` wrote FILE.twin.toml beside
  // the cluster spec): the twin prices the step.
  a.twin_path = sim::TwinPathFor(q.common.cluster);
  a.calibrated = !q.no_twin && std::filesystem::exists(a.twin_path);
  if (a.calibrated) {
    TESSERA_ASSIGN_OR_RETURN(sim::MachineCalibration twin, sim::LoadTwinToml(a.twin_path));
    TESSERA_ASSIGN_OR_RETURN(a.breakdown, EvaluateCalibrated(in.model, in.cluster, p, twin));
  } else {
    TESSERA_ASSIGN_OR_RETURN(a.breakdown, EvaluatePlan(in.model, in.cluster, p));
  }
  TESSERA_ASSIGN_OR_RETURN(a.cost, Cost(q.common, a.breakdown, static_cast<double>(p.Devices()), in.cluster));
  // Energy and throttling at steady state under the device's thermal limit (sim::SteadyStateStep).
  StatusOr<sim::StepDvfs> dvfs = StepEnergy(in.cluster, p, a.breakdown);
  if (dvfs.ok()) {
    a.dvfs = *dvfs;
  } else {
    a.dvfs_error = dvfs.status().ToString();
  }
  a.model = std::move(in.model);
  a.cluster = std::move(in.cluster);
  return a;
}

nlohmann::json EvaluateAnswerJson(const EvaluateAnswer& a) {
  nlohmann::json j = BreakdownJson(a.breakdown);
  j["dvfs"] = a.dvfs ? DvfsJson(*a.dvfs) : nlohmann::json(a.dvfs_error);
  j["model"] = ModelJson(a.model);
  j["cluster"] = a.cluster.name;
  j["plan"] = PlanJson(a.plan);
  j["time_model"] = a.calibrated ? "twin " + a.twin_path : std::string("roofline");
  if (a.cost) j["cost"] = RunCostJson(*a.cost);
  return j;
}

StatusOr<SearchAnswer> RunSearchQuery(const SearchQuery& q) {
  TESSERA_ASSIGN_OR_RETURN(Inputs in, Load(q.common));
  SearchAnswer a;
  a.devices = q.devices;
  SearchOptions& o = a.options;
  o.devices = q.devices;
  o.global_batch = q.common.global_batch;
  o.seq_len = q.common.seq;
  o.top = q.top;
  o.allow_offload = !q.no_offload;
  o.allow_fp8 = !q.no_fp8;
  TESSERA_ASSIGN_OR_RETURN(a.result, SearchPlans(in.model, in.cluster, o));
  if (!a.result.top.empty()) {
    TESSERA_ASSIGN_OR_RETURN(a.cost,
                             Cost(q.common, a.result.top.front().result, static_cast<double>(q.devices), in.cluster));
  }
  a.model = std::move(in.model);
  a.cluster = std::move(in.cluster);
  return a;
}

nlohmann::json SearchAnswerJson(const SearchAnswer& a) {
  nlohmann::json j;
  j["model"] = ModelJson(a.model);
  j["cluster"] = a.cluster.name;
  j["devices"] = a.devices;
  j["candidates"] = a.result.candidates;
  j["feasible"] = a.result.feasible;
  j["search_wall_s"] = a.result.wall_s;
  j["plans"] = nlohmann::json::array();
  for (const RankedPlan& r : a.result.top) {
    nlohmann::json e = BreakdownJson(r.result);
    e["plan"] = PlanJson(r.plan);
    j["plans"].push_back(e);
  }
  if (a.cost) j["cost"] = RunCostJson(*a.cost);
  return j;
}

Status SearchFound(const SearchAnswer& a) {
  if (a.result.top.empty()) return ResourceExhausted("no plan of {} fits on {} cards", a.model.name, a.devices);
  return Status::Ok();
}

}  // namespace tessera::plan
