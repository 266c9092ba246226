// The agent's watch loop over one attempt (see launcher_agent.h): output,
// exits, heartbeats, signals, the job timeout and the other nodes.
#include <signal.h>

#include <algorithm>

#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/comm/launcher_agent.h"

namespace tessera::comm::launch {
namespace {

constexpr auto kPollSlice = std::chrono::milliseconds(100);
constexpr auto kRemoteCheckEvery = std::chrono::milliseconds(250);
constexpr auto kDrainAfterExit = std::chrono::milliseconds(1000);
constexpr auto kReapAfterKill = std::chrono::milliseconds(5000);

bool Failed(const RankOutcome& r) { return r.exited && (r.signal != 0 || r.exit_code != 0); }

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

std::vector<Worker*> Agent::Group() const {
  std::vector<Worker*> group;
  for (const auto& w : workers_->all()) {
    if (w->local >= 0 && w->attempt == gen_) group.push_back(w.get());
  }
  return group;
}

bool Agent::GroupExited() const {
  for (Worker* w : Group()) {
    if (!w->outcome.exited) return false;
  }
  return true;
}

void Agent::BeginStop(int sig, const std::string& reason) {
  if (phase_ != Phase::kRunning) return;
  reason_ = reason;
  if (!GroupExited()) {
    events_.Say(fmt::format("{}; sending {} to the running ranks (SIGKILL after {} ms)", reason, SignalName(sig),
                            o_.grace.count()));
  }
  phase_ = Phase::kTerminating;
  kill_at_ = Clock::now() + o_.grace;
  for (Worker* w : Group()) workers_->Signal(*w, sig);
}

void Agent::OnLocalFailure(Worker& w, const std::string& cause, const std::string& text) {
  first_failure_ = &w;
  why_ = Why::kFailure;
  w.outcome.first_failure = true;
  failure_at_ = Clock::now();
  failed_local_ = w.local;
  last_failure_ = {{"node", o_.node_rank}, {"rank", w.outcome.rank}, {"pid", w.outcome.pid},
                   {"cause", cause},        {"detected_at", UnixSeconds()}, {"attempt", gen_}};
  nlohmann::json fields = last_failure_;
  fields["failed_node"] = o_.node_rank;
  events_.Record("failure", fields);
  if (nodes_) {
    nlohmann::json published = last_failure_;
    published["text"] = text;
    Status st = nodes_->ReportFailure(gen_, published.dump());
    if (!st.ok()) TLOG(WARN, "could not report the failure to the other nodes: {}", st.ToString());
  }
  BeginStop(SIGTERM, text);
}

void Agent::OnRemoteFailure(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) j = {{"text", json}};
  const std::string text = j.value("text", std::string("?"));
  j.erase("text");
  last_failure_ = j;
  why_ = Why::kFailure;
  failure_at_ = Clock::now();
  failed_local_ = -1;
  nlohmann::json fields = j;
  fields["failed_node"] = j.value("node", -1);
  fields.erase("node");
  events_.Record("failure", fields);
  BeginStop(SIGTERM, fmt::format("another node failed (node {}: {})", j.value("node", -1), text));
}

void Agent::OnExit(Worker& w) {
  if (w.local < 0) {  // a spare: keep going without it
    events_.Say(fmt::format("spare (pid {}) exited ({}); {} spare(s) left", w.outcome.pid,
                            w.outcome.signal != 0 ? SignalName(w.outcome.signal)
                                                  : fmt::format("exit {}", w.outcome.exit_code),
                            std::count_if(workers_->all().begin(), workers_->all().end(), [](const auto& x) {
                              return x->local < 0 && !x->outcome.exited;
                            })));
    return;
  }
  if (w.attempt != gen_ || !Failed(w.outcome) || phase_ != Phase::kRunning) return;
  const RankOutcome& r = w.outcome;
  if (r.signal != 0) {
    OnLocalFailure(w, "killed by " + SignalName(r.signal),
                   fmt::format("rank {} (pid {}) was killed by {}", r.rank, r.pid, SignalName(r.signal)));
  } else {
    OnLocalFailure(w, fmt::format("exit {}", r.exit_code),
                   fmt::format("rank {} (pid {}) exited with code {}", r.rank, r.pid, r.exit_code));
  }
}

void Agent::CheckSilence(Clock::time_point now) {
  if (o_.heartbeat_timeout.count() <= 0 || phase_ != Phase::kRunning) return;
  for (Worker* w : Group()) {
    if (w->outcome.exited || !w->heartbeating || now - w->last_heartbeat <= o_.heartbeat_timeout) continue;
    const double silent = std::chrono::duration<double>(now - w->last_heartbeat).count();
    w->outcome.silent_s = silent;
    workers_->Signal(*w, SIGKILL);  // hung (or stopped): it would not act on SIGTERM
    const std::string text =
        fmt::format("rank {} (pid {}) silent for {:.1f} s: treating as hung", w->outcome.rank, w->outcome.pid, silent);
    events_.Say(text);
    OnLocalFailure(*w, fmt::format("silent {:.1f} s", silent), text);
    return;
  }
}

void Agent::CheckNodes(Clock::time_point now) {
  if (!nodes_ || now < next_node_check_) return;
  next_node_check_ = now + kRemoteCheckEvery;
  Status alive = nodes_->Tick();
  if (!alive.ok()) {
    if (phase_ == Phase::kRunning) {
      fatal_ = lost_ = true;
      if (nodes_->lost_node() >= 0) {
        events_.Record("agent_lost", {{"lost_node", nodes_->lost_node()}, {"attempt", gen_}});
      }
      BeginStop(SIGTERM, alive.message());
    }
    return;
  }
  if (phase_ != Phase::kRunning) return;
  if (membership_) {
    CheckMembership();
    if (phase_ != Phase::kRunning) return;
  }
  auto failed = nodes_->CheckFailure(gen_);
  if (!failed.ok()) {
    fatal_ = lost_ = true;
    BeginStop(SIGTERM, failed.status().message());
  } else if (failed->has_value()) {
    nlohmann::json j = nlohmann::json::parse(**failed, nullptr, false);
    if (j.is_object() && j.value("node", -1) == o_.node_rank) return;  // our own report
    OnRemoteFailure(**failed);
  }
}

void Agent::HandleReports(std::vector<WorkerReport>& reports) {
  for (const auto& w : workers_->all()) {
    if (!w->spare_ready || w->ready_announced) continue;
    w->ready_announced = true;
    events_.Record("spare_ready", {{"pid", w->outcome.pid}, {"spare", w->spare_id}},
                   fmt::format("spare {} (pid {}) is ready", w->spare_id, w->outcome.pid));
  }
  for (const WorkerReport& r : reports) {
    nlohmann::json j = nlohmann::json::parse(r.json, nullptr, false);
    if (!j.is_object()) {
      events_.Say(fmt::format("ignoring a malformed report from pid {}", r.worker->outcome.pid));
      continue;
    }
    j["rank"] = r.worker->outcome.rank;
    j["pid"] = r.worker->outcome.pid;
    j["attempt"] = gen_;
    std::string after;
    if (gen_ > 0) {
      j["recovery_s"] = Since(failure_at_);
      after = fmt::format(", {:.1f} s after the failure", j["recovery_s"].get<double>());
    }
    std::string source = j.value("source", std::string("?"));
    events_.Record("restored", j,
                   fmt::format("rank {} restored from {} at step {} ({} steps lost{})", r.worker->outcome.rank,
                               source, j.value("step", int64_t{-1}), j.value("steps_lost", int64_t{-1}), after));
  }
  reports.clear();
}

void Agent::HandleSignals() {
  for (int sig : catcher_->Drain()) {
    if (phase_ == Phase::kRunning) {
      launcher_signal_ = sig;
      BeginStop(sig, fmt::format("received {}", SignalName(sig)));
    } else if (phase_ != Phase::kKilling) {
      if (launcher_signal_ == 0) launcher_signal_ = sig;
      events_.Say(fmt::format("received {} again; sending SIGKILL", SignalName(sig)));
      for (Worker* w : Group()) workers_->Signal(*w, SIGKILL);
      phase_ = Phase::kKilling;
      kill_at_ = Clock::now();
    }
  }
}

Agent::End Agent::RunAttempt() {
  std::optional<Clock::time_point> drain_until;
  std::vector<WorkerReport> reports;
  for (;;) {
    workers_->Poll(catcher_->read_fd(), kPollSlice, &reports);
    HandleReports(reports);
    HandleSignals();
    for (Worker* w : workers_->Reap()) OnExit(*w);
    const auto now = Clock::now();
    if (phase_ == Phase::kRunning && now >= job_deadline_) {
      timed_out_ = true;
      BeginStop(SIGTERM, fmt::format("the job exceeded --timeout ({} s)", o_.job_timeout.count() / 1000.0));
    }
    CheckSilence(now);
    CheckNodes(now);
    if (phase_ == Phase::kTerminating && now >= kill_at_ && !GroupExited()) {
      events_.Say(fmt::format("ranks still running {} ms after the stop began; sending SIGKILL", o_.grace.count()));
      for (Worker* w : Group()) workers_->Signal(*w, SIGKILL);
      phase_ = Phase::kKilling;
      kill_at_ = now;
    }
    if (GroupExited()) {
      bool closed = true;
      for (Worker* w : Group()) closed = closed && w->PipesClosed();
      if (closed) break;
      if (!drain_until) drain_until = now + kDrainAfterExit;
      if (now >= *drain_until) {  // stray grandchildren hold the pipes: stop relaying
        for (Worker* w : Group()) workers_->ClosePipes(*w);
        break;
      }
    } else if (phase_ == Phase::kKilling && now >= kill_at_ + kReapAfterKill) {
      events_.Say("some ranks did not exit after SIGKILL (uninterruptible sleep?); giving up on them");
      for (Worker* w : Group()) workers_->ClosePipes(*w);
      unreaped_ = true;
      fatal_ = true;
      break;
    }
  }
  return Classify();
}

Agent::End Agent::Classify() {
  if (launcher_signal_ != 0 || timed_out_ || fatal_) return End::kFinal;
  if (!reason_.empty()) return End::kRestartable;  // a local or another node's failure
  return End::kSuccess;
}

Status Agent::WaitUntil(const std::function<StatusOr<bool>()>& ready, Timeout limit, const std::string& what) {
  const auto deadline = Clock::now() + limit;
  std::vector<WorkerReport> reports;
  for (;;) {
    StatusOr<bool> done = ready();
    if (!done.ok()) return done.status();
    if (*done) return Status::Ok();
    if (nodes_) {
      Status alive = nodes_->Tick();
      if (!alive.ok()) {
        if (nodes_->lost_node() >= 0) {
          events_.Record("agent_lost", {{"lost_node", nodes_->lost_node()}, {"attempt", gen_}});
        }
        return alive;
      }
    }
    if (Clock::now() >= deadline) {
      return DeadlineExceeded("{}: not done within {:.1f} s", what, limit.count() / 1000.0);
    }
    workers_->Poll(catcher_->read_fd(), std::chrono::milliseconds(100), &reports);
    HandleReports(reports);
    for (Worker* w : workers_->Reap()) OnExit(*w);
    for (int sig : catcher_->Drain()) {
      launcher_signal_ = sig;
      return Aborted("received {} while waiting for {}", SignalName(sig), what);
    }
  }
}

}  // namespace tessera::comm::launch
