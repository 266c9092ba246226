// Elastic membership of the launcher's agents: see launcher_membership.h.
#include "tessera/comm/launcher_membership.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <map>

namespace tessera::comm::launch {
namespace {

constexpr const char* kPrefix = "tessera-launch/";

std::string Key(const std::string& rest) { return kPrefix + rest; }

Status Lost(const Status& st) { return Unavailable("lost the job store: {}", st.message()); }

}  // namespace

int Members::Position(int node) const {
  auto it = std::find(nodes.begin(), nodes.end(), node);
  return it == nodes.end() ? -1 : static_cast<int>(it - nodes.begin());
}

int64_t Members::Incarnation(int node) const {
  const int pos = Position(node);
  return pos < 0 || pos >= static_cast<int>(incarnations.size()) ? -1 : incarnations[pos];
}

nlohmann::json Members::ToJson() const {
  if (!abort.empty()) return {{"attempt", attempt}, {"abort", abort}};
  return {{"attempt", attempt},   {"nodes", nodes}, {"incarnations", incarnations},
          {"restarts", restarts}, {"joins", joins}, {"cause", cause}};
}

Members Members::FromJson(const nlohmann::json& j) {
  Members m;
  if (!j.is_object()) {
    m.abort = "malformed membership record in the job store";
    return m;
  }
  m.attempt = j.value("attempt", 0);
  m.abort = j.value("abort", std::string());
  if (!m.abort.empty()) return m;
  const auto& nodes = j.contains("nodes") ? j["nodes"] : nlohmann::json();
  const auto& incarnations = j.contains("incarnations") ? j["incarnations"] : nlohmann::json();
  if (!nodes.is_array() || !incarnations.is_array() || nodes.size() != incarnations.size()) {
    m.abort = "malformed membership record in the job store (nodes/incarnations)";
    return m;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].is_number_integer() || !incarnations[i].is_number_integer()) {
      m.abort = "malformed membership record in the job store (not integers)";
      return m;
    }
    m.nodes.push_back(nodes[i].get<int>());
    m.incarnations.push_back(incarnations[i].get<int64_t>());
  }
  m.restarts = j.value("restarts", 0);
  m.joins = j.value("joins", 0);
  if (j.contains("cause")) m.cause = j["cause"];
  return m;
}

Membership::Membership(std::shared_ptr<TcpStoreClient> client, NodeSync* nodes, int node_rank, int min_nodes,
                       int max_nodes)
    : client_(std::move(client)), nodes_(nodes), node_rank_(node_rank), min_nodes_(min_nodes), max_nodes_(max_nodes) {}

StatusOr<std::optional<std::string>> Membership::Get(const std::string& key) {
  auto v = client_->GetString(Key(key), Timeout(0));
  if (v.ok()) return std::optional<std::string>(*v);
  if (v.status().code() == StatusCode::kDeadlineExceeded) return std::optional<std::string>();
  return Lost(v.status());
}

StatusOr<std::optional<int64_t>> Membership::GetInt(const std::string& key) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> v, Get(key));
  if (!v) return std::optional<int64_t>();
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || ptr != v->data() + v->size()) return std::optional<int64_t>();
  return std::optional<int64_t>(n);
}

Status Membership::Register() {
  auto n = client_->Add(Key("incarnation"), 1);
  if (!n.ok()) return Lost(n.status());
  incarnation_ = *n;
  return Status::Ok();
}

StatusOr<int> Membership::EntryAttempt() {
  if (node_rank_ == 0) return 0;
  TESSERA_ASSIGN_OR_RETURN(std::optional<int64_t> current, GetInt("current"));
  if (!current) return 0;
  TESSERA_RETURN_IF_ERROR(RequestJoin());
  return static_cast<int>(*current) + 1;
}

Status Membership::RequestJoin() {
  Status st = client_->SetString(Key(fmt::format("join/{}", node_rank_)), std::to_string(incarnation_));
  return st.ok() ? st : Lost(st);
}

Status Membership::Arrive(int attempt) {
  Status st = client_->SetString(Key(fmt::format("gen{}/ready/{}", attempt, node_rank_)), std::to_string(incarnation_));
  return st.ok() ? st : Lost(st);
}

StatusOr<std::optional<Members>> Membership::Decide(const Proposal& p) {
  const Members* prev = p.previous;
  std::map<int, int64_t> arrived;
  std::vector<int> expected;
  for (int node = 0; node < max_nodes_; ++node) {
    if (!nodes_->Alive(node)) continue;
    TESSERA_ASSIGN_OR_RETURN(std::optional<int64_t> ready, GetInt(fmt::format("gen{}/ready/{}", p.attempt, node)));
    if (ready) arrived[node] = *ready;
    bool wanted = prev == nullptr || prev->Position(node) >= 0;
    if (!wanted) {
      TESSERA_ASSIGN_OR_RETURN(std::optional<int64_t> join, GetInt(fmt::format("join/{}", node)));
      wanted = join.has_value();
    }
    if (wanted) expected.push_back(node);
  }
  const bool all_expected =
      std::all_of(expected.begin(), expected.end(), [&](int node) { return arrived.count(node) > 0; });
  const int n = static_cast<int>(arrived.size());
  Members m;
  m.attempt = p.attempt;
  if (n < min_nodes_) {
    if (!p.deadline_passed && (prev == nullptr || !all_expected)) return std::optional<Members>();
    m.abort = fmt::format("only {} node(s) {} for attempt {}, fewer than the minimum {} (--nnodes {}:{})", n,
                          prev == nullptr ? "joined within the connect timeout" : "left", p.attempt, min_nodes_,
                          min_nodes_, max_nodes_);
  } else if (n < max_nodes_ && !p.deadline_passed && !(all_expected && (prev != nullptr || p.settle_passed))) {
    return std::optional<Members>();
  } else {
    for (const auto& [node, inc] : arrived) {
      m.nodes.push_back(node);
      m.incarnations.push_back(inc);
    }
    m.cause = p.cause;
    if (prev != nullptr) {
      bool missing = false, added = false;
      for (size_t i = 0; i < prev->nodes.size(); ++i) {
        missing = missing || m.Incarnation(prev->nodes[i]) != prev->incarnations[i];
      }
      for (size_t i = 0; i < m.nodes.size(); ++i) {
        added = added || prev->Incarnation(m.nodes[i]) != m.incarnations[i];
      }
      const bool restart = p.counts_as_restart || missing;
      m.restarts = prev->restarts + (restart ? 1 : 0);
      m.joins = prev->joins + (!restart && added ? 1 : 0);
      if (m.restarts > p.max_restarts) {
        const std::string left = fmt::format("{}", fmt::join(m.nodes, ","));
        m = Members{};
        m.attempt = p.attempt;
        m.abort = fmt::format("giving up after {} restarts: a member was lost (nodes {} left for attempt {})",
                              p.max_restarts, left, p.attempt);
      }
    }
  }
  Status st = client_->SetString(Key(fmt::format("gen{}/members", p.attempt)), m.ToJson().dump());
  if (st.ok()) st = client_->SetString(Key("current"), std::to_string(p.attempt));
  if (!st.ok()) return Lost(st);
  return std::optional<Members>(m);
}

StatusOr<std::optional<Members>> Membership::Published(int attempt) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> v, Get(fmt::format("gen{}/members", attempt)));
  if (!v) return std::optional<Members>();
  return std::optional<Members>(Members::FromJson(nlohmann::json::parse(*v, nullptr, false)));
}

StatusOr<std::optional<int>> Membership::PendingJoin(const Members& current) {
  for (int node = 0; node < max_nodes_; ++node) {
    if (node == node_rank_ || !nodes_->Alive(node)) continue;
    TESSERA_ASSIGN_OR_RETURN(std::optional<int64_t> join, GetInt(fmt::format("join/{}", node)));
    if (join && *join > current.Incarnation(node)) return std::optional<int>(node);
  }
  return std::optional<int>();
}

Status Membership::PublishChange(int attempt, const nlohmann::json& change) {
  Status st = client_->SetString(Key(fmt::format("gen{}/change", attempt)), change.dump());
  return st.ok() ? st : Lost(st);
}

StatusOr<std::optional<nlohmann::json>> Membership::Change(int attempt) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> v, Get(fmt::format("gen{}/change", attempt)));
  if (!v) return std::optional<nlohmann::json>();
  nlohmann::json j = nlohmann::json::parse(*v, nullptr, false);
  if (!j.is_object()) j = {{"kind", "?"}, {"node", -1}, {"text", *v}};
  return std::optional<nlohmann::json>(j);
}

Status Membership::Close(const nlohmann::json& how) {
  Status st = client_->SetString(Key("closed"), how.dump());
  return st.ok() ? st : Lost(st);
}

StatusOr<std::optional<nlohmann::json>> Membership::Closed() {
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> v, Get("closed"));
  if (!v) return std::optional<nlohmann::json>();
  return std::optional<nlohmann::json>(nlohmann::json::parse(*v, nullptr, false));
}

}  // namespace tessera::comm::launch
