// `tessera sim ...`: the cluster simulator.
//   sim show --cluster FILE             the parsed spec (devices, fabrics, derived bandwidths)
//   sim collective --cluster FILE --op allreduce|allgather|reducescatter|alltoall|broadcast|reduce
//       --size BYTES [--algo A] [--routing ecmp|adaptive] [--engine flow|packet|analytic] [--ranks N]
//       [--cc dcqcn|none] [--pfc] [--fail-uplink SN:LEAF:SPINE ...] [--json]
//   sim faults --cluster FILE [--cards N] [--spares S] [--work-days D] [--checkpoint-s C]
//       [--restart-s R] [--interval-s I] [--json]      goodput under card failures
//   sim step --cluster FILE --plan FILE [--flows|--full-flows [--routing R] [--replicas N]] [--trace OUT.json] [--json]
//                                                                                                one training step
//     time_s, algbw_GBps, busbw_GBps (nccl-tests formulas), utilization and
//     sim_wall_s. `flow` runs the flow-level engine over the cluster's topology;
//     `packet` the packet-level engine (queues, ECN/DCQCN, PFC; small cases);
//     `analytic` is the closed-form model the planner uses.
// collective and step are library calls (sim/query.h, plan/step_query.h)
// shared with the Python package (tessera.sim); their options are declared
// once in options/query_options.h.
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "query_options.h"
#include "tessera/plan/step_query.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/faults.h"
#include "tessera/sim/query.h"

namespace tessera::cli {
namespace {

// sim show and sim faults.
struct SimArgs {
  std::string cluster;
  int64_t cards = 0;
  int64_t spares = -1;
  double work_days = 30;
  double checkpoint_s = 30;
  double restart_s = 60;
  double interval_s = 0;
  bool json = false;
};

struct CollectiveArgs {
  sim::CollectiveQuery query;
  bool json = false;
};

struct StepArgs {
  plan::StepQuery query;
  bool json = false;
};

Status Show(const SimArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(sim::ClusterSpec spec, sim::LoadClusterSpec(a.cluster));
  std::printf("%s", spec.Describe().c_str());
  return Status::Ok();
}

Status Collective(const CollectiveArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(sim::CollectiveAnswer a, sim::RunCollectiveQuery(args.query));
  if (args.json) {
    std::printf("%s\n", sim::CollectiveAnswerJson(a).dump(2).c_str());
    return Status::Ok();
  }
  const sim::SimCollectiveResult& r = a.result;
  std::printf("# %s on %s: %d ranks, %zu bytes, algo %s, routing %s, engine %s\n",
              std::string(sim::CollectiveKindName(a.kind)).c_str(), a.cluster.c_str(), r.ranks, a.bytes,
              std::string(sim::CollectiveAlgoName(r.algo)).c_str(), a.routing.c_str(), a.engine.c_str());
  std::printf("time_s %.6g  algbw_GBps %.2f  busbw_GBps %.2f  utilization %.3f  sim_wall_s %.4f  flows %lld  "
              "events %lld\n",
              r.time_s, r.algbw / 1e9, r.busbw / 1e9, r.utilization, r.sim_wall_s, static_cast<long long>(r.flows),
              static_cast<long long>(r.events));
  if (a.engine == "packet") {
    std::printf("cnps %lld  max_switch_queue_bytes %.0f\n", static_cast<long long>(r.cnps), r.max_queue_bytes);
  }
  return Status::Ok();
}

Status Faults(const SimArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(sim::ClusterSpec spec, sim::LoadClusterSpec(a.cluster));
  sim::FaultParams p;
  p.cards = a.cards > 0 ? a.cards : spec.TotalDevices();
  p.card_mtbf_h = spec.device.mtbf_hours;
  p.spares = a.spares >= 0 ? a.spares : p.cards;  // default: a spare for every failure
  p.checkpoint_s = a.checkpoint_s;
  p.restart_s = a.restart_s;
  p.interval_s = a.interval_s;
  p.work_s = a.work_days * 86400;
  if (p.work_s <= 0 || p.checkpoint_s < 0 || p.restart_s < 0 || p.interval_s < 0) {
    return InvalidArgument("--work-days must be > 0 and --checkpoint-s, --restart-s, --interval-s >= 0");
  }
  sim::FaultResult r = sim::SimulateFaults(p);
  const double expected = sim::ExpectedGoodput(p);
  if (a.json) {
    nlohmann::json j = {{"cluster", spec.name},          {"cards", p.cards},
                        {"job_mtbf_h", sim::JobMtbfSeconds(p) / 3600}, {"interval_s", r.interval_s},
                        {"card_failures", r.card_failures}, {"spares_used", r.spares_used},
                        {"wall_days", r.wall_s / 86400},    {"lost_work_h", r.lost_work_s / 3600},
                        {"checkpoint_overhead_h", r.checkpoint_overhead_s / 3600},
                        {"recovery_h", r.recovery_s / 3600}, {"goodput", r.goodput},
                        {"expected_goodput", expected}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%lld cards of %s (MTBF %.0f h each): job MTBF %.2f h, checkpoint every %.0f s\n",
                static_cast<long long>(p.cards), spec.device.name.c_str(), p.card_mtbf_h,
                sim::JobMtbfSeconds(p) / 3600, r.interval_s);
    std::printf("%.1f days of work took %.2f days: %lld failures (%lld spares used), lost %.1f h, checkpoints %.1f h, "
                "recovery %.1f h; goodput %.4f (first-order model %.4f)\n",
                a.work_days, r.wall_s / 86400, static_cast<long long>(r.card_failures),
                static_cast<long long>(r.spares_used), r.lost_work_s / 3600, r.checkpoint_overhead_s / 3600,
                r.recovery_s / 3600, r.goodput, expected);
  }
  return Status::Ok();
}

Status Step(const StepArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(plan::StepAnswer a, plan::RunStepQuery(args.query));
  if (args.json) {
    std::printf("%s\n", plan::StepAnswerJson(a).dump(2).c_str());
    return Status::Ok();
  }
  const sim::PlanSpec& plan = a.plan;
  const sim::StepResult& r = a.result;
  const sim::StepDvfs& dvfs = a.dvfs;
  std::printf("%d devices (dp %d x tp %d x pp %d), %d micro-batches, %s on %s\n", plan.Devices(), plan.dp, plan.tp,
              plan.pp, plan.MicroBatches(), !plan.one_f_one_b ? "GPipe" : plan.vpp > 1 ? "interleaved" : "1F1B",
              a.cluster.name.c_str());
  std::printf("step_time_s %.4f  tflops_per_device %.1f  mfu %.3f  bubble %.3f  compute_s %.4f  tp_comm_s %.4f  "
              "dp_comm_s %.4f  sim_wall_s %.4f\n",
              r.step_time_s, a.tflops_per_device, r.mfu, r.bubble_fraction, r.compute_s, r.tp_comm_s, r.dp_comm_s,
              a.wall_s);
  if (!a.flows) std::printf("planner closed form (tessera plan evaluate): %.4f s\n", a.planner_s);
  std::printf("dvfs steady state: throttled step %.4f s  mean clock %.3f  %.1f C  %.0f W/device  energy per step "
              "%.1f J/device, %.3f MJ total\n",
              dvfs.step_s, dvfs.mean_clock, dvfs.temp_c, dvfs.power_w, dvfs.energy_per_device_j,
              dvfs.energy_total_j / 1e6);
  return Status::Ok();
}

}  // namespace

void RegisterSimCommand(CLI::App& app) {
  auto args = std::make_shared<SimArgs>();
  CLI::App* sim = app.add_subcommand("sim", "cluster simulator: specs, collectives on simulated networks");
  sim->require_subcommand(1);
  CLI::App* show = sim->add_subcommand("show", "print a cluster spec with derived bandwidths");
  show->add_option("--cluster", args->cluster, "cluster spec TOML (configs/clusters/)")->required();
  show->callback([args] { ExitWith(Show(*args)); });
  CLI::App* coll = sim->add_subcommand("collective", "simulate one collective: time, algbw, busbw, utilization");
  auto coll_args = std::make_shared<CollectiveArgs>();
  AddCollectiveOptions(coll, &coll_args->query);
  coll->add_flag("--json", coll_args->json, "print one JSON object");
  coll->callback([coll_args] { ExitWith(Collective(*coll_args)); });
  CLI::App* faults = sim->add_subcommand("faults", "card failures from MTBFs, spares, checkpoints: goodput");
  faults->add_option("--cluster", args->cluster, "cluster spec TOML (its device MTBF)")->required();
  faults->add_option("--cards", args->cards, "cards in the job (default: the whole cluster)");
  faults->add_option("--spares", args->spares, "spare cards (default: one per card)");
  faults->add_option("--work-days", args->work_days, "failure-free training time");
  faults->add_option("--checkpoint-s", args->checkpoint_s, "stall per checkpoint");
  faults->add_option("--restart-s", args->restart_s, "reload + rejoin after a failure");
  faults->add_option("--interval-s", args->interval_s, "checkpoint interval (default: Young/Daly)");
  faults->add_flag("--json", args->json, "print one JSON object");
  faults->callback([args] { ExitWith(Faults(*args)); });
  CLI::App* step = sim->add_subcommand("step", "replay one training step of a parallel plan (Chrome trace)");
  auto step_args = std::make_shared<StepArgs>();
  AddStepOptions(step, &step_args->query);
  step->add_flag("--json", step_args->json, "print one JSON object");
  step->callback([step_args] { ExitWith(Step(*step_args)); });
}
TESSERA_CLI_COMMAND(80, RegisterSimCommand);

}  // namespace tessera::cli
