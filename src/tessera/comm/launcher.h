// The job launcher behind `tessera launch`: starts the local ranks of a job,
// relays their output, watches them, and stops the job when one fails.
//
// RunLaunch:
//   - Node 0 hosts the job's TcpStoreServer in the launcher (127.0.0.1 and
//     an ephemeral port for a one-node job unless a master port is given;
//     every interface at the master port otherwise). The job token is the
//     given one (--token / TESSERA_JOB_TOKEN) or a fresh random one; a fresh
//     token for a multi-node job is printed once on stderr for the other
//     nodes. Other nodes check the token against node 0's store before
//     starting anything.
//   - Each local rank is fork/exec'ed in its own process group with the
//     launcher's environment plus RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun's meaning: a port
//     free when the job started, on which PyTorch's rank 0 serves its own
//     TCPStore; node 0 picks it, the other nodes read it from the store),
//     TESSERA_STORE_ADDR, TESSERA_STORE_PORT (the launcher's store, which
//     Tessera's ranks use; job_env.h), TESSERA_JOB_TOKEN,
//     TESSERA_STORE_HOSTED=1, TESSERA_NODE_RANK, TESSERA_NUM_NODES; stdin is
//     /dev/null. stdout and stderr come back through pipes and are written
//     to the launcher's stdout/stderr one whole line per write(), prefixed
//     "[rank R] " (lines are never interleaved; a line longer than 64 KiB
//     is split).
//   - SIGINT/SIGTERM/SIGHUP to the launcher are forwarded to every rank's
//     process group; a second one escalates to SIGKILL.
//   - When a rank exits non-zero or dies by a signal (or the job exceeds
//     `job_timeout`, or, for multi-node jobs, another node reports a
//     failure through the store), the launcher sends SIGTERM to every other
//     rank's process group, SIGKILL after `grace`, and prints a summary
//     table (rank, pid, status, runtime) on stderr.
//   - Exit code: 0 if every rank exited 0; else 128+signal if the launcher
//     was signalled, 124 on job timeout, else the first failed rank's exit
//     code (128+signal if it died by a signal).
//   - Every wait is bounded: ranks are killed at most `grace` after the
//     stop began; pipes held open by stray grandchildren are abandoned
//     after a short drain; multi-node launchers wait for each other at the
//     end at most `connect_timeout`.
//   - Agent (launcher_agent.h, docs/comm-control-plane.md): ranks that
//     link Tessera heartbeat over an inherited socket; one silent for
//     longer than `heartbeat_timeout` (hung, SIGSTOPped) fails like a rank
//     that died. With `max_restarts` > 0 a failure stops the group and
//     starts it again (all nodes in lockstep, a fresh rendezvous), up to
//     max_restarts times; `spares` warm spare processes take a failed
//     rank's place. Events go to stderr and to `events_path` (JSON lines).
//     Multi-node: a node whose agent stops beating in the store is
//     reported within `heartbeat_timeout` and the job fails (exit 1).
//   - Elastic (`elastic`, --nnodes MIN:MAX; launcher_membership.h): the
//     agents agree at every attempt on the live nodes (node 0 decides; it
//     hosts the store and must stay). A lost node is dropped (a restart,
//     bounded by max_restarts) while at least min_nnodes remain; a node
//     agent started later joins at the next attempt (not a restart; at most
//     nnodes + max_restarts joins). The ranks are renumbered contiguously
//     over the live nodes in node order.
// RunLaunch installs SIGINT/SIGTERM/SIGHUP/SIGCHLD/SIGPIPE handlers for its
// duration (restored after); run one launch per process at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"

namespace tessera::comm {

struct LaunchOptions {
  int nproc = 1;
  int nnodes = 1;  // elastic: the most nodes (MAX)
  int node_rank = 0;
  // Elastic membership (--nnodes MIN:MAX): between min_nnodes and nnodes
  // nodes; a lost node is dropped, a returning one added at a restart.
  bool elastic = false;
  int min_nnodes = 1;
  Timeout elastic_wait = Timeout(10000);  // first attempt: wait this long for MAX nodes once MIN joined
  // Required when nnodes > 1; optional on one node (port 0 = ephemeral).
  std::string master_addr;
  int master_port = 0;
  std::string token;  // empty: TESSERA_JOB_TOKEN, else generated (node 0)
  std::vector<std::string> command;
  Timeout job_timeout = Timeout(0);  // 0: no limit
  Timeout grace = Timeout(5000);
  Timeout connect_timeout = Timeout(300000);
  bool prefix_output = true;
  // The agent (0 restarts and 0 spares: a failure ends the job).
  int max_restarts = 0;
  int spares = 0;                            // warm spares (need a Tessera worker)
  Timeout heartbeat_timeout = Timeout(30000);  // 0: ranks are not watched
  Timeout heartbeat_interval = Timeout(0);     // 0: min(1 s, timeout / 4)
  std::string events_path;                   // JSON lines; empty: none
  // Where relayed output goes (tests may redirect).
  int stdout_fd = 1;
  int stderr_fd = 2;
};

struct RankOutcome {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;      // reaped
  int exit_code = -1;       // when it exited normally
  int signal = 0;           // when a signal killed it
  bool signalled_by_launcher = false;
  bool first_failure = false;  // the failure that stopped the job
  double silent_s = 0;         // > 0: killed after this long without a heartbeat
  double runtime_s = 0;
};

struct LaunchResult {
  int exit_code = 0;
  std::string reason;  // empty on success; e.g. "rank 2 exited with code 3"
  std::vector<RankOutcome> ranks;  // of the last attempt
  int restarts = 0;                // restarts that happened (failures, lost nodes)
  int attempts = 1;                // attempts this agent ran (elastic: also joins)
};

// Parses "host:port" or "[v6]:port".
Status ParseHostPort(const std::string& text, std::string* host, int* port);

// Runs the job to completion. A non-OK Status means the job could not be
// started (bad options, command not found, store unavailable); failures of
// the ranks are reported in the LaunchResult.
StatusOr<LaunchResult> RunLaunch(const LaunchOptions& options);

// The summary table printed when a job fails.
std::string FormatLaunchSummary(const LaunchResult& result);

}  // namespace tessera::comm
