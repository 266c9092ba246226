// PacketEngine: packet-level simulation for small cases, to validate the
// flow engine and to show RoCE congestion control at work.
//  - Output-queued switches: one FIFO per directed link, finite buffer
//    (drop-tail; dropped bytes are resent by the sender), store-and-forward.
//  - RED/ECN marking at enqueue on switch egress queues: no mark below Kmin,
//    probability Pmax (q-Kmin)/(Kmax-Kmin) between, always at or above Kmax.
//  - DCQCN at the senders (Zhu et al., SIGCOMM 2015): the receiver returns
//    at most one CNP per flow per `cnp_interval`; on a CNP the sender cuts
//    Rt = Rc, Rc *= 1 - alpha/2, alpha = (1-g) alpha + g; alpha decays by
//    (1-g) every alpha timer without CNP; the rate-increase timer and byte
//    counter drive fast recovery (Rc = (Rt+Rc)/2 for `fast_recovery_steps`),
//    then additive (Rt += rate_ai) and hyper (Rt += rate_hai) increase.
//  - Optional PFC: a queue above Xoff stops every upstream queue whose head
//    packet would enter it, until it drains below Xon (lossless).
// Links and routes come from the same FlowEngine link table and Topology
// (PathSelector) as the flow engine; a path's latency is spread evenly over
// its hops. ECMP: one hashed path per flow. Adaptive: the flow starts on the
// selector's least-loaded path and stays while that path's fullest queue is
// under Kmin; past it, packets move to the live path whose fullest queue is
// shortest (congestion-triggered rerouting, as flowlet / switch adaptive
// routing does). Flows may depend on flows (collective schedules). Deterministic
// for a seed. Single-threaded.
#pragma once

#include <cstdint>
#include <deque>
#include <queue>
#include <random>
#include <vector>

#include "tessera/sim/flow_engine.h"

namespace tessera::sim {

struct PacketParams {
  double mtu_bytes = 4096;
  double buffer_bytes = 1 << 20;  // per egress queue
  bool ecn = true;
  double kmin_bytes = 5e3;        // REFERENCE.md DCQCN defaults
  double kmax_bytes = 200e3;
  double pmax = 0.01;
  bool dcqcn = true;
  double g = 1.0 / 256;
  double alpha_timer_s = 55e-6;
  double cnp_interval_s = 50e-6;
  double increase_timer_s = 55e-6;
  double byte_counter_bytes = 10e6;
  int fast_recovery_steps = 5;
  double rate_ai_fraction = 1e-3;  // additive increase step, fraction of line rate
  double rate_hai_fraction = 1e-2; // hyper increase step
  double min_rate_fraction = 1e-3;
  bool pfc = false;
  double pfc_xoff_bytes = 512e3;
  double pfc_xon_bytes = 256e3;
  uint64_t seed = 1;
};

struct QueueStats {
  double max_bytes = 0;
  double mean_bytes = 0;  // time-average over the run
  int64_t marked = 0, dropped = 0;
  double busy_s = 0;      // time spent transmitting
};

class PacketEngine : public FlowSink {
 public:
  // `links` supplies capacities and failed links; `selector` routes flows.
  PacketEngine(const FlowEngine& links, PathSelector* selector, PacketParams params);

  int AddRoutedFlow(int src, int dst, double bytes, double release_s = 0, uint64_t flow_key = 0) override;
  void AddDependency(int flow, int depends_on) override;

  Status Run();

  int num_flows() const { return static_cast<int>(flows_.size()); }
  double makespan() const { return makespan_; }
  const FlowResult& result(int flow) const { return results_[flow]; }
  FlowEndpoints endpoints(int flow) const { return {flows_[flow].src, flows_[flow].dst, flows_[flow].bytes}; }
  std::vector<int> route(int flow) const { return flows_[flow].path; }
  const QueueStats& queue(int link) const { return queues_[link].stats; }
  // Records (time, bytes) of one queue at every change.
  void TraceQueue(int link) { traced_link_ = link; }
  const std::vector<std::pair<double, double>>& trace() const { return trace_; }
  int64_t events() const { return events_; }
  int64_t cnps() const { return cnps_; }
  // Deepest switch egress queue seen (host NIC queues excluded).
  double max_switch_queue_bytes() const { return max_switch_queue_; }

 private:
  enum EventType { kRelease, kPace, kTxDone, kArrive, kCnp, kAlphaTimer, kIncreaseTimer };
  struct Event {
    double t;
    uint64_t seq;
    EventType type;
    int a, b;
    bool operator>(const Event& o) const { return t > o.t || (t == o.t && seq > o.seq); }
  };
  struct Packet {
    int flow, hop;
    double bytes;
    bool marked;
    int path;  // index into the flow's candidate paths
  };
  struct Flow {
    int src, dst;
    uint64_t key;
    double bytes, to_send, received = 0;
    double release_s;
    int pending_deps = 0;
    std::vector<int> path;                  // chosen at start (ECMP: every packet)
    std::vector<std::vector<int>> paths;    // adaptive: live candidates
    int current = 0;                        // adaptive: path of the next packet
    double hop_delay = 0, line_rate = 0;
    double rc = 0, rt = 0, alpha = 1;
    bool cnp_since_alpha = false, pacing = false, done = false, started = false;
    double last_cnp_sent = -1;
    int timer_count = 0, byte_count = 0;
    double bytes_since_bc = 0;
  };
  struct Queue {
    std::deque<int> packets;
    double bytes = 0;
    bool busy = false;
    std::vector<int> waiters;  // links paused by PFC on this queue
    double last_change = 0, area = 0;
    QueueStats stats;
  };

  void Push(double t, EventType type, int a, int b = 0);
  Status Start(int f);
  void Pace(int f);
  void Enqueue(int link, int pkt);
  void TryTransmit(int link);
  void TxDone(int link);
  void Arrive(int pkt);
  void Cnp(int f);
  void Increase(int f);
  void Finish(int f);
  void Account(int link);
  const std::vector<int>& PathOf(const Packet& p) const;
  int ChoosePath(Flow& f);

  const FlowEngine& links_;
  PathSelector* selector_;
  PacketParams p_;
  std::mt19937_64 rng_;
  std::vector<Flow> flows_;
  std::vector<FlowResult> results_;
  std::vector<std::vector<int>> dependents_;
  std::vector<Packet> packets_;
  std::vector<int> free_packets_;
  std::vector<Queue> queues_;
  std::vector<int> routed_on_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_q_;
  uint64_t seq_ = 0, rr_ = 0;
  double now_ = 0, makespan_ = 0;
  int finished_ = 0, traced_link_ = -1;
  std::vector<std::pair<double, double>> trace_;
  int64_t events_ = 0, cnps_ = 0;
  double max_switch_queue_ = 0;
  Status error_;
};

}  // namespace tessera::sim
