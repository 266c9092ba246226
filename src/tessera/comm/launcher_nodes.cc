// Multi-node coordination of the launcher's agents: see launcher_nodes.h.
#include "tessera/comm/launcher_nodes.h"

#include <algorithm>

#include <fmt/format.h>

namespace tessera::comm::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kCheckEvery = std::chrono::milliseconds(250);
constexpr const char* kPrefix = "tessera-launch/";

std::string Key(const std::string& rest) { return kPrefix + rest; }

Status Lost(const Status& st) { return Unavailable("lost the job store: {}", st.message()); }

}  // namespace

NodeSync::NodeSync(std::shared_ptr<TcpStoreClient> client, int node_rank, int nnodes, Timeout heartbeat_timeout,
                   Timeout beat_every, bool elastic)
    : client_(std::move(client)),
      node_rank_(node_rank),
      nnodes_(nnodes),
      elastic_(elastic),
      timeout_(heartbeat_timeout),
      beat_every_(beat_every),
      last_count_(nnodes, -1),
      last_change_(nnodes) {
  for (int node = 0; node < nnodes; ++node) members_.push_back(node);
}

Status NodeSync::Tick() {
  if (lost_node_ >= 0) {
    return Unavailable("node {}'s agent stopped responding (no agent heartbeat for {:.1f} s)", lost_node_,
                       timeout_.count() / 1000.0);
  }
  const auto now = Clock::now();
  if (now >= next_beat_) {
    next_beat_ = now + beat_every_;
    auto n = client_->Add(Key(fmt::format("agent/{}", node_rank_)), 1);
    if (!n.ok()) return Lost(n.status());
  }
  if (now < next_check_) return Status::Ok();
  next_check_ = now + kCheckEvery;
  return Check(now);
}

bool NodeSync::Alive(int node) const {
  if (node == node_rank_) return true;
  if (node < 0 || node >= nnodes_ || last_count_[node] < 0) return false;
  return timeout_.count() <= 0 || Clock::now() - last_change_[node] <= timeout_;
}

Status NodeSync::Check(Clock::time_point now) {
  stalled_.clear();
  for (int node = 0; node < nnodes_; ++node) {
    if (node == node_rank_) continue;
    auto v = client_->GetString(Key(fmt::format("agent/{}", node)), Timeout(0));
    if (!v.ok()) {
      if (v.status().code() == StatusCode::kDeadlineExceeded) continue;  // not joined yet
      return Lost(v.status());
    }
    int64_t count = -1;
    if (!ParseCounter(StringToBytes(*v), &count)) continue;
    if (count != last_count_[node]) {  // alive (again: a returning host continues the counter)
      last_count_[node] = count;
      last_change_[node] = now;
      continue;
    }
    const bool member = std::find(members_.begin(), members_.end(), node) != members_.end();
    if (timeout_.count() <= 0 || now - last_change_[node] <= timeout_ || !member) continue;
    // An agent that finished (its ranks are done) stops beating: not lost.
    auto finished = Exists(Key(fmt::format("done/{}", node)));
    if (!finished.ok()) return finished.status();
    if (*finished) {
      last_change_[node] = now;
      continue;
    }
    const double silent = std::chrono::duration<double>(now - last_change_[node]).count();
    if (elastic_ && node != 0) {  // the agent drops it (launcher_membership.h)
      stalled_.emplace_back(node, silent);
      continue;
    }
    lost_node_ = node;
    return Unavailable("node {}'s agent stopped responding (no agent heartbeat for {:.1f} s)", node, silent);
  }
  return Status::Ok();
}

Status NodeSync::ReportFailure(int gen, const std::string& json) {
  Status st = client_->SetString(Key(fmt::format("gen{}/failed", gen)), json);
  return st.ok() ? st : Lost(st);
}

StatusOr<std::optional<std::string>> NodeSync::CheckFailure(int gen) {
  auto v = client_->GetString(Key(fmt::format("gen{}/failed", gen)), Timeout(0));
  if (v.ok()) return std::optional<std::string>(*v);
  if (v.status().code() == StatusCode::kDeadlineExceeded) return std::optional<std::string>();
  return Lost(v.status());
}

Status NodeSync::Arrive(int gen) {
  auto n = client_->Add(Key(fmt::format("gen{}/arrived", gen)), 1);
  return n.ok() ? Status::Ok() : Lost(n.status());
}

StatusOr<bool> NodeSync::AllArrived(int gen) {
  auto n = client_->Add(Key(fmt::format("gen{}/arrived", gen)), 0);
  if (!n.ok()) return Lost(n.status());
  return *n >= static_cast<int64_t>(members_.size());
}

StatusOr<bool> NodeSync::Exists(const std::string& key) {
  auto v = client_->GetString(key, Timeout(0));
  if (v.ok()) return true;
  if (v.status().code() == StatusCode::kDeadlineExceeded) return false;
  return Lost(v.status());
}

StatusOr<bool> NodeSync::AllExist(const std::string& pattern) {
  for (int node : members_) {
    auto e = Exists(Key(fmt::format(fmt::runtime(pattern), node)));
    if (!e.ok() || !*e) return e;
  }
  return true;
}

Status NodeSync::MarkDone(int gen) {
  Status st = client_->SetString(Key(fmt::format("gen{}/done/{}", gen, node_rank_)), "1");
  return st.ok() ? st : Lost(st);
}

StatusOr<bool> NodeSync::AllDone(int gen) { return AllExist(fmt::format("gen{}/done/{{}}", gen)); }

Status NodeSync::MarkFinished() {
  Status st = client_->SetString(Key(fmt::format("done/{}", node_rank_)), "1");
  return st.ok() ? st : Lost(st);
}

StatusOr<bool> NodeSync::AllFinished() { return AllExist("done/{}"); }

}  // namespace tessera::comm::launch
