// The launcher's agent (internal; RunLaunch in launcher.h drives it): runs
// the local ranks of one node attempt after attempt.
//   - Attempt g starts nproc ranks with the job environment plus
//     TESSERA_RESTART_COUNT=g, TORCHELASTIC_RESTART_COUNT=g,
//     TESSERA_MAX_RESTARTS, TESSERA_LAST_FAILURE (g >= 1: one-line JSON
//     {"node","rank","pid","cause","detected_at","attempt"} of the failure
//     that ended attempt g-1), TESSERA_EVENTS_FILE (with --events) and the
//     heartbeat socket (heartbeat.h). Ranks connect to the store under
//     "attempt<g>/" (job_env.h), a fresh rendezvous.
//   - A rank fails when it exits non-zero, dies by a signal, or sends no
//     heartbeat for heartbeat_timeout after its first one (it is SIGKILLed:
//     "rank 3 (pid N) silent for 2.0 s: treating as hung"). The group is
//     stopped (SIGTERM + SIGCONT, SIGKILL after the grace). If restarts
//     remain the group starts again, the failed rank's slot going to a
//     ready spare if there is one ("rank 3 replaced by spare (pid N)"),
//     and a new spare is started while restarts remain; otherwise "giving
//     up after N restarts" and the failure's exit code.
//   - Multi-node (NodeSync): a failure is published for attempt g; every
//     agent stops its ranks, then all meet at a barrier before attempt g+1.
//     A node that succeeds waits for every node's success of the same
//     attempt (or a failure, then it restarts too). A lost agent or store
//     ends the job (exit 1) with a message naming the node.
//   - Elastic (--nnodes MIN:MAX, launcher_membership.h; the elastic part is
//     in launcher_agent_elastic.cc): every attempt starts with a
//     rendezvous in which node 0 decides the members; the ranks are
//     numbered over the members' positions. A member whose agent stalls is
//     dropped ("node_lost"; a restart, bounded by max_restarts; fewer than
//     MIN left ends the job, exit 1); a node asking to join is added at the
//     next attempt ("node_joined"; not a restart; at most MAX +
//     max_restarts joins). "membership" is recorded at every attempt.
//     TESSERA_RESTART_COUNT is the attempt (failures and membership
//     changes); restarts count failures and lost nodes only.
//   - Every wait is bounded (grace, connect timeout, heartbeat timeout).
// Not thread-safe; one agent per launcher process.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/comm/job_env.h"
#include "tessera/comm/launcher.h"
#include "tessera/comm/launcher_events.h"
#include "tessera/comm/launcher_membership.h"
#include "tessera/comm/launcher_nodes.h"
#include "tessera/comm/launcher_workers.h"
#include "tessera/comm/tcp_store.h"

namespace tessera::comm::launch {

// The job store as RunLaunch set it up.
struct AgentStore {
  std::string token;
  std::string master_addr;
  int master_port = 0;        // Tessera's store: TESSERA_STORE_ADDR/PORT
  int torch_master_port = 0;  // free for PyTorch's TCPStore: MASTER_PORT
  std::unique_ptr<TcpStoreServer> server;   // node 0
  std::shared_ptr<TcpStoreClient> client;   // multi-node
};

class Agent {
 public:
  Agent(const LaunchOptions& o, EnvMap env, std::string path, AgentStore store, SignalCatcher* catcher);
  ~Agent();
  StatusOr<LaunchResult> Run();

 private:
  enum class Phase { kRunning, kTerminating, kKilling };
  enum class End { kSuccess, kRestartable, kFinal };
  // Why the attempt ends (elastic: whether it counts as a restart).
  enum class Why { kFailure, kLost, kJoin };
  enum class Entry { kAdmitted, kClosed, kFailed };

  EnvMap BaseEnv() const;
  EnvMap RestartVars() const;
  Status SpawnGroup();
  void SpawnSpare();
  End RunAttempt();
  End Classify();
  End AwaitOtherNodes();
  bool PrepareRestart();
  void OnExit(Worker& w);
  void OnLocalFailure(Worker& w, const std::string& cause, const std::string& text);
  void OnRemoteFailure(const std::string& json);
  void CheckSilence(Clock::time_point now);
  void CheckNodes(Clock::time_point now);
  void HandleReports(std::vector<WorkerReport>& reports);
  void HandleSignals();
  void BeginStop(int sig, const std::string& reason);
  std::vector<Worker*> Group() const;
  bool GroupExited() const;
  void EndAttempt();
  void StopSpares();
  // Polls the workers (spares) and the nodes until ready() or the limit.
  Status WaitUntil(const std::function<StatusOr<bool>()>& ready, Timeout limit, const std::string& what);
  void FinishMultiNode(const LaunchResult& result);
  LaunchResult Result();
  // Elastic (launcher_agent_elastic.cc).
  int NodePosition() const;
  int NumNodes() const;
  Entry Rendezvous(int attempt, bool first);
  void Adopt(const Members& m);
  void CheckMembership();
  void OnMembershipEnd(Why why, int node, const std::string& text);
  void ReportLost(int node, double silent_s, const std::string& text);

  const LaunchOptions& o_;
  EnvMap env_;
  AgentStore store_;
  SignalCatcher* catcher_;
  EventLog events_;
  std::unique_ptr<Workers> workers_;
  std::unique_ptr<NodeSync> nodes_;
  Timeout heartbeat_every_{1000};
  Clock::time_point job_start_;
  Clock::time_point job_deadline_;
  Clock::time_point next_node_check_{};

  int gen_ = 0;       // the attempt (TESSERA_RESTART_COUNT)
  int restarts_ = 0;  // failures and lost nodes so far (fixed jobs: gen_)
  int attempts_ = 0;  // attempts this agent ran
  // Elastic membership (members_ lists every node in a fixed job).
  std::unique_ptr<Membership> membership_;
  Members members_;
  bool have_members_ = false;
  std::vector<int> reported_lost_;  // this attempt
  bool join_refusal_said_ = false;
  Why why_ = Why::kFailure;
  // Per attempt.
  Phase phase_ = Phase::kRunning;
  Clock::time_point kill_at_{};
  Worker* first_failure_ = nullptr;
  std::string reason_;
  // Across attempts: the last failure (for TESSERA_LAST_FAILURE, recovery
  // times and the spare) and why the job ended.
  nlohmann::json last_failure_;
  Clock::time_point failure_at_{};
  int failed_local_ = -1;  // local rank that failed last (-1: remote)
  std::optional<RankOutcome> final_failure_;
  std::vector<RankOutcome> last_outcomes_;
  int launcher_signal_ = 0;
  bool timed_out_ = false;
  bool fatal_ = false;  // lost store/agent, spawn failure: no restart
  bool lost_ = false;   // another node's agent or the store was lost (exit 1)
  bool unreaped_ = false;
};

}  // namespace tessera::comm::launch
