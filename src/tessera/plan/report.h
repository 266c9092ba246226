// Reports of the planner: JSON objects (stable keys, SI units: seconds,
// bytes, FLOP/s) and readable text for `tessera plan evaluate|search`.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/plan/cost_model.h"
#include "tessera/plan/model_spec.h"
#include "tessera/plan/parallel_plan.h"
#include "tessera/plan/search.h"
#include "tessera/plan/time_model.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/device_model.h"

namespace tessera::plan {

nlohmann::json ModelJson(const ModelSpec& m);
nlohmann::json PlanJson(const ParallelPlan& p);
// step_time_s, tflops_per_device, mfu, memory_bytes_per_device {total, weights, ...},
// bubble_fraction, comm_fraction, time breakdown, ...
nlohmann::json BreakdownJson(const StepBreakdown& r);
nlohmann::json RunCostJson(const RunCost& c);
nlohmann::json DvfsJson(const sim::StepDvfs& d);

// One evaluated plan (with its cost when `cost` is given).
std::string FormatEvaluation(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                             const StepBreakdown& r, const std::optional<RunCost>& cost);
// The ranked plans of a search: a table, then the winner in full.
std::string FormatSearch(const ModelSpec& m, const sim::ClusterSpec& c, const SearchOptions& o,
                         const SearchResult& s, const std::optional<RunCost>& best_cost);

}  // namespace tessera::plan
