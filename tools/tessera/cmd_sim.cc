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
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "tessera/comm/api/ccl_perf.h"
#include "tessera/plan/sim_step.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/collective_cost.h"
#include "tessera/sim/device_model.h"
#include "tessera/sim/faults.h"
#include "tessera/sim/simulate.h"
#include "tessera/sim/step_replay.h"

namespace tessera::cli {
namespace {

struct SimArgs {
  std::string cluster;
  std::string op = "allreduce";
  std::string size = "1G";
  std::string algo = "auto";
  std::string routing = "adaptive";
  std::string engine = "flow";
  int ranks = 0;
  std::vector<std::string> fail_uplinks;
  std::string cc = "dcqcn";
  std::string plan;
  std::string trace;
  bool flows = false;  // sim step: communication on the flow engine, reduced by symmetry
  bool full_flows = false;  // sim step: every rank and collective step on the flow engine
  int replicas = 0;         // sim step --flows: dp replicas whose pipelines are simulated (0: one super-node's worth)
  int64_t cards = 0;
  int64_t spares = -1;
  double work_days = 30;
  double checkpoint_s = 30;
  double restart_s = 60;
  double interval_s = 0;
  bool pfc = false;
  bool json = false;
};

Status Show(const SimArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(sim::ClusterSpec spec, sim::LoadClusterSpec(a.cluster));
  std::printf("%s", spec.Describe().c_str());
  return Status::Ok();
}

StatusOr<sim::SimCollectiveOptions::LeafUplink> ParseUplink(const std::string& text) {
  sim::SimCollectiveOptions::LeafUplink u;
  if (std::sscanf(text.c_str(), "%d:%d:%d", &u.supernode, &u.leaf, &u.spine) != 3 || u.supernode < 0 || u.leaf < 0 ||
      u.spine < 0) {
    return InvalidArgument("--fail-uplink '{}' must be SUPERNODE:LEAF:SPINE (e.g. 0:0:3)", text);
  }
  return u;
}

Status Collective(const SimArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(sim::ClusterSpec spec, sim::LoadClusterSpec(a.cluster));
  sim::SimCollectiveOptions o;
  TESSERA_ASSIGN_OR_RETURN(o.kind, sim::ParseCollectiveKind(a.op));
  TESSERA_ASSIGN_OR_RETURN(o.algo, sim::ParseCollectiveAlgo(a.algo));
  TESSERA_ASSIGN_OR_RETURN(o.routing, sim::ParseRouting(a.routing));
  TESSERA_ASSIGN_OR_RETURN(size_t bytes, comm::ParseByteSize(a.size));
  o.bytes = static_cast<double>(bytes);
  o.ranks = a.ranks > 0 ? a.ranks : spec.supernode.devices;
  for (const std::string& u : a.fail_uplinks) {
    TESSERA_ASSIGN_OR_RETURN(auto uplink, ParseUplink(u));
    o.failed_leaf_uplinks.push_back(uplink);
  }
  sim::SimCollectiveResult r;
  if (a.cc != "dcqcn" && a.cc != "none") return InvalidArgument("--cc '{}': choose dcqcn or none", a.cc);
  if (a.engine == "flow") {
    TESSERA_ASSIGN_OR_RETURN(r, sim::SimulateCollective(spec, o));
  } else if (a.engine == "packet") {
    // Every rank sends at most ~2x its buffer; keep the packet count tractable.
    const double packets = 2.0 * o.bytes * o.ranks / o.packet.mtu_bytes;
    if (packets > 5e7) {
      return InvalidArgument("~{:.0e} packets is too large for the packet engine (small cases only); use --engine "
                             "flow or a smaller --size / --ranks",
                             packets);
    }
    o.packet_level = true;
    o.packet.dcqcn = o.packet.ecn = a.cc == "dcqcn";
    o.packet.pfc = a.pfc;
    TESSERA_ASSIGN_OR_RETURN(r, sim::SimulateCollective(spec, o));
  } else if (a.engine == "analytic") {
    if (o.ranks < 2 || o.ranks > spec.TotalDevices()) {
      return InvalidArgument("--ranks {} must be in [2, {}]", o.ranks, spec.TotalDevices());
    }
    if (!o.failed_leaf_uplinks.empty()) return InvalidArgument("--fail-uplink needs --engine flow");
    const auto t0 = std::chrono::steady_clock::now();
    sim::CollectiveCost c =
        sim::EstimateCollective(spec, o.kind, o.bytes, sim::GroupLayout::Contiguous(spec, o.ranks), o.algo);
    r.algo = c.algo;
    r.ranks = o.ranks;
    r.time_s = c.time_s;
    r.algbw = c.algbw;
    r.busbw = c.busbw;
    r.utilization = c.utilization;
    r.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } else {
    return InvalidArgument("--engine '{}': choose flow, packet or analytic", a.engine);
  }
  if (a.json) {
    nlohmann::json j = {{"cluster", spec.name},
                        {"op", std::string(sim::CollectiveKindName(o.kind))},
                        {"algo", std::string(sim::CollectiveAlgoName(r.algo))},
                        {"routing", a.routing},
                        {"engine", a.engine},
                        {"ranks", r.ranks},
                        {"size_bytes", bytes},
                        {"time_s", r.time_s},
                        {"algbw_GBps", r.algbw / 1e9},
                        {"busbw_GBps", r.busbw / 1e9},
                        {"utilization", r.utilization},
                        {"sim_wall_s", r.sim_wall_s},
                        {"flows", r.flows},
                        {"events", r.events}};
    if (a.engine == "packet") {
      j["cnps"] = r.cnps;
      j["max_queue_bytes"] = r.max_queue_bytes;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("# %s on %s: %d ranks, %zu bytes, algo %s, routing %s, engine %s\n",
                std::string(sim::CollectiveKindName(o.kind)).c_str(), spec.name.c_str(), r.ranks, bytes,
                std::string(sim::CollectiveAlgoName(r.algo)).c_str(), a.routing.c_str(), a.engine.c_str());
    std::printf("time_s %.6g  algbw_GBps %.2f  busbw_GBps %.2f  utilization %.3f  sim_wall_s %.4f  flows %lld  "
                "events %lld\n",
                r.time_s, r.algbw / 1e9, r.busbw / 1e9, r.utilization, r.sim_wall_s,
                static_cast<long long>(r.flows), static_cast<long long>(r.events));
    if (a.engine == "packet") {
      std::printf("cnps %lld  max_switch_queue_bytes %.0f\n", static_cast<long long>(r.cnps), r.max_queue_bytes);
    }
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

Status Step(const SimArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(sim::ClusterSpec spec, sim::LoadClusterSpec(a.cluster));
  TESSERA_ASSIGN_OR_RETURN(sim::PlanSpec plan, sim::LoadPlanSpec(a.plan));
  const auto t0 = std::chrono::steady_clock::now();
  TESSERA_ASSIGN_OR_RETURN(sim::Routing routing, sim::ParseRouting(a.routing));
  // Closed form: priced by the planner's cost model, scheduled as a DAG
  // (plan/sim_step.h); --flows: the communication on the flow engine (the
  // reduced replay; --full-flows: every rank).
  sim::FlowReplayOptions flow_options;
  flow_options.routing = routing;
  flow_options.full = a.full_flows;
  flow_options.replicas = a.replicas;
  const bool flows = a.flows || a.full_flows;
  sim::StepResult r;
  double planner_s = 0, compute_s = 0;
  if (flows) {
    TESSERA_ASSIGN_OR_RETURN(r, sim::ReplayStepFlows(spec, plan, flow_options));
    compute_s = r.compute_s;
  } else {
    TESSERA_ASSIGN_OR_RETURN(plan::PlannedStep ps, plan::ReplayPlannedStep(spec, plan));
    r = std::move(ps.replay);
    planner_s = ps.closed.step_time;
    compute_s = ps.closed.compute;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TESSERA_ASSIGN_OR_RETURN(sim::StepDvfs dvfs, sim::SteadyStateStep(spec.device, r.step_time_s,
                                                                    std::min(compute_s, r.step_time_s), plan.Devices()));
  if (!a.trace.empty()) {
    std::ofstream out(a.trace);
    out << sim::ChromeTraceJson(r);
    if (!out) return IoError("cannot write trace '{}'", a.trace);
  }
  const double tflops = plan.StepFlops() / plan.Devices() / r.step_time_s / 1e12;
  if (a.json) {
    nlohmann::json j = {{"cluster", spec.name},       {"devices", plan.Devices()},
                        {"step_time_s", r.step_time_s}, {"tflops_per_device", tflops},
                        {"mfu", r.mfu},               {"bubble_fraction", r.bubble_fraction},
                        {"compute_s", r.compute_s},   {"tp_comm_s", r.tp_comm_s},
                        {"dp_comm_s", r.dp_comm_s},   {"sim_wall_s", wall}};
    if (!flows) j["planner_closed_form_s"] = planner_s;
    j["dvfs"] = {{"throttled_step_time_s", dvfs.step_s},     {"mean_clock", dvfs.mean_clock},
                 {"temp_c", dvfs.temp_c},                    {"power_w", dvfs.power_w},
                 {"energy_per_device_j", dvfs.energy_per_device_j}, {"energy_total_j", dvfs.energy_total_j}};
    if (flows) j["flow_replay"] = {{"full", a.full_flows}, {"simulated_ranks", r.simulated_ranks},
                                   {"flows", r.flows}, {"events", r.events}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%d devices (dp %d x tp %d x pp %d), %d micro-batches, %s on %s\n", plan.Devices(), plan.dp, plan.tp,
                plan.pp, plan.MicroBatches(), !plan.one_f_one_b ? "GPipe" : plan.vpp > 1 ? "interleaved" : "1F1B",
                spec.name.c_str());
    std::printf("step_time_s %.4f  tflops_per_device %.1f  mfu %.3f  bubble %.3f  compute_s %.4f  tp_comm_s %.4f  "
                "dp_comm_s %.4f  sim_wall_s %.4f\n",
                r.step_time_s, tflops, r.mfu, r.bubble_fraction, r.compute_s, r.tp_comm_s, r.dp_comm_s, wall);
    if (!flows) std::printf("planner closed form (tessera plan evaluate): %.4f s\n", planner_s);
    std::printf("dvfs steady state: throttled step %.4f s  mean clock %.3f  %.1f C  %.0f W/device  energy per step "
                "%.1f J/device, %.3f MJ total\n",
                dvfs.step_s, dvfs.mean_clock, dvfs.temp_c, dvfs.power_w, dvfs.energy_per_device_j,
                dvfs.energy_total_j / 1e6);
  }
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
  coll->add_option("--cluster", args->cluster, "cluster spec TOML (configs/clusters/)")->required();
  coll->add_option("--op", args->op, "allreduce, allgather, reducescatter, alltoall, broadcast, reduce");
  coll->add_option("--size", args->size, "bytes per rank, nccl-tests convention (suffixes K, M, G)");
  coll->add_option("--algo", args->algo, "auto, ring, tree, hd, hierarchical, pairwise");
  coll->add_option("--routing", args->routing, "ecmp or adaptive");
  coll->add_option("--engine", args->engine,
                   "flow (flow-level), packet (packet-level, small cases) or analytic (closed form)");
  coll->add_option("--cc", args->cc, "packet engine congestion control: dcqcn (ECN + DCQCN) or none");
  coll->add_flag("--pfc", args->pfc, "packet engine: lossless PFC instead of drop-tail");
  coll->add_option("--ranks", args->ranks, "ranks on devices 0..N-1 (default: one super-node)");
  coll->add_option("--fail-uplink", args->fail_uplinks, "fail a super-node fabric uplink SUPERNODE:LEAF:SPINE");
  coll->add_flag("--json", args->json, "print one JSON object");
  coll->callback([args] { ExitWith(Collective(*args)); });
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
  step->add_option("--cluster", args->cluster, "cluster spec TOML")->required();
  step->add_option("--plan", args->plan, "plan TOML ([model] layers hidden seq vocab; [parallel] dp tp pp ...)")
      ->required();
  step->add_option("--trace", args->trace, "write a Chrome trace-event JSON here");
  step->add_flag("--flows", args->flows,
                 "simulate communication as flows, reduced by symmetry (representative dp replicas, merged ring steps)");
  step->add_flag("--full-flows", args->full_flows, "simulate every rank's communication as flows (slower)");
  step->add_option("--replicas", args->replicas, "with --flows: dp replicas whose pipelines are simulated");
  step->add_option("--routing", args->routing, "with --flows: ecmp or adaptive");
  step->add_flag("--json", args->json, "print one JSON object");
  step->callback([args] { ExitWith(Step(*args)); });
}
TESSERA_CLI_COMMAND(80, RegisterSimCommand);

}  // namespace tessera::cli
