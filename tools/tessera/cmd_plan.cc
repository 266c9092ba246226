// `tessera plan evaluate|search`: the parallel-strategy planner.
//   evaluate --model FILE --cluster FILE --dp D --tp T --pp P [--ep E] [--vpp V]
//            --micro-batch B [--global-batch G] [--seq S] [--zero Z]
//            [--recompute none|selective|full] [--precision bf16|fp8|fp32]
//            [--schedule 1f1b|interleaved|zb] [--no-sp] [--no-flash] [--offload]
//            [--no-overlap] [--no-twin] [--tokens T] [--json]
// evaluate on a cluster spec with a calibrated FILE.twin.toml beside it
// (`tessera sim calibrate`, this machine) takes the step time from the twin
// (plan/calibrated_time.h) unless --no-twin.
//   search   --model FILE --cluster FILE --devices N [--global-batch G] [--seq S]
//            [--tokens T] [--top K] [--no-offload] [--no-fp8] [--json]
// With --tokens, both add the run's wall-clock time, card-hours and goodput
// under failures (per-card MTBF from the cluster spec, Young's checkpoint
// interval, sim's fault model; --restart-s, --spare-fraction, --checkpoint-s,
// --mtbf-hours override).
// Model and cluster formats: docs/plan.md, docs/sim.md.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "tessera/plan/calibrated_time.h"
#include "tessera/plan/cost_model.h"
#include "tessera/plan/report.h"
#include "tessera/plan/sim_step.h"
#include "tessera/plan/search.h"
#include "tessera/plan/time_model.h"

namespace tessera::cli {
namespace {

struct CommonArgs {
  std::string model;
  std::string cluster;
  int64_t global_batch = 0;
  int64_t seq = 0;
  double tokens = 0;
  double restart_s = 600;
  double spare_fraction = 0.02;
  double checkpoint_s = 0;
  double mtbf_hours = 0;
  bool json = false;
};

struct EvaluateArgs {
  CommonArgs common;
  plan::ParallelPlan plan;
  std::string recompute = "none";
  std::string precision = "bf16";
  std::string schedule;
  bool no_sp = false;
  bool no_flash = false;
  bool no_overlap = false;
  bool no_twin = false;
};

struct SearchArgs {
  CommonArgs common;
  int64_t devices = 0;
  int top = 5;
  bool no_offload = false;
  bool no_fp8 = false;
};

void AddCommon(CLI::App* sub, CommonArgs& a) {
  sub->add_option("--model", a.model, "model spec TOML (configs/models/)")->required();
  sub->add_option("--cluster", a.cluster, "cluster spec TOML (configs/clusters/)")->required();
  sub->add_option("--global-batch", a.global_batch, "sequences per step (default: the model's global_batch)");
  sub->add_option("--seq", a.seq, "sequence length (default: the model's)");
  sub->add_option("--tokens", a.tokens, "token budget: add wall-clock, card-hours and goodput");
  sub->add_option("--restart-s", a.restart_s, "restart after a failure: relaunch + reload (600 s)");
  sub->add_option("--spare-fraction", a.spare_fraction, "spare cards as a fraction of the job's (0.02; 0: repairs)");
  sub->add_option("--checkpoint-s", a.checkpoint_s, "checkpoint write time (default: states over the host link)");
  sub->add_option("--mtbf-hours", a.mtbf_hours, "per-card MTBF (default: the cluster spec's)");
  sub->add_flag("--json", a.json, "print JSON");
}

struct Inputs {
  plan::ModelSpec model;
  sim::ClusterSpec cluster;
};

StatusOr<Inputs> Load(const CommonArgs& a) {
  Inputs in;
  TESSERA_ASSIGN_OR_RETURN(in.model, plan::LoadModelSpec(a.model));
  TESSERA_ASSIGN_OR_RETURN(in.cluster, sim::LoadClusterSpec(a.cluster));
  return in;
}

StatusOr<std::optional<plan::RunCost>> Cost(const CommonArgs& a, const plan::StepBreakdown& r, double devices,
                                            const sim::ClusterSpec& c) {
  if (a.tokens <= 0) return std::optional<plan::RunCost>();
  plan::ReliabilityOptions o;
  o.restart_s = a.restart_s;
  o.spare_fraction = a.spare_fraction;
  o.checkpoint_write_s = a.checkpoint_s;
  o.mtbf_hours = a.mtbf_hours;
  TESSERA_ASSIGN_OR_RETURN(plan::RunCost cost, plan::EstimateRunCost(r, devices, a.tokens, c, o));
  return std::optional<plan::RunCost>(cost);
}

Status Evaluate(EvaluateArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(Inputs in, Load(a.common));
  plan::ParallelPlan& p = a.plan;
  p.global_batch = a.common.global_batch > 0 ? a.common.global_batch : in.model.global_batch;
  if (p.global_batch <= 0) {
    return InvalidArgument("model '{}' has no global_batch: give --global-batch", in.model.name);
  }
  p.seq_len = a.common.seq;
  TESSERA_ASSIGN_OR_RETURN(p.recompute, plan::ParseRecompute(a.recompute));
  TESSERA_ASSIGN_OR_RETURN(p.precision, plan::ParsePrecision(a.precision));
  if (a.schedule.empty()) a.schedule = p.vpp > 1 ? "interleaved" : "1f1b";
  TESSERA_ASSIGN_OR_RETURN(p.schedule, plan::ParseSchedule(a.schedule));
  p.sequence_parallel = !a.no_sp;
  p.flash_attention = !a.no_flash;
  p.overlap_grad_reduce = !a.no_overlap;
  if (p.precision == plan::Precision::kFp32) p.state_layout = plan::StateLayout::kFp32Adam;
  // A calibrated host (`tessera sim calibrate` wrote FILE.twin.toml beside
  // the cluster spec): the twin prices the step.
  const std::string twin_path = sim::TwinPathFor(a.common.cluster);
  const bool calibrated = !a.no_twin && std::filesystem::exists(twin_path);
  plan::StepBreakdown r;
  if (calibrated) {
    TESSERA_ASSIGN_OR_RETURN(sim::MachineCalibration twin, sim::LoadTwinToml(twin_path));
    TESSERA_ASSIGN_OR_RETURN(r, plan::EvaluateCalibrated(in.model, in.cluster, p, twin));
  } else {
    TESSERA_ASSIGN_OR_RETURN(r, plan::EvaluatePlan(in.model, in.cluster, p));
  }
  TESSERA_ASSIGN_OR_RETURN(auto cost, Cost(a.common, r, static_cast<double>(p.Devices()), in.cluster));
  // Energy and throttling at steady state under the device's thermal limit (sim::SteadyStateStep).
  StatusOr<sim::StepDvfs> dvfs = plan::StepEnergy(in.cluster, p, r);
  if (a.common.json) {
    nlohmann::json j = plan::BreakdownJson(r);
    j["dvfs"] = dvfs.ok() ? plan::DvfsJson(*dvfs) : nlohmann::json(dvfs.status().ToString());
    j["model"] = plan::ModelJson(in.model);
    j["cluster"] = in.cluster.name;
    j["plan"] = plan::PlanJson(p);
    j["time_model"] = calibrated ? "twin " + twin_path : std::string("roofline");
    if (cost) j["cost"] = plan::RunCostJson(*cost);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", plan::FormatEvaluation(in.model, in.cluster, p, r, cost).c_str());
    if (dvfs.ok()) {
      std::printf("dvfs steady state  throttled step %.3f s  mean clock %.3f  %.1f C  %.0f W/device  energy per step "
                  "%.1f J/device, %.3f MJ total\n",
                  dvfs->step_s, dvfs->mean_clock, dvfs->temp_c, dvfs->power_w, dvfs->energy_per_device_j,
                  dvfs->energy_total_j / 1e6);
    } else {
      std::printf("dvfs: %s\n", dvfs.status().ToString().c_str());
    }
    if (calibrated) std::printf("(step time from the calibrated twin %s; --no-twin for the roofline)\n", twin_path.c_str());
  }
  return Status::Ok();
}

Status Search(const SearchArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(Inputs in, Load(a.common));
  plan::SearchOptions o;
  o.devices = a.devices;
  o.global_batch = a.common.global_batch;
  o.seq_len = a.common.seq;
  o.top = a.top;
  o.allow_offload = !a.no_offload;
  o.allow_fp8 = !a.no_fp8;
  TESSERA_ASSIGN_OR_RETURN(plan::SearchResult s, plan::SearchPlans(in.model, in.cluster, o));
  std::optional<plan::RunCost> cost;
  if (!s.top.empty()) {
    TESSERA_ASSIGN_OR_RETURN(cost, Cost(a.common, s.top.front().result, static_cast<double>(a.devices), in.cluster));
  }
  if (a.common.json) {
    nlohmann::json j;
    j["model"] = plan::ModelJson(in.model);
    j["cluster"] = in.cluster.name;
    j["devices"] = a.devices;
    j["candidates"] = s.candidates;
    j["feasible"] = s.feasible;
    j["search_wall_s"] = s.wall_s;
    j["plans"] = nlohmann::json::array();
    for (const plan::RankedPlan& r : s.top) {
      nlohmann::json e = plan::BreakdownJson(r.result);
      e["plan"] = plan::PlanJson(r.plan);
      j["plans"].push_back(e);
    }
    if (cost) j["cost"] = plan::RunCostJson(*cost);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", plan::FormatSearch(in.model, in.cluster, o, s, cost).c_str());
  }
  if (s.top.empty()) return ResourceExhausted("no plan of {} fits on {} cards", in.model.name, a.devices);
  return Status::Ok();
}

}  // namespace

void RegisterPlanCommand(CLI::App& app) {
  CLI::App* plan = app.add_subcommand("plan", "parallel-strategy planner: evaluate a plan or search for the best");
  plan->require_subcommand(1);

  auto ev = std::make_shared<EvaluateArgs>();
  CLI::App* e = plan->add_subcommand("evaluate", "step time, throughput, MFU and memory of one plan");
  AddCommon(e, ev->common);
  e->add_option("--dp", ev->plan.dp, "data-parallel size")->required();
  e->add_option("--tp", ev->plan.tp, "tensor-parallel size")->required();
  e->add_option("--pp", ev->plan.pp, "pipeline stages")->required();
  e->add_option("--ep", ev->plan.ep, "expert-parallel size (divides dp*tp)");
  e->add_option("--vpp", ev->plan.vpp, "virtual stages per device (interleaved schedule)");
  e->add_option("--micro-batch", ev->plan.micro_batch, "sequences per micro-batch")->required();
  e->add_option("--zero", ev->plan.zero, "ZeRO stage 0..3");
  e->add_option("--recompute", ev->recompute, "none|selective|full");
  e->add_option("--precision", ev->precision, "bf16|fp8|fp32 (fp32: fp32 kernels and Adam state, as Tessera on CPUs)");
  e->add_option("--schedule", ev->schedule, "1f1b|interleaved|zb (default: interleaved when --vpp > 1)");
  e->add_flag("--offload", ev->plan.offload_optimizer, "optimizer states on the host tier");
  e->add_flag("--no-sp", ev->no_sp, "no sequence parallelism");
  e->add_flag("--no-flash", ev->no_flash, "materialize attention scores (no flash attention)");
  e->add_flag("--no-overlap", ev->no_overlap, "gradient reduction after the last backward, not overlapped");
  e->add_flag("--no-twin", ev->no_twin, "roofline time model even when the cluster has a calibrated .twin.toml");
  e->callback([ev] { ExitWith(Evaluate(*ev)); });

  auto se = std::make_shared<SearchArgs>();
  CLI::App* s = plan->add_subcommand("search", "rank the fastest plans that fit in memory");
  AddCommon(s, se->common);
  s->add_option("--devices", se->devices, "cards to use")->required();
  s->add_option("--top", se->top, "plans to list (5)");
  s->add_flag("--no-offload", se->no_offload, "do not consider optimizer offload");
  s->add_flag("--no-fp8", se->no_fp8, "do not consider fp8");
  s->callback([se] { ExitWith(Search(*se)); });
}
TESSERA_CLI_COMMAND(75, RegisterPlanCommand);

}  // namespace tessera::cli
