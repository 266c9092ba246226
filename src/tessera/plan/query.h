// The planner's queries as library calls: `tessera plan evaluate|search`
// (tools/tessera/cmd_plan.cc) and the Python package (tessera.plan) run the
// same Run*Query on the same typed request and print / return the same
// *Json document, so the CLI's --json output and the Python dict are one
// model. The request structs hold the CLI's defaults; their options are
// declared once in tools/tessera/api/options.h. Pure functions of their
// inputs (they read the model, cluster and twin files); thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/plan/cost_model.h"
#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/plan/search.h"
#include "tessera/plan/time_model.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/device_model.h"

namespace tessera::plan {

// Options both queries share (model, cluster, batch, the run-cost inputs).
struct PlanQueryCommon {
  std::string model;    // model spec TOML
  std::string cluster;  // cluster spec TOML
  int64_t global_batch = 0;  // 0: the model's
  int64_t seq = 0;           // 0: the model's
  double tokens = 0;         // > 0: add the run's cost (wall clock, card-hours, goodput)
  double restart_s = 600;
  double spare_fraction = 0.02;
  double checkpoint_s = 0;  // 0: states over the host link
  double mtbf_hours = 0;    // 0: the cluster spec's
};

struct EvaluateQuery {
  PlanQueryCommon common;
  ParallelPlan plan;  // dp, tp, pp, ep, vpp, micro_batch, zero, offload_optimizer
  std::string recompute = "none";
  std::string precision = "bf16";
  std::string schedule;  // empty: interleaved when vpp > 1, else 1f1b
  bool no_sp = false;
  bool no_flash = false;
  bool no_overlap = false;
  bool no_twin = false;
};

struct EvaluateAnswer {
  ModelSpec model;
  sim::ClusterSpec cluster;
  ParallelPlan plan;  // as evaluated (batch, schedule, precision filled in)
  StepBreakdown breakdown;
  std::optional<RunCost> cost;
  std::optional<sim::StepDvfs> dvfs;  // absent: dvfs_error says why
  std::string dvfs_error;
  bool calibrated = false;  // the step time came from the twin at twin_path
  std::string twin_path;
};

StatusOr<EvaluateAnswer> RunEvaluateQuery(const EvaluateQuery& q);
// `tessera plan evaluate --json`.
nlohmann::json EvaluateAnswerJson(const EvaluateAnswer& a);

struct SearchQuery {
  PlanQueryCommon common;
  int64_t devices = 0;
  int top = 5;
  bool no_offload = false;
  bool no_fp8 = false;
};

struct SearchAnswer {
  ModelSpec model;
  sim::ClusterSpec cluster;
  int64_t devices = 0;
  SearchOptions options;
  SearchResult result;
  std::optional<RunCost> cost;  // of the best plan, with --tokens
};

// OK also when no plan fits (result.top empty); see SearchFound.
StatusOr<SearchAnswer> RunSearchQuery(const SearchQuery& q);
// `tessera plan search --json`.
nlohmann::json SearchAnswerJson(const SearchAnswer& a);
// ResourceExhausted when no plan fits (the CLI's exit code 1), else OK.
Status SearchFound(const SearchAnswer& a);

}  // namespace tessera::plan
