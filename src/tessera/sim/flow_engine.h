// FlowEngine: event-driven flow-level network simulation. Links have a
// capacity (bytes/s); flows move bytes over a path of links and share every
// link max-min fairly (progressive filling). After each event the rates are
// updated incrementally and exactly: the flows on the links that arriving or
// leaving flows touch are re-filled against the capacity the other flows
// leave; the result is checked against the max-min condition (every flow has
// a saturated link on which its rate is the largest) on every link involved,
// and flows that violate it join the re-filled set until none does (at worst
// the whole connected component). Remaining bytes are updated lazily (only
// when a flow's rate changes) and completions come from an indexed heap, so
// an event costs about the size of the re-filled set, not the active flows.
//
// Timed tasks (AddTask) take part in dependencies like flows but use no
// link: they finish `duration` after their release (compute in a step DAG).
//
// A flow is released when all flows it depends on have finished (plus its
// own `delay_s`), or at `release_s` if it has none; at release it is routed
// (explicit links, or the PathSelector picks a path for src->dst given the
// current link loads), then starts moving data after the path's latency.
// Single-threaded; one Run() per engine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::sim {

struct FlowResult {
  double release_s = 0;  // dependencies satisfied
  double start_s = 0;    // first byte on the wire (release + path latency)
  double finish_s = 0;
  int path = -1;         // path index chosen by the selector (-1: explicit links)
};

// Chooses a route for a released flow: appends its link ids to `links`,
// sets `latency_s`, returns the path index. `active_flows_on(link)` gives the
// current load of a link: flows routed over it and not yet finished.
class PathSelector {
 public:
  virtual ~PathSelector() = default;
  virtual StatusOr<int> Select(int src, int dst, uint64_t flow_key, const std::function<int(int)>& active_flows_on,
                               const std::vector<bool>& failed, std::vector<int>* links, double* latency_s) = 0;
  // All candidate paths (for per-packet adaptive routing in the packet engine).
  virtual int NumPaths(int src, int dst) const = 0;
  virtual double Path(int src, int dst, int index, std::vector<int>* links) const = 0;
  virtual bool adaptive() const = 0;
};

struct FlowEndpoints {
  int src = -1, dst = -1;  // -1 for explicit-route flows
  double bytes = 0;
};

// What a collective schedule needs from an engine (flow- or packet-level).
class FlowSink {
 public:
  virtual ~FlowSink() = default;
  virtual int AddRoutedFlow(int src, int dst, double bytes, double release_s = 0, uint64_t flow_key = 0) = 0;
  virtual void AddDependency(int flow, int depends_on) = 0;
};

class FlowEngine : public FlowSink {
 public:
  int AddLink(double capacity_bps, double latency_s = 0);
  int num_links() const { return static_cast<int>(capacity_.size()); }
  double capacity(int link) const { return capacity_[link]; }
  // Failed links carry nothing; selectors route around them.
  void FailLink(int link);
  const std::vector<bool>& failed() const { return failed_; }

  // A flow over explicit links (latency = sum of the links' latencies + extra).
  int AddFlow(std::vector<int> links, double bytes, double release_s = 0, double extra_latency_s = 0);
  // A flow from endpoint src to dst, routed by the selector at release.
  int AddRoutedFlow(int src, int dst, double bytes, double release_s = 0, uint64_t flow_key = 0) override;
  // `flow` is released `delay_s` after the last of its dependencies finishes.
  void AddDependency(int flow, int depends_on) override;
  void SetDelay(int flow, double delay_s);
  // A task of fixed duration that uses no link (released like a flow).
  int AddTask(double duration_s, double release_s = 0);
  void SetPathSelector(PathSelector* selector) { selector_ = selector; }

  // Runs every flow to completion. Fails when a flow cannot be routed or a
  // dependency cycle leaves flows unreleased.
  Status Run();

  const FlowResult& result(int flow) const { return results_[flow]; }
  FlowEndpoints endpoints(int flow) const { return {flows_[flow].src, flows_[flow].dst, flows_[flow].bytes}; }
  // Links of a routed (released) flow.
  std::vector<int> route(int flow) const;
  int num_flows() const { return static_cast<int>(flows_.size()); }
  double makespan() const { return makespan_; }
  // Rate of a running flow (valid inside tests that stop early via RunUntil).
  double rate(int flow) const { return state_[flow].rate; }
  // Runs until simulated time `t` (or completion); returns true when done.
  StatusOr<bool> RunUntil(double t);
  int64_t events() const { return events_; }
  int64_t rate_updates() const { return rate_updates_; }  // flow rates assigned by progressive filling

 private:
  struct Flow {  // set up before Run, read at release and completion
    int src = -1, dst = -1;
    uint64_t key = 0;
    double bytes = 0;
    double release_s = 0, delay_s = 0, extra_latency_s = 0;
    int pending_deps = 0;
    bool explicit_route = false, active = false, done = false;
  };
  struct FlowState {  // what rate updates touch, kept dense (one cache line)
    double rate = 0;
    double remaining = 0;
    double updated_s = 0;   // `remaining` is exact at this time (lazy update)
    double finish_t = 0;    // projected completion at the current rate
    int first_link = 0, num_links = 0;  // into route_links_ (after routing)
    int bottleneck = -1;    // link that froze the flow in the last filling
  };
  struct Timed {
    double t;
    int flow;
    bool operator>(const Timed& o) const { return t > o.t || (t == o.t && flow > o.flow); }
  };

  int AddExplicit(std::vector<int> links, double bytes, double release_s, double extra_latency_s);
  Status Prepare();
  Status Release(int f, double t);
  void Activate(int f);
  void Deactivate(int f);
  void Recompute();
  void SetRate(int f, double rate);
  // Progressive filling of refill_ against the capacity the other flows leave.
  void Fill();
  // Adds to refill_ the flows that break the max-min condition; returns how many.
  int CollectViolations();
  void LinkStats(int l);
  // Indexed min-heap of active flows by finish_t.
  void HeapFix(int f);
  void HeapRemove(int f);
  bool HeapLess(int a, int b) const;
  void HeapSwap(int i, int j);
  void HeapUp(int i);
  void HeapDown(int i);
  StatusOr<bool> Step(double limit);

  std::vector<double> capacity_, link_latency_;
  std::vector<bool> failed_;
  std::vector<Flow> flows_;
  std::vector<FlowState> state_;
  std::vector<FlowResult> results_;
  std::vector<std::vector<int>> explicit_links_;  // per flow (explicit ones)
  std::vector<std::pair<int, int>> dep_edges_;    // (depends_on, flow) until Run
  std::vector<int> dep_offset_, dep_list_;         // dependents of each flow (CSR, built by Prepare)
  std::vector<int> route_links_;                   // routed paths, appended
  // Active flows per link: (flow, slot in the flow's path) and each slot's position.
  std::vector<std::vector<std::pair<int, int>>> link_flows_;
  std::vector<int> slot_pos_;                      // parallel to route_links_
  std::vector<int> routed_on_;                     // per link: routed, unfinished flows
  std::vector<int> active_;                        // active flow ids
  std::vector<int> active_pos_;                    // per flow, index in active_ (-1)
  std::vector<Timed> starts_;                      // heap of routed flows waiting for their latency
  std::vector<Timed> releases_;                    // heap of flows whose dependencies are met
  std::vector<int> dirty_links_;                   // links flows joined since the last update
  std::vector<int> freed_links_;                   // links flows left
  std::vector<int> finish_heap_;                   // active flows with a finite finish_t
  std::vector<int> heap_pos_;                      // per flow, index in finish_heap_ (-1)
  // Scratch for Recompute (epoch-stamped marks; no per-event allocation).
  std::vector<uint32_t> link_mark_, flow_mark_, frozen_mark_, stat_mark_;
  uint32_t epoch_ = 0, fill_epoch_ = 0, stat_epoch_ = 0;
  std::vector<int> refill_, refill_links_, done_, violators_;
  std::vector<double> new_rate_, rem_, link_load_, link_max_;
  std::vector<int> cnt_, new_bottleneck_;
  struct Share {
    double share;
    int link;
    uint32_t version;
    bool operator>(const Share& o) const { return share > o.share || (share == o.share && link > o.link); }
  };
  std::vector<Share> share_heap_;
  PathSelector* selector_ = nullptr;
  double now_ = 0, makespan_ = 0;
  int finished_ = 0;
  bool prepared_ = false;
  int64_t events_ = 0, rate_updates_ = 0;
};

}  // namespace tessera::sim
