#include "tessera/comm/launch_query.h"

#include <charconv>
#include <cmath>

namespace tessera::comm {
namespace {

Timeout Seconds(double s) { return Timeout(static_cast<int64_t>(std::llround(s * 1000.0))); }

bool ParseCount(const std::string& text, int* out) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 1) return false;
  *out = v;
  return true;
}

// "N" (a fixed number of nodes) or "MIN:MAX" (elastic).
Status ParseNodes(const std::string& text, LaunchOptions* o) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    if (!ParseCount(text, &o->nnodes)) {
      return InvalidArgument("--nnodes '{}' is not a positive number or MIN:MAX", text);
    }
    o->min_nnodes = o->nnodes;
    return Status::Ok();
  }
  if (!ParseCount(text.substr(0, colon), &o->min_nnodes) || !ParseCount(text.substr(colon + 1), &o->nnodes)) {
    return InvalidArgument("--nnodes '{}' is not MIN:MAX with positive numbers", text);
  }
  o->elastic = true;
  return Status::Ok();
}

}  // namespace

Status ToLaunchOptions(const LaunchQuery& a, LaunchOptions* o) {
  o->nproc = a.nproc;
  TESSERA_RETURN_IF_ERROR(ParseNodes(a.nnodes, o));
  if (a.elastic_wait_s < 0) return InvalidArgument("--elastic-wait must be >= 0");
  o->elastic_wait = Seconds(a.elastic_wait_s);
  o->node_rank = a.node_rank;
  if (!a.master.empty()) {
    TESSERA_RETURN_IF_ERROR(ParseHostPort(a.master, &o->master_addr, &o->master_port).WithContext("in --master"));
  }
  o->token = a.token;
  if (a.timeout_s < 0 || a.grace_s < 0 || a.connect_timeout_s <= 0) {
    return InvalidArgument("--timeout and --grace must be >= 0 and --connect-timeout > 0");
  }
  o->job_timeout = Seconds(a.timeout_s);
  o->grace = Seconds(a.grace_s);
  o->connect_timeout = Seconds(a.connect_timeout_s);
  o->prefix_output = !a.no_prefix;
  if (a.heartbeat_timeout_s < 0 || a.heartbeat_interval_s < 0) {
    return InvalidArgument("--heartbeat-timeout and --heartbeat-interval must be >= 0");
  }
  o->max_restarts = a.max_restarts;
  o->spares = a.spares;
  o->heartbeat_timeout = Seconds(a.heartbeat_timeout_s);
  o->heartbeat_interval = Seconds(a.heartbeat_interval_s);
  o->events_path = a.events;
  o->command = a.command;
  return Status::Ok();
}

StatusOr<LaunchResult> RunLaunchQuery(const LaunchQuery& q) {
  LaunchOptions options;
  TESSERA_RETURN_IF_ERROR(ToLaunchOptions(q, &options));
  return RunLaunch(options);
}

}  // namespace tessera::comm
