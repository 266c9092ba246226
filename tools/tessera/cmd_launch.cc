// `tessera launch --nproc N [--nnodes M|MIN:MAX --node-rank R --master ADDR:PORT]
//  [--elastic-wait S] [--token T] [--timeout S] [--grace S] [--max-restarts N] [--spares K]
//  [--heartbeat-timeout S] [--heartbeat-interval S] [--events PATH]
//  -- CMD ARGS...`: starts N local ranks of CMD with the torchrun-style job
// environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT as torchrun means them: a free port for PyTorch's own
// TCPStore), hosts Tessera's job store on node 0 (TESSERA_STORE_ADDR,
// TESSERA_STORE_PORT, TESSERA_JOB_TOKEN),
// prefixes output lines with the rank, forwards signals, and stops the job
// when a rank fails. As an agent (comm/launcher_agent.h) it watches the
// ranks' heartbeats (a rank silent for --heartbeat-timeout, default 30 s,
// counts as failed; 0 turns this off), restarts the whole group after a
// failure up to --max-restarts times (default 0: a failure ends the job),
// keeps --spares warm spare processes (Tessera workers only) that take a
// failed rank's place, and writes every event to --events (JSON lines).
// --nnodes MIN:MAX makes membership elastic: a lost node is dropped while
// MIN remain, a returning one is added (docs/comm-control-plane.md).
// The exit code is the job's (see comm/launcher.h).
#include <charconv>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "tessera/comm/launcher.h"

namespace tessera::cli {
namespace {

struct LaunchArgs {
  int nproc = 1;
  std::string nnodes = "1";
  double elastic_wait_s = 10;
  int node_rank = 0;
  std::string master;
  std::string token;
  double timeout_s = 0;
  double grace_s = 5;
  double connect_timeout_s = 300;
  bool no_prefix = false;
  int max_restarts = 0;
  int spares = 0;
  double heartbeat_timeout_s = 30;
  double heartbeat_interval_s = 0;
  std::string events;
  std::vector<std::string> command;
};

comm::Timeout Seconds(double s) { return comm::Timeout(static_cast<int64_t>(std::llround(s * 1000.0))); }

bool ParseCount(const std::string& text, int* out) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 1) return false;
  *out = v;
  return true;
}

// "N" (a fixed number of nodes) or "MIN:MAX" (elastic).
Status ParseNodes(const std::string& text, comm::LaunchOptions* o) {
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

Status ToOptions(const LaunchArgs& a, comm::LaunchOptions* o) {
  o->nproc = a.nproc;
  TESSERA_RETURN_IF_ERROR(ParseNodes(a.nnodes, o));
  if (a.elastic_wait_s < 0) return InvalidArgument("--elastic-wait must be >= 0");
  o->elastic_wait = Seconds(a.elastic_wait_s);
  o->node_rank = a.node_rank;
  if (!a.master.empty()) {
    TESSERA_RETURN_IF_ERROR(comm::ParseHostPort(a.master, &o->master_addr, &o->master_port).WithContext("in --master"));
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

void Run(const LaunchArgs& args) {
  comm::LaunchOptions options;
  ExitWith(ToOptions(args, &options));
  auto result = comm::RunLaunch(options);
  ExitWith(result.status());
  if (result->exit_code != 0) throw CLI::RuntimeError(result->exit_code);
}

}  // namespace

void RegisterLaunchCommand(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start the local ranks of a job: `tessera launch --nproc N -- CMD ARGS...` (each rank gets RANK, "
      "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT as under torchrun, and "
      "TESSERA_STORE_ADDR, TESSERA_STORE_PORT, TESSERA_JOB_TOKEN for Tessera's own store)");
  cmd->add_option("--nproc", args->nproc, "ranks to start on this node")->required()->check(CLI::Range(1, 4096));
  cmd->add_option("--nnodes", args->nnodes,
                  "nodes in the job: N, or MIN:MAX for elastic membership (a lost node is dropped while MIN "
                  "remain, a returning one is added)");
  cmd->add_option("--node-rank", args->node_rank,
                  "this node's index (0 hosts the job store and must stay, also in an elastic job)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--elastic-wait", args->elastic_wait_s,
                  "elastic: seconds node 0 waits at the start for MAX nodes once MIN have joined (default 10)");
  cmd->add_option("--master", args->master,
                  "ADDR:PORT of node 0's job store (required with --nnodes > 1; optional port on one node)");
  cmd->add_option("--token", args->token,
                  "job token shared by all nodes (default: TESSERA_JOB_TOKEN, else node 0 generates one)");
  cmd->add_option("--timeout", args->timeout_s, "stop the job after S seconds (0: no limit)");
  cmd->add_option("--grace", args->grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks");
  cmd->add_option("--connect-timeout", args->connect_timeout_s,
                  "seconds to wait for node 0's store (and, on node 0, for the other nodes to finish)");
  cmd->add_flag("--no-prefix", args->no_prefix, "do not prefix output lines with [rank R]");
  cmd->add_option("--max-restarts", args->max_restarts,
                  "restart the whole group after a rank fails, at most N times (default 0: a failure ends the job)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--spares", args->spares,
                  "keep K warm spare processes that take a failed rank's place (needs --max-restarts and a "
                  "Tessera worker)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--heartbeat-timeout", args->heartbeat_timeout_s,
                  "a rank (or, multi-node, another node's agent) silent this many seconds counts as failed; 0: "
                  "not watched (default 30)");
  cmd->add_option("--heartbeat-interval", args->heartbeat_interval_s,
                  "seconds between heartbeats (default: min(1, timeout/4))");
  cmd->add_option("--events", args->events,
                  "append every agent event (failure, restart, spare_assigned, restored, node_lost, node_joined, "
                  "membership, gave_up, done) to this "
                  "JSON-lines file, e.g. runs/NAME/events.jsonl");
  cmd->add_option("command", args->command, "the command to run, after --")->required();
  cmd->callback([args] { Run(*args); });
}
TESSERA_CLI_COMMAND(40, RegisterLaunchCommand);

}  // namespace tessera::cli
