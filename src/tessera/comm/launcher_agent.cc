// The agent's attempt loop: restarts, spares, multi-node lockstep and the
// job's result (see launcher_agent.h; the watch loop is in
// launcher_agent_loop.cc).
#include "tessera/comm/launcher_agent.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "tessera/base/logging.h"

namespace tessera::comm::launch {
namespace {

constexpr auto kSpareStopGrace = std::chrono::milliseconds(1000);
constexpr auto kReapAfterKill = std::chrono::milliseconds(5000);

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Agent::Agent(const LaunchOptions& o, EnvMap env, std::string path, AgentStore store, SignalCatcher* catcher)
    : o_(o), env_(std::move(env)), store_(std::move(store)), catcher_(catcher), events_(o.stderr_fd, o.node_rank) {
  if (o_.heartbeat_timeout.count() > 0) {
    heartbeat_every_ = o_.heartbeat_interval.count() > 0
                           ? o_.heartbeat_interval
                           : std::clamp(o_.heartbeat_timeout / 4, Timeout(10), Timeout(1000));
  }
  WorkersOptions wo;
  wo.path = std::move(path);
  wo.command = o_.command;
  wo.stdout_fd = o_.stdout_fd;
  wo.stderr_fd = o_.stderr_fd;
  wo.prefix_output = o_.prefix_output;
  wo.heartbeat_ms = o_.heartbeat_timeout.count() > 0 ? static_cast<int>(heartbeat_every_.count()) : 0;
  workers_ = std::make_unique<Workers>(std::move(wo));
}

Agent::~Agent() = default;

EnvMap Agent::BaseEnv() const {
  EnvMap env = env_;
  // Variables of an enclosing agent are not ours to pass on.
  for (const char* k : {"TESSERA_HEARTBEAT_FD", "TESSERA_HEARTBEAT_MS", "TESSERA_SPARE", "TESSERA_SPARE_FD",
                        "TESSERA_LAST_FAILURE", "TESSERA_EVENTS_FILE"}) {
    env.erase(k);
  }
  env["WORLD_SIZE"] = std::to_string(NumNodes() * o_.nproc);
  env["LOCAL_WORLD_SIZE"] = std::to_string(o_.nproc);
  env["MASTER_ADDR"] = store_.master_addr;
  // torchrun's meaning for PyTorch (rank 0 serves its TCPStore there);
  // Tessera's ranks find the launcher's store by TESSERA_STORE_ADDR/PORT.
  env["MASTER_PORT"] = std::to_string(store_.torch_master_port);
  env["TESSERA_STORE_ADDR"] = store_.master_addr;
  env["TESSERA_STORE_PORT"] = std::to_string(store_.master_port);
  env["TESSERA_JOB_TOKEN"] = store_.token;
  env["TESSERA_STORE_HOSTED"] = std::string(1, '1');
  env["TESSERA_NODE_RANK"] = std::to_string(NodePosition());
  env["TESSERA_NUM_NODES"] = std::to_string(NumNodes());
  env["TESSERA_MAX_RESTARTS"] = std::to_string(o_.max_restarts);
  if (!events_.path().empty()) env["TESSERA_EVENTS_FILE"] = events_.path();
  // The ranks write into pipes; tell them when those end on a terminal, so
  // a progress bar can redraw in place (LineRelay relays '\r' redraws).
  if (::isatty(o_.stdout_fd)) env["TESSERA_TERMINAL"] = std::string(1, '1');
  return env;
}

EnvMap Agent::RestartVars() const {
  EnvMap vars = {{"TESSERA_RESTART_COUNT", std::to_string(gen_)},
                 {"TORCHELASTIC_RESTART_COUNT", std::to_string(gen_)}};
  if (gen_ > 0) vars["TESSERA_LAST_FAILURE"] = last_failure_.dump();
  // The layout of this attempt (a spare started before a membership change).
  vars["WORLD_SIZE"] = std::to_string(NumNodes() * o_.nproc);
  vars["TESSERA_NODE_RANK"] = std::to_string(NodePosition());
  vars["TESSERA_NUM_NODES"] = std::to_string(NumNodes());
  return vars;
}

void Agent::SpawnSpare() {
  auto w = workers_->Spawn(BaseEnv(), -1, -1, -1);
  if (!w.ok()) {
    events_.Say("could not start a spare: " + w.status().ToString());
    return;
  }
  TLOG(INFO, "started spare {} (pid {})", (*w)->spare_id, (*w)->outcome.pid);
}

Status Agent::SpawnGroup() {
  EnvMap env = BaseEnv();
  for (const auto& [k, v] : RestartVars()) env[k] = v;
  bool used_spare = false;
  for (int local = 0; local < o_.nproc; ++local) {
    const int rank = NodePosition() * o_.nproc + local;
    if (gen_ > 0 && local == failed_local_ && o_.spares > 0) {
      Worker* spare = nullptr;
      for (const auto& w : workers_->all()) {
        if (w->local < 0 && w->spare_ready && !w->outcome.exited) spare = w.get();
      }
      if (spare != nullptr) {
        Status st = workers_->Assign(*spare, rank, local, gen_, RestartVars());
        if (st.ok()) {
          used_spare = true;
          events_.Record("spare_assigned", {{"rank", rank}, {"pid", spare->outcome.pid}, {"attempt", gen_}},
                         fmt::format("rank {} replaced by spare (pid {})", rank, spare->outcome.pid));
          continue;
        }
        events_.Say(st.ToString() + "; starting rank " + std::to_string(rank) + " cold");
        workers_->Signal(*spare, SIGKILL);
      } else {
        events_.Say(fmt::format("no ready spare for rank {}; starting it cold", rank));
      }
    }
    EnvMap mine = env;
    mine["RANK"] = std::to_string(rank);
    mine["LOCAL_RANK"] = std::to_string(local);
    auto w = workers_->Spawn(std::move(mine), rank, local, gen_);
    if (!w.ok()) return w.status();
  }
  if (used_spare && restarts_ < o_.max_restarts) SpawnSpare();  // keep K while restarts remain
  return Status::Ok();
}

void Agent::EndAttempt() {
  last_outcomes_.clear();
  final_failure_.reset();
  for (Worker* w : Group()) {
    last_outcomes_.push_back(w->outcome);
    if (w == first_failure_) final_failure_ = w->outcome;
    if (!w->outcome.exited) continue;  // abandoned after SIGKILL: keep it in the table
    workers_->Forget(w);
  }
  std::sort(last_outcomes_.begin(), last_outcomes_.end(),
            [](const RankOutcome& a, const RankOutcome& b) { return a.rank < b.rank; });
  first_failure_ = nullptr;
}

Agent::End Agent::AwaitOtherNodes() {
  // Without restarts a node's success is final (as before the agent).
  if (o_.max_restarts == 0) return End::kSuccess;
  std::optional<std::string> failed;
  std::optional<nlohmann::json> change;
  Status st = nodes_->MarkDone(gen_);
  if (st.ok()) {
    // Bounded by the other agents' heartbeats (a lost agent ends the wait)
    // and the job timeout; by the connect timeout when agents are unwatched.
    Timeout limit = o_.heartbeat_timeout.count() > 0 ? Timeout(int64_t{1} << 40) : o_.connect_timeout;
    if (o_.job_timeout.count() > 0) {
      limit = std::min(limit, std::chrono::duration_cast<Timeout>(job_deadline_ - Clock::now()));
    }
    st = WaitUntil(
        [&]() -> StatusOr<bool> {
          TESSERA_ASSIGN_OR_RETURN(failed, nodes_->CheckFailure(gen_));
          if (failed.has_value()) return true;
          if (membership_) {  // a member lost or a membership change before everyone finished
            TESSERA_ASSIGN_OR_RETURN(change, membership_->Change(gen_));
            if (change.has_value() || !nodes_->Stalled().empty()) return true;
          }
          return nodes_->AllDone(gen_);
        },
        std::max(limit, Timeout(0)), fmt::format("the other nodes finishing attempt {}", gen_));
  }
  if (!st.ok()) {
    if (launcher_signal_ == 0) fatal_ = lost_ = true;
    reason_ = st.message();
    events_.Say(reason_);
    return End::kFinal;
  }
  if (failed.has_value()) {
    OnRemoteFailure(*failed);
    return End::kRestartable;
  }
  if (membership_ && (change.has_value() || !nodes_->Stalled().empty())) {
    CheckMembership();
    return Classify();
  }
  return End::kSuccess;
}

bool Agent::PrepareRestart() {
  if (why_ == Why::kJoin) {
    events_.Say(fmt::format("restarting the ranks with more nodes (not counted as a restart) after: {}", reason_));
  } else {
    events_.Say(
        fmt::format("restarting the ranks (restart {} of {}) after: {}", restarts_ + 1, o_.max_restarts, reason_));
  }
  phase_ = Phase::kRunning;
  first_failure_ = nullptr;
  if (membership_) {
    const Entry e = Rendezvous(gen_ + 1, /*first=*/false);
    why_ = Why::kFailure;
    if (e == Entry::kAdmitted) reason_.clear();
    return e == Entry::kAdmitted;
  }
  ++gen_;
  ++restarts_;
  reason_.clear();
  if (!nodes_) return true;
  Status st = nodes_->Arrive(gen_);
  if (st.ok()) {
    st = WaitUntil([&] { return nodes_->AllArrived(gen_); }, o_.connect_timeout,
                   fmt::format("every node's agent before attempt {}", gen_));
  }
  if (st.ok()) return true;
  if (launcher_signal_ == 0) fatal_ = lost_ = true;
  reason_ = st.message();
  events_.Say(reason_);
  return false;
}

void Agent::StopSpares() {
  std::vector<Worker*> spares;
  for (const auto& w : workers_->all()) {
    if (w->local < 0) spares.push_back(w.get());
  }
  if (spares.empty()) return;
  for (Worker* w : spares) workers_->Signal(*w, SIGTERM);
  std::vector<WorkerReport> ignored;
  auto all_gone = [&] {
    return std::all_of(spares.begin(), spares.end(), [](Worker* w) { return w->outcome.exited; });
  };
  for (auto stop = Clock::now() + kSpareStopGrace; !all_gone() && Clock::now() < stop;) {
    workers_->Poll(-1, std::chrono::milliseconds(20), &ignored);
    workers_->Reap();
  }
  for (Worker* w : spares) workers_->Signal(*w, SIGKILL);
  for (auto stop = Clock::now() + kReapAfterKill; !all_gone() && Clock::now() < stop;) {
    workers_->Poll(-1, std::chrono::milliseconds(20), &ignored);
    workers_->Reap();
  }
  for (Worker* w : spares) {
    if (w->outcome.exited) workers_->Forget(w);
  }
}

void Agent::FinishMultiNode(const LaunchResult& result) {
  if (!nodes_) return;
  if (membership_ && o_.node_rank == 0) {  // agents still waiting to be admitted stop
    Status closed = membership_->Close({{"exit_code", result.exit_code}, {"reason", result.reason}});
    if (!closed.ok()) events_.Say(closed.message());
  }
  Status st = nodes_->MarkFinished();
  if (!st.ok() || o_.node_rank != 0) return;
  // Node 0 hosts the store: keep it up until every node is done (bounded).
  const int signal_before = launcher_signal_;
  st = WaitUntil(
      [&] {
        if (membership_) {  // elastic: a member lost on the way is not waited for
          std::vector<int> waited;
          for (int node : nodes_->members()) {
            const bool stalled = std::any_of(nodes_->Stalled().begin(), nodes_->Stalled().end(),
                                             [&](const auto& s) { return s.first == node; });
            if (!stalled && std::find(reported_lost_.begin(), reported_lost_.end(), node) == reported_lost_.end()) {
              waited.push_back(node);
            }
          }
          nodes_->SetMembers(std::move(waited));
        }
        return nodes_->AllFinished();
      },
      o_.connect_timeout, "every node finishing");
  launcher_signal_ = signal_before;
  if (!st.ok()) events_.Say("not every node reported completion; closing the job store anyway: " + st.message());
}

LaunchResult Agent::Result() {
  LaunchResult result;
  result.ranks = last_outcomes_;
  result.reason = reason_;
  result.restarts = restarts_;
  result.attempts = attempts_;
  if (launcher_signal_ != 0) {
    result.exit_code = 128 + launcher_signal_;
  } else if (timed_out_) {
    result.exit_code = 124;
  } else if (lost_) {
    result.exit_code = 1;  // another node's agent or the store was lost
  } else if (final_failure_) {
    result.exit_code = final_failure_->signal != 0 ? 128 + final_failure_->signal : final_failure_->exit_code;
  } else if (!reason_.empty()) {
    result.exit_code = 1;  // another node failed
  } else if (unreaped_) {
    result.exit_code = 1;
    result.reason = "ranks could not be reaped";
  }
  return result;
}

StatusOr<LaunchResult> Agent::Run() {
  TESSERA_RETURN_IF_ERROR(events_.Open(o_.events_path));
  job_start_ = Clock::now();
  job_deadline_ = o_.job_timeout.count() > 0 ? job_start_ + o_.job_timeout : Clock::time_point::max();
  for (int node = 0; node < o_.nnodes; ++node) members_.nodes.push_back(node);
  if (store_.client) {
    nodes_ = std::make_unique<NodeSync>(store_.client, o_.node_rank, o_.nnodes, o_.heartbeat_timeout,
                                        heartbeat_every_, o_.elastic);
  }
  if (o_.elastic) {
    membership_ = std::make_unique<Membership>(store_.client, nodes_.get(), o_.node_rank, o_.min_nnodes, o_.nnodes);
  }
  nlohmann::json start = {{"nproc", o_.nproc},
                          {"nnodes", o_.nnodes},
                          {"max_restarts", o_.max_restarts},
                          {"spares", o_.spares},
                          {"heartbeat_timeout_s", o_.heartbeat_timeout.count() / 1000.0},
                          {"command", o_.command}};
  if (o_.elastic) start["min_nnodes"] = o_.min_nnodes;
  events_.Record("start", start);
  if (o_.spares > 0 && o_.max_restarts == 0) {
    events_.Say("--spares has no effect without --max-restarts: no spares started");
  } else {
    for (int i = 0; i < o_.spares; ++i) SpawnSpare();
  }
  Status spawned = Status::Ok();
  Entry entry = Entry::kAdmitted;
  if (membership_) {
    Status st = membership_->Register();
    if (!st.ok()) return st.WithContext(fmt::format("while node {} registers with the job store", o_.node_rank));
    entry = Rendezvous(0, /*first=*/true);
  }
  if (entry == Entry::kAdmitted) {
    spawned = SpawnGroup();
    if (spawned.ok()) {
      ++attempts_;
      TLOG(INFO, "launched {} ranks of `{}` (node {}/{}, store {}:{})", o_.nproc, o_.command[0], NodePosition(),
           NumNodes(), store_.master_addr, store_.master_port);
    }
  }
  for (; entry == Entry::kAdmitted;) {
    if (!spawned.ok()) {
      fatal_ = true;
      BeginStop(SIGTERM, "could not start every rank");
      RunAttempt();
      EndAttempt();
      StopSpares();
      return spawned;
    }
    End end = RunAttempt();
    if (end == End::kSuccess && nodes_) end = AwaitOtherNodes();
    EndAttempt();
    if (end != End::kRestartable) break;
    if (why_ != Why::kJoin && restarts_ >= o_.max_restarts) {
      if (why_ == Why::kLost) lost_ = true;  // exit 1, like a lost agent of a fixed job
      if (o_.max_restarts > 0) {
        events_.Record("gave_up", {{"restarts", restarts_}, {"reason", reason_}},
                       fmt::format("giving up after {} restarts: {}", restarts_, reason_));
      }
      break;
    }
    if (!PrepareRestart()) break;
    spawned = SpawnGroup();
    if (spawned.ok()) {
      ++attempts_;
      events_.Record("restart",
                     {{"attempt", gen_},
                      {"restarts", restarts_},
                      {"max_restarts", o_.max_restarts},
                      {"failed_rank", last_failure_.value("rank", -1)},
                      {"cause", last_failure_.value("cause", std::string("?"))},
                      {"seconds_since_failure", Since(failure_at_)}});
    }
  }
  StopSpares();
  LaunchResult result = Result();
  FinishMultiNode(result);
  if (store_.server) store_.server->Stop();
  events_.Record("done", {{"exit_code", result.exit_code},
                          {"attempts", attempts_},
                          {"restarts", restarts_},
                          {"seconds", Since(job_start_)},
                          {"reason", result.reason}});
  return result;
}

}  // namespace tessera::comm::launch
