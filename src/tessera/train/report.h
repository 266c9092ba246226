// report.html: a self-contained page (inline SVG and CSS, no scripts or
// external files) summarizing a training run — the figures of
// summary.json, the loss curve with evaluations, throughput per step,
// memory per rank by category, and a timeline of one step across ranks.
// Plain functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"

namespace tessera::train {

struct ReportData {
  struct Step {
    int64_t step;
    double loss;
    double tokens_per_s;
    double step_s;
  };
  struct Eval {
    int64_t step;
    double loss;
    double metric;
  };
  struct Event {  // one timeline bar
    int rank;
    std::string name;
    std::string category;  // "compute" | "comm"
    double start_s;
    double duration_s;
  };
  std::vector<Step> steps;
  std::vector<Eval> evals;
  struct Marker {  // a fault-tolerance event on the loss curve
    double step;
    std::string label;   // short, drawn on the chart
    std::string detail;  // the event, in the table and the tooltip
  };
  std::vector<Event> timeline;  // one traced step (may be empty)
  std::vector<Marker> markers;
  nlohmann::json summary;       // summary.json's content
};

// For a run that resumed: the steps and evaluations of metrics.jsonl before
// the first step in `data` are prepended (the whole loss curve), and the
// events of events.jsonl (failures, recoveries, rollbacks, skipped steps)
// become markers. Missing or unreadable files add nothing.
void AddRunHistory(const std::string& run_dir, ReportData* data);

// The page as a string / written atomically to `path`.
std::string RenderReportHtml(const std::string& run_name, const ReportData& data);
Status WriteReportHtml(const std::string& path, const std::string& run_name, const ReportData& data);

}  // namespace tessera::train
