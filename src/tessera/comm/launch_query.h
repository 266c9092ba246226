// `tessera launch` as a library call: the launcher's options as the CLI
// takes them (seconds, "N" or "MIN:MAX" nodes, "ADDR:PORT"), checked and
// turned into comm::LaunchOptions, then comm::RunLaunch. The CLI
// (tools/tessera/cmd_launch.cc) and the Python package (tessera.launch)
// both call RunLaunchQuery. RunLaunch's rules hold: one launch per process
// at a time (it installs signal handlers for its duration).
#pragma once

#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/launcher.h"

namespace tessera::comm {

struct LaunchQuery {
  int nproc = 1;
  std::string nnodes = "1";  // N, or MIN:MAX (elastic)
  double elastic_wait_s = 10;
  int node_rank = 0;
  std::string master;  // ADDR:PORT of node 0's store
  std::string token;
  double timeout_s = 0;  // 0: no limit
  double grace_s = 5;
  double connect_timeout_s = 300;
  bool no_prefix = false;
  int max_restarts = 0;
  int spares = 0;
  double heartbeat_timeout_s = 30;
  double heartbeat_interval_s = 0;
  std::string events;  // JSON-lines event file
  std::vector<std::string> command;
};

Status ToLaunchOptions(const LaunchQuery& q, LaunchOptions* o);
// ToLaunchOptions, then RunLaunch: a non-OK Status when the job could not
// start; the ranks' failures are in the result (exit_code, reason).
StatusOr<LaunchResult> RunLaunchQuery(const LaunchQuery& q);

}  // namespace tessera::comm
