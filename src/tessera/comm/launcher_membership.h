// Elastic membership of the launcher's agents (internal; `tessera launch
// --nnodes MIN:MAX`), through node 0's job store. Node 0's agent is the
// leader: it hosts the store, must stay, and decides every attempt's
// members; the others follow. Keys (under "tessera-launch/"):
//   incarnation           counter: each agent process takes a fresh number
//                         (a returning host is a new incarnation of its node).
//   gen<g>/ready/<node>   the incarnation of the node's agent that wants to
//                         run in attempt g.
//   gen<g>/members        the leader's decision, JSON {"attempt","nodes",
//                         "incarnations","restarts","joins","cause"} or
//                         {"attempt","abort"}; written once.
//   current               the last attempt decided (a starting agent joins
//                         the one after it).
//   join/<node>           a join request: the incarnation of an agent that
//                         is not a member; the leader notices it while the
//                         attempt runs and ends the attempt (gen<g>/change).
//   gen<g>/change         JSON {"kind":"lost"|"join","node","text"}: attempt
//                         g ends for a membership change (any agent may
//                         publish a lost node; the leader publishes joins).
//   closed                JSON {"exit_code","reason"}: the job is over;
//                         agents waiting to be admitted stop.
// The leader decides attempt g once every live node it expects (the
// previous members and join requesters whose agents beat) has arrived, or
// MAX nodes have, or (first attempt only) MIN have and the settle wait is
// over; at the caller's deadline it decides with whoever arrived (MIN at
// least, else an abort). Liveness comes from NodeSync (launcher_nodes.h).
// Every call is a few store round trips (bounded by the client's operation
// timeout); callers poll. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/launcher_nodes.h"
#include "tessera/comm/tcp_store.h"

namespace tessera::comm::launch {

// One attempt's members as the leader decided them.
struct Members {
  int attempt = 0;
  std::vector<int> nodes;             // --node-rank of each member, ascending
  std::vector<int64_t> incarnations;  // the admitted agent of each
  int restarts = 0;                   // failures and lost nodes before this attempt
  int joins = 0;                      // growths before this attempt
  nlohmann::json cause;               // why the previous attempt ended (null: first)
  std::string abort;                  // non-empty: the job cannot continue (why)

  int Position(int node) const;         // -1: not a member
  int64_t Incarnation(int node) const;  // -1: not a member
  nlohmann::json ToJson() const;
  static Members FromJson(const nlohmann::json& j);
};

// What the leader knows when it decides an attempt.
struct Proposal {
  int attempt = 0;
  const Members* previous = nullptr;  // null: the job's first attempt
  bool counts_as_restart = false;     // a failure or a lost node ended the previous one
  nlohmann::json cause;
  bool settle_passed = false;    // first attempt: stop waiting for more than MIN
  bool deadline_passed = false;  // decide with whoever arrived
  int max_restarts = 0;
};

class Membership {
 public:
  Membership(std::shared_ptr<TcpStoreClient> client, NodeSync* nodes, int node_rank, int min_nodes, int max_nodes);

  // Takes this agent's incarnation number.
  Status Register();
  int64_t incarnation() const { return incarnation_; }
  // The attempt a starting agent enters: 0 on node 0 or before the first
  // decision; otherwise the one after `current`, with a join request.
  StatusOr<int> EntryAttempt();
  Status RequestJoin();
  Status Arrive(int attempt);

  // Leader: one look at the arrivals; publishes and returns the decision
  // (possibly an abort) once it can be made, nullopt to keep waiting.
  StatusOr<std::optional<Members>> Decide(const Proposal& p);
  // The decision published for `attempt`, if any.
  StatusOr<std::optional<Members>> Published(int attempt);
  // Leader, while `current` runs: a live node asking to join (not a member,
  // or a newer incarnation of one), if any.
  StatusOr<std::optional<int>> PendingJoin(const Members& current);

  Status PublishChange(int attempt, const nlohmann::json& change);
  StatusOr<std::optional<nlohmann::json>> Change(int attempt);
  Status Close(const nlohmann::json& how);
  StatusOr<std::optional<nlohmann::json>> Closed();

 private:
  StatusOr<std::optional<std::string>> Get(const std::string& key);
  StatusOr<std::optional<int64_t>> GetInt(const std::string& key);

  std::shared_ptr<TcpStoreClient> client_;
  NodeSync* nodes_;
  int node_rank_;
  int min_nodes_;
  int max_nodes_;
  int64_t incarnation_ = -1;
};

}  // namespace tessera::comm::launch
