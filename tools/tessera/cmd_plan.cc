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
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "query_options.h"
#include "tessera/plan/query.h"
#include "tessera/plan/report.h"

// The work and the --json document are library calls (plan/query.h), shared
// with the Python package (tessera.plan); the options are declared once in
// options/query_options.h.
namespace tessera::cli {
namespace {

struct EvaluateArgs {
  plan::EvaluateQuery query;
  bool json = false;
};

struct SearchArgs {
  plan::SearchQuery query;
  bool json = false;
};

Status Evaluate(const EvaluateArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(plan::EvaluateAnswer a, plan::RunEvaluateQuery(args.query));
  if (args.json) {
    std::printf("%s\n", plan::EvaluateAnswerJson(a).dump(2).c_str());
    return Status::Ok();
  }
  std::printf("%s", plan::FormatEvaluation(a.model, a.cluster, a.plan, a.breakdown, a.cost).c_str());
  if (a.dvfs) {
    const sim::StepDvfs& d = *a.dvfs;
    std::printf("dvfs steady state  throttled step %.3f s  mean clock %.3f  %.1f C  %.0f W/device  energy per step "
                "%.1f J/device, %.3f MJ total\n",
                d.step_s, d.mean_clock, d.temp_c, d.power_w, d.energy_per_device_j, d.energy_total_j / 1e6);
  } else {
    std::printf("dvfs: %s\n", a.dvfs_error.c_str());
  }
  if (a.calibrated) {
    std::printf("(step time from the calibrated twin %s; --no-twin for the roofline)\n", a.twin_path.c_str());
  }
  return Status::Ok();
}

Status Search(const SearchArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(plan::SearchAnswer a, plan::RunSearchQuery(args.query));
  if (args.json) {
    std::printf("%s\n", plan::SearchAnswerJson(a).dump(2).c_str());
  } else {
    std::printf("%s", plan::FormatSearch(a.model, a.cluster, a.options, a.result, a.cost).c_str());
  }
  return plan::SearchFound(a);
}

}  // namespace

void RegisterPlanCommand(CLI::App& app) {
  CLI::App* plan = app.add_subcommand("plan", "parallel-strategy planner: evaluate a plan or search for the best");
  plan->require_subcommand(1);

  auto ev = std::make_shared<EvaluateArgs>();
  CLI::App* e = plan->add_subcommand("evaluate", "step time, throughput, MFU and memory of one plan");
  AddEvaluateOptions(e, &ev->query);
  e->add_flag("--json", ev->json, "print JSON");
  e->callback([ev] { ExitWith(Evaluate(*ev)); });

  auto se = std::make_shared<SearchArgs>();
  CLI::App* s = plan->add_subcommand("search", "rank the fastest plans that fit in memory");
  AddSearchOptions(s, &se->query);
  s->add_flag("--json", se->json, "print JSON");
  s->callback([se] { ExitWith(Search(*se)); });
}
TESSERA_CLI_COMMAND(75, RegisterPlanCommand);

}  // namespace tessera::cli
