// The worker's side of the `tessera launch` agent (launcher_agent.h):
// liveness heartbeats, warm spares waiting for a rank, and recovery
// reports. Everything is a no-op outside an agent (variables absent).
//
// Contract with the agent (environment of a worker it starts):
//   TESSERA_HEARTBEAT_FD=<fd>   a Unix stream socket to the agent;
//   TESSERA_HEARTBEAT_MS=<ms>   the interval: one byte 'H' per interval.
//     The agent watches a rank from its first 'H' on; a rank silent for
//     longer than --heartbeat-timeout (a SIGSTOPped or otherwise frozen
//     process: all its threads stop) is treated as failed. A worker that
//     never heartbeats is never declared silent.
//   TESSERA_SPARE=1, TESSERA_SPARE_FD=<fd>: this process is a warm spare
//     (no RANK/LOCAL_RANK yet). AwaitSpareAssignment sends 'S' (ready) and
//     blocks until the agent writes "KEY=VALUE\n" lines ended by an empty
//     line (RANK, LOCAL_RANK, TESSERA_RESTART_COUNT, ...), applies them with
//     setenv, unsets TESSERA_SPARE/TESSERA_SPARE_FD and returns: the process
//     continues as that rank. ReadJobEnv (job_env.h) calls it, so
//     Communicator::FromEnvironment and `tessera train` do too.
//   Messages 'R' + one JSON object + '\n' (ReportRestored) are logged by
//   the agent as "restored" events.
// StartHeartbeatFromEnvironment starts one background thread (idempotent,
// thread-safe); it stops and is joined at exit. AwaitSpareAssignment calls
// setenv: call it (or ReadJobEnv) before starting threads that read the
// environment; its wait ends when the agent assigns a rank or goes away.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/base/status.h"

namespace tessera::comm {

// Starts the heartbeat thread if TESSERA_HEARTBEAT_FD is set; otherwise
// does nothing. Safe to call many times.
void StartHeartbeatFromEnvironment();

// True when this process runs under a `tessera launch` agent that watches
// heartbeats.
bool UnderLaunchAgent();

// If this process is a spare (TESSERA_SPARE=1), waits for the agent to
// assign it a rank and applies the assignment to the environment. OK at
// once otherwise. Unavailable if the agent closes the socket first (the job
// ended or the agent died), naming the fd.
Status AwaitSpareAssignment();

// Tells the agent how this (restarted) rank restored its state: `source`
// such as "memory", "disk:<dir>" or "none", the step it resumed at, and
// how many steps of progress were lost. False outside an agent.
bool ReportRestored(const std::string& source, int64_t step, int64_t steps_lost);

}  // namespace tessera::comm
