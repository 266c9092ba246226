// The agent's elastic membership (--nnodes MIN:MAX; see launcher_agent.h
// and launcher_membership.h): the rendezvous before each attempt, lost
// members and join requests while an attempt runs.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>

#include "tessera/base/logging.h"
#include "tessera/comm/launcher_agent.h"

namespace tessera::comm::launch {
namespace {

// The leader decides at the connect timeout at the latest; followers wait
// this much longer for its decision.
constexpr auto kDecisionSlack = std::chrono::milliseconds(5000);

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

int Agent::NodePosition() const {
  const int pos = members_.Position(o_.node_rank);
  return pos < 0 ? o_.node_rank : pos;
}

int Agent::NumNodes() const { return static_cast<int>(members_.nodes.size()); }

Agent::Entry Agent::Rendezvous(int attempt, bool first) {
  const bool leader = o_.node_rank == 0;
  const auto start = Clock::now();
  const auto deadline = start + o_.connect_timeout;
  const auto settle_at = start + o_.elastic_wait;
  std::optional<Members> prev;
  if (have_members_) prev = members_;
  auto fail = [&](const std::string& why) {
    if (launcher_signal_ == 0) fatal_ = lost_ = true;
    reason_ = why;
    events_.Say(reason_);
    return Entry::kFailed;
  };
  if (first && !leader) {  // the job may be running already: then this is a join
    Status beat = nodes_->Tick();
    if (!beat.ok()) return fail(beat.message());
    auto entry = membership_->EntryAttempt();
    if (!entry.ok()) return fail(entry.status().message());
    attempt = *entry;
    if (attempt > 0)
      events_.Say(fmt::format("node {} asks to join the running job (at attempt {})", o_.node_rank, attempt));
  }
  for (;;) {
    Status st = membership_->Arrive(attempt);
    std::optional<Members> decided;
    std::optional<nlohmann::json> closed;
    if (st.ok() && leader) {
      Proposal p;
      p.attempt = attempt;
      p.previous = prev ? &*prev : nullptr;
      p.counts_as_restart = why_ != Why::kJoin;
      p.cause = first ? nlohmann::json() : last_failure_;
      p.max_restarts = o_.max_restarts;
      st = WaitUntil(
          [&]() -> StatusOr<bool> {
            const auto now = Clock::now();
            p.settle_passed = now >= settle_at;
            p.deadline_passed = now >= deadline;
            TESSERA_ASSIGN_OR_RETURN(decided, membership_->Decide(p));
            return decided.has_value();
          },
          o_.connect_timeout + kDecisionSlack, fmt::format("the members of attempt {}", attempt));
    } else if (st.ok()) {
      const auto left = std::chrono::duration_cast<Timeout>(deadline + kDecisionSlack - Clock::now());
      st = WaitUntil(
          [&]() -> StatusOr<bool> {
            TESSERA_ASSIGN_OR_RETURN(closed, membership_->Closed());
            if (closed.has_value()) return true;
            TESSERA_ASSIGN_OR_RETURN(decided, membership_->Published(attempt));
            return decided.has_value();
          },
          std::max(left, Timeout(0)), fmt::format("node 0 admitting node {} to attempt {}", o_.node_rank, attempt));
    }
    if (!st.ok()) return fail(st.message());
    if (closed.has_value()) {
      const std::string how = closed->is_object() ? closed->value("reason", std::string()) : std::string();
      if (!have_members_) {
        events_.Say(fmt::format("the job ended before node {} was admitted{}{}; nothing to do", o_.node_rank,
                                how.empty() ? "" : ": ", how));
        return Entry::kClosed;
      }
      return fail(fmt::format("the job ended on node 0 while node {} waited to restart{}{}", o_.node_rank,
                              how.empty() ? "" : ": ", how));
    }
    if (!decided->abort.empty()) return fail(decided->abort);
    if (decided->Incarnation(o_.node_rank) == membership_->incarnation()) {
      Adopt(*decided);
      return Entry::kAdmitted;
    }
    // Arrived after node 0 decided: ask to join the next attempt.
    events_.Say(fmt::format("node {} is not a member of attempt {} (nodes {}); asking to join the next one",
                            o_.node_rank, decided->attempt, fmt::join(decided->nodes, ",")));
    attempt = decided->attempt + 1;
    st = membership_->RequestJoin();
    if (!st.ok()) return fail(st.message());
    if (Clock::now() >= deadline) {
      return fail(fmt::format("node {} was not admitted within the connect timeout ({:.1f} s)", o_.node_rank,
                              o_.connect_timeout.count() / 1000.0));
    }
  }
}

void Agent::Adopt(const Members& m) {
  std::vector<int> gone, added;
  if (have_members_) {
    for (size_t i = 0; i < members_.nodes.size(); ++i) {
      if (m.Incarnation(members_.nodes[i]) != members_.incarnations[i]) gone.push_back(members_.nodes[i]);
    }
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      if (members_.Incarnation(m.nodes[i]) != m.incarnations[i]) added.push_back(m.nodes[i]);
    }
  }
  for (int node : gone) {
    if (Contains(reported_lost_, node)) continue;
    events_.Record("node_lost", {{"lost_node", node}, {"attempt", gen_}},
                   fmt::format("node {} is no longer a member (attempt {})", node, m.attempt));
  }
  for (int node : added) {
    events_.Record("node_joined", {{"joined_node", node}, {"attempt", m.attempt}},
                   fmt::format("node {} joined the job (attempt {})", node, m.attempt));
  }
  members_ = m;
  have_members_ = true;
  gen_ = m.attempt;
  restarts_ = m.restarts;
  nodes_->SetMembers(m.nodes);
  reported_lost_.clear();
  join_refusal_said_ = false;
  if (!m.cause.is_null()) last_failure_ = m.cause;
  if (failure_at_ == Clock::time_point{}) failure_at_ = Clock::now();
  const int world = NumNodes() * o_.nproc;
  events_.Record("membership",
                 {{"nodes", m.nodes},
                  {"world_size", world},
                  {"attempt", gen_},
                  {"restarts", restarts_},
                  {"joins", m.joins},
                  {"node_position", NodePosition()}},
                 fmt::format("attempt {}: nodes {} (world size {}; this node is node {} of {})", gen_,
                             fmt::join(m.nodes, ","), world, NodePosition(), NumNodes()));
}

void Agent::OnMembershipEnd(Why why, int node, const std::string& text) {
  why_ = why;
  failure_at_ = Clock::now();
  failed_local_ = -1;
  last_failure_ = {{"node", node},
                   {"rank", -1},
                   {"pid", -1},
                   {"cause", fmt::format("node {} {}", node, why == Why::kJoin ? "joined" : "lost")},
                   {"detected_at", UnixSeconds()},
                   {"attempt", gen_}};
  BeginStop(SIGTERM, text);
}

void Agent::ReportLost(int node, double silent_s, const std::string& text) {
  reported_lost_.push_back(node);
  const int live = NumNodes() - static_cast<int>(reported_lost_.size());
  events_.Record("node_lost", {{"lost_node", node}, {"silent_s", silent_s}, {"attempt", gen_}, {"live_nodes", live}},
                 text);
  if (live < o_.min_nnodes) {
    fatal_ = lost_ = true;
    BeginStop(SIGTERM, fmt::format("{}; {} node(s) left, fewer than the minimum {} (--nnodes {}:{})", text, live,
                                   o_.min_nnodes, o_.min_nnodes, o_.nnodes));
    return;
  }
  Status st =
      membership_->PublishChange(gen_, {{"kind", "lost"}, {"node", node}, {"text", text}, {"by", o_.node_rank}});
  if (!st.ok()) TLOG(WARN, "could not tell the other nodes that node {} is lost: {}", node, st.ToString());
  OnMembershipEnd(Why::kLost, node, text + "; continuing without it");
}

void Agent::CheckMembership() {
  if (phase_ != Phase::kRunning) return;
  for (const auto& [node, silent] : nodes_->Stalled()) {
    if (Contains(reported_lost_, node)) continue;
    ReportLost(node, silent,
               fmt::format("node {}'s agent stopped responding (no agent heartbeat for {:.1f} s)", node, silent));
    if (phase_ != Phase::kRunning) return;
  }
  auto change = membership_->Change(gen_);
  if (!change.ok()) {
    fatal_ = lost_ = true;
    BeginStop(SIGTERM, change.status().message());
    return;
  }
  if (change->has_value()) {
    const nlohmann::json& c = **change;
    const int node = c.value("node", -1);
    const bool join = c.value("kind", std::string()) == "join";
    const std::string text = c.value("text", std::string("a membership change"));
    if (!join && !Contains(reported_lost_, node)) {
      reported_lost_.push_back(node);
      events_.Record("node_lost", {{"lost_node", node}, {"attempt", gen_}, {"reported_by", c.value("by", -1)}},
                     fmt::format("node {} reports: {}", c.value("by", -1), text));
    }
    OnMembershipEnd(join ? Why::kJoin : Why::kLost, node, text);
    return;
  }
  if (o_.node_rank != 0) return;
  // The leader admits a node asking to join while every rank still runs.
  for (Worker* w : Group()) {
    if (w->outcome.exited) return;
  }
  auto join = membership_->PendingJoin(members_);
  if (!join.ok()) {
    fatal_ = lost_ = true;
    BeginStop(SIGTERM, join.status().message());
    return;
  }
  if (!join->has_value()) return;
  const int node = **join;
  const int max_joins = o_.nnodes + o_.max_restarts;
  if (members_.joins >= max_joins) {
    if (!join_refusal_said_) {
      events_.Say(
          fmt::format("node {} asks to join, but the job already grew {} times (at most --nnodes MAX + "
                      "--max-restarts = {}): not admitted",
                      node, members_.joins, max_joins));
    }
    join_refusal_said_ = true;
    return;
  }
  const std::string text =
      fmt::format("node {} asks to join (attempt {} runs on nodes {})", node, gen_, fmt::join(members_.nodes, ","));
  Status st = membership_->PublishChange(gen_, {{"kind", "join"}, {"node", node}, {"text", text}, {"by", 0}});
  if (!st.ok()) {
    fatal_ = lost_ = true;
    BeginStop(SIGTERM, st.message());
    return;
  }
  OnMembershipEnd(Why::kJoin, node, text);
}

}  // namespace tessera::comm::launch
