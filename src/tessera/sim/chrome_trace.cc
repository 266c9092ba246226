#include "tessera/sim/chrome_trace.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace tessera::sim {

std::string ChromeTraceJson(const StepResult& r) {
  using step_detail::kStreams;
  static const char* kStreamNames[kStreams] = {"compute", "send to next stage", "data-parallel", "send to previous"};
  nlohmann::json events = nlohmann::json::array();
  int max_stage = 0;
  for (const TraceEvent& e : r.trace) max_stage = std::max(max_stage, e.stage);
  for (int st = 0; st <= max_stage; ++st) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", st}, {"args", {{"name", "stage " + std::to_string(st)}}}});
    for (int q = 0; q < kStreams; ++q) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", st}, {"tid", q}, {"args", {{"name", kStreamNames[q]}}}});
    }
  }
  int64_t omitted = 0;
  for (const TraceEvent& e : r.trace) {
    const double ts = e.start_s * 1e6, dur = (e.end_s - e.start_s) * 1e6;
    if (!std::isfinite(ts) || !std::isfinite(dur)) {
      ++omitted;
      continue;
    }
    events.push_back({{"ph", "X"}, {"name", e.name}, {"pid", e.stage}, {"tid", e.stream}, {"ts", ts}, {"dur", dur}});
  }
  nlohmann::json j = {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
  if (omitted > 0) j["otherData"] = {{"omitted_events", omitted}};
  // Invalid UTF-8 in a name becomes U+FFFD instead of an exception.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace tessera::sim
