// Multi-node coordination of the launcher's agents (internal), through
// the job store that node 0's agent hosts. Keys (under "tessera-launch/"):
//   agent/<node>          a counter each agent increments every beat; an
//                         agent whose counter stops moving for longer than
//                         the heartbeat timeout (after it was first seen)
//                         is stalled, unless it finished (done/<node>).
//                         Fixed jobs: Tick reports a stalled member lost (an
//                         error, latched). Elastic jobs: only node 0 (the
//                         store's host) is latched; other stalled members
//                         are listed by Stalled() for the agent to drop, and
//                         a node whose counter moves again is alive again
//                         (a returning host continues the same counter).
//   gen<g>/failed         JSON {"node","rank","pid","cause","detected_at",
//                         "text"} of the failure that ends attempt g; every
//                         agent polls it and stops its ranks.
//   gen<g>/arrived        counter: agents ready to start attempt g (g >= 1),
//                         a barrier so all nodes restart in lockstep (fixed
//                         jobs; elastic ones use launcher_membership.h).
//   gen<g>/done/<node>    this node's ranks all exited 0 in attempt g.
//   done/<node>           this agent is finished (node 0 keeps the store up
//                         until every member is).
// AllDone/AllFinished/AllArrived cover the members (SetMembers; default:
// every node 0..nnodes-1). Every call is one store round trip or a few
// (bounded by the client's operation timeout); callers poll them from their
// loop. Not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/tcp_store.h"

namespace tessera::comm::launch {

class NodeSync {
 public:
  // heartbeat_timeout 0: agents are not watched. nnodes: elastic, the most.
  NodeSync(std::shared_ptr<TcpStoreClient> client, int node_rank, int nnodes, Timeout heartbeat_timeout,
           Timeout beat_every, bool elastic = false);

  // Beats for this agent and checks the others (rate-limited: call often).
  // Unavailable "node N's agent stopped responding (...)" (fixed: any
  // member; elastic: node 0) or "lost the job store: ...".
  Status Tick();
  // The node whose agent was found lost (-1: none).
  int lost_node() const { return lost_node_; }
  // The nodes of the current attempt (sorted); default every node.
  void SetMembers(std::vector<int> nodes) { members_ = std::move(nodes); }
  const std::vector<int>& members() const { return members_; }
  // Members (not this node) whose agent stalled and did not finish, as of
  // the last check, with how long each has been silent.
  const std::vector<std::pair<int, double>>& Stalled() const { return stalled_; }
  // The node's agent was seen beating within the heartbeat timeout (this
  // node: always; timeout 0: seen at all).
  bool Alive(int node) const;

  Status ReportFailure(int gen, const std::string& json);
  // The failure reported for attempt `gen`, if any; an error if the store
  // is lost.
  StatusOr<std::optional<std::string>> CheckFailure(int gen);

  Status Arrive(int gen);
  StatusOr<bool> AllArrived(int gen);
  Status MarkDone(int gen);
  StatusOr<bool> AllDone(int gen);
  Status MarkFinished();
  StatusOr<bool> AllFinished();

 private:
  StatusOr<bool> Exists(const std::string& key);
  StatusOr<bool> AllExist(const std::string& pattern);  // "{}" = member node index
  Status Check(std::chrono::steady_clock::time_point now);

  std::shared_ptr<TcpStoreClient> client_;
  int node_rank_;
  int nnodes_;
  bool elastic_;
  std::vector<int> members_;
  std::vector<std::pair<int, double>> stalled_;
  Timeout timeout_;
  Timeout beat_every_;
  std::chrono::steady_clock::time_point next_beat_{};
  std::chrono::steady_clock::time_point next_check_{};
  std::vector<int64_t> last_count_;
  std::vector<std::chrono::steady_clock::time_point> last_change_;
  int lost_node_ = -1;
};

}  // namespace tessera::comm::launch
