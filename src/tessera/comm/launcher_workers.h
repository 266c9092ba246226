// The launcher's process table (internal): the ranks and warm spares of
// one node, their relayed output, and the agent's end of each worker's
// heartbeat socket (heartbeat.h has the worker's side and the protocol).
//   - Spawn starts one worker (fork/exec into its own process group) with
//     stdout/stderr pipes relayed line by line ("[rank R] " or
//     "[spare N] " prefix) and, when heartbeats are on, a Unix socket
//     whose worker end is TESSERA_HEARTBEAT_FD (and TESSERA_SPARE_FD for a
//     spare).
//   - Poll reads everything ready for at most one slice: output, 'H'
//     heartbeats (last_heartbeat), 'S' (spare ready), 'R'+JSON reports.
//   - Assign hands a ready spare a rank: "KEY=VALUE\n...\n\n" on its socket.
//   - Signal sends to the worker's process group, then SIGCONT (so a
//     stopped worker acts on SIGTERM) unless the signal is SIGKILL.
// Not thread-safe: used by the launcher's single loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/job_env.h"
#include "tessera/comm/launcher.h"
#include "tessera/comm/launcher_process.h"

namespace tessera::comm::launch {

using Clock = std::chrono::steady_clock;

struct Worker {
  RankOutcome outcome;  // outcome.rank is -1 for a spare without a rank
  int local = -1;       // local rank; -1 for a spare without a rank
  int attempt = -1;     // the attempt it runs (or was assigned to)
  bool spare = false;   // started as a spare
  int spare_id = -1;
  Clock::time_point start;
  int pipe_fd[2] = {-1, -1};  // read ends: stdout, stderr
  std::unique_ptr<LineRelay> relay[2];
  int ctl_fd = -1;  // the agent's end of the heartbeat socket
  std::string ctl_partial;
  bool in_report = false;
  bool heartbeating = false;  // has sent at least one 'H'
  Clock::time_point last_heartbeat;
  bool spare_ready = false;  // sent 'S' and waits for a rank
  bool ready_announced = false;

  bool PipesClosed() const { return pipe_fd[0] < 0 && pipe_fd[1] < 0; }
};

// A report a worker sent ('R' + JSON object).
struct WorkerReport {
  Worker* worker;
  std::string json;
};

struct WorkersOptions {
  std::string path;  // resolved executable
  std::vector<std::string> command;
  int stdout_fd = 1;
  int stderr_fd = 2;
  bool prefix_output = true;
  int heartbeat_ms = 0;  // 0: no heartbeat socket
};

class Workers {
 public:
  explicit Workers(WorkersOptions o) : o_(std::move(o)) {}
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // Starts a rank (rank >= 0, local >= 0) or a spare (rank = local = -1,
  // env without RANK/LOCAL_RANK and with TESSERA_SPARE=1 added here).
  StatusOr<Worker*> Spawn(EnvMap env, int rank, int local, int attempt);
  // Gives `spare` (ready) a rank; `updates` are the variables it applies.
  Status Assign(Worker& spare, int rank, int local, int attempt, const EnvMap& updates);
  // One poll round (at most `slice`) over every worker's fds and `extra_fd`
  // (the signal pipe; only waited on, not read).
  void Poll(int extra_fd, std::chrono::milliseconds slice, std::vector<WorkerReport>* reports);
  // Reaps exited workers; returns the newly exited ones.
  std::vector<Worker*> Reap();
  void Signal(Worker& w, int sig);
  void ClosePipes(Worker& w);
  // Removes a worker (exited, or abandoned) from the table.
  void Forget(Worker* w);
  const std::vector<std::unique_ptr<Worker>>& all() const { return all_; }

 private:
  void ReadPipe(Worker& w, int which);
  void ReadControl(Worker& w, std::vector<WorkerReport>* reports);
  std::string Prefix(const Worker& w) const;

  WorkersOptions o_;
  std::vector<std::unique_ptr<Worker>> all_;
  int next_spare_id_ = 0;
};

}  // namespace tessera::comm::launch
