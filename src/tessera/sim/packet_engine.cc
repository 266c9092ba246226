#include "tessera/sim/packet_engine.h"

#include <algorithm>

#include "tessera/base/check.h"

namespace tessera::sim {

PacketEngine::PacketEngine(const FlowEngine& links, PathSelector* selector, PacketParams params)
    : links_(links), selector_(selector), p_(params), rng_(params.seed), queues_(links.num_links()),
      routed_on_(links.num_links(), 0) {
  TESSERA_CHECK(p_.mtu_bytes > 0 && p_.kmax_bytes > p_.kmin_bytes && p_.pfc_xoff_bytes > p_.pfc_xon_bytes,
                "packet parameters: mtu {}, Kmin {}, Kmax {}, Xoff {}, Xon {}", p_.mtu_bytes, p_.kmin_bytes,
                p_.kmax_bytes, p_.pfc_xoff_bytes, p_.pfc_xon_bytes);
}

int PacketEngine::AddRoutedFlow(int src, int dst, double bytes, double release_s, uint64_t flow_key) {
  TESSERA_CHECK(src != dst && bytes >= 0, "packet flow {} -> {} of {} bytes", src, dst, bytes);
  Flow f;
  f.src = src;
  f.dst = dst;
  f.key = flow_key;
  f.bytes = f.to_send = bytes;
  f.release_s = release_s;
  flows_.push_back(std::move(f));
  dependents_.emplace_back();
  return num_flows() - 1;
}

void PacketEngine::AddDependency(int flow, int depends_on) {
  TESSERA_CHECK(flow != depends_on && flow < num_flows() && depends_on < num_flows(), "dependency {} -> {}",
                depends_on, flow);
  dependents_[depends_on].push_back(flow);
  ++flows_[flow].pending_deps;
}

void PacketEngine::Push(double t, EventType type, int a, int b) { events_q_.push(Event{t, seq_++, type, a, b}); }

Status PacketEngine::Start(int fi) {
  Flow& f = flows_[fi];
  results_[fi].release_s = results_[fi].start_s = now_;
  auto load = [this](int l) { return routed_on_[l]; };
  double latency = 0;
  TESSERA_ASSIGN_OR_RETURN(results_[fi].path,
                           selector_->Select(f.src, f.dst, f.key, load, links_.failed(), &f.path, &latency));
  for (int l : f.path) ++routed_on_[l];
  if (selector_->adaptive()) {
    const int n = selector_->NumPaths(f.src, f.dst);
    for (int i = 0; i < n; ++i) {
      std::vector<int> links;
      selector_->Path(f.src, f.dst, i, &links);
      bool alive = true;
      for (int l : links) alive = alive && !links_.failed()[l];
      if (i == results_[fi].path) f.current = static_cast<int>(f.paths.size());
      if (alive) f.paths.push_back(std::move(links));
    }
  }
  f.hop_delay = latency / f.path.size();
  f.line_rate = links_.capacity(f.path[0]);
  f.rc = f.rt = f.line_rate;
  f.started = true;
  if (f.bytes <= 0) {
    Finish(fi);
    return Status::Ok();
  }
  Pace(fi);
  if (p_.dcqcn) {
    Push(now_ + p_.alpha_timer_s, kAlphaTimer, fi);
    Push(now_ + p_.increase_timer_s, kIncreaseTimer, fi);
  }
  return Status::Ok();
}

void PacketEngine::Pace(int fi) {
  Flow& f = flows_[fi];
  if (f.to_send <= 0 || f.done) {
    f.pacing = false;
    return;
  }
  f.pacing = true;
  const double size = std::min(p_.mtu_bytes, f.to_send);
  f.to_send -= size;
  int pkt;
  if (!free_packets_.empty()) {
    pkt = free_packets_.back();
    free_packets_.pop_back();
  } else {
    pkt = static_cast<int>(packets_.size());
    packets_.emplace_back();
  }
  packets_[pkt] = Packet{fi, 0, size, false, ChoosePath(f)};
  Enqueue(PathOf(packets_[pkt])[0], pkt);
  if (p_.dcqcn) {
    f.bytes_since_bc += size;
    if (f.bytes_since_bc >= p_.byte_counter_bytes) {
      f.bytes_since_bc -= p_.byte_counter_bytes;
      ++f.byte_count;
      Increase(fi);
    }
  }
  Push(now_ + size / f.rc, kPace, fi);
}

const std::vector<int>& PacketEngine::PathOf(const Packet& p) const {
  const Flow& f = flows_[p.flow];
  return p.path < 0 ? f.path : f.paths[p.path];
}

int PacketEngine::ChoosePath(Flow& f) {
  if (f.paths.empty()) return -1;
  auto fullest = [this](const std::vector<int>& path) {
    double q = 0;
    for (int l : path) q = std::max(q, queues_[l].bytes);
    return q;
  };
  // Stay on the flow's path while it is uncongested; past Kmin, move to the
  // path whose fullest queue is shortest (ties rotate).
  double current_q = fullest(f.paths[f.current]);
  if (current_q <= p_.kmin_bytes) return f.current;
  const int n = static_cast<int>(f.paths.size());
  const int offset = static_cast<int>(rr_++ % n);
  for (int i = 0; i < n; ++i) {
    const int idx = (offset + i) % n;
    double q = fullest(f.paths[idx]);
    if (q < current_q) f.current = idx, current_q = q;
  }
  return f.current;
}

void PacketEngine::Account(int link) {
  Queue& q = queues_[link];
  q.area += q.bytes * (now_ - q.last_change);
  q.last_change = now_;
}

void PacketEngine::Enqueue(int link, int pkt) {
  Queue& q = queues_[link];
  Packet& p = packets_[pkt];
  if (p.hop > 0) {  // switch egress: ECN marking and the finite buffer
    if (p_.ecn && q.bytes > p_.kmin_bytes) {
      double prob = q.bytes >= p_.kmax_bytes ? 1.0
                                             : p_.pmax * (q.bytes - p_.kmin_bytes) / (p_.kmax_bytes - p_.kmin_bytes);
      if (std::uniform_real_distribution<double>(0, 1)(rng_) < prob) {
        p.marked = true;
        ++q.stats.marked;
      }
    }
    if (!p_.pfc && q.bytes + p.bytes > p_.buffer_bytes) {
      ++q.stats.dropped;
      Flow& f = flows_[p.flow];
      f.to_send += p.bytes;  // resent by the sender
      free_packets_.push_back(pkt);
      if (!f.pacing) Push(now_, kPace, p.flow);
      return;
    }
  }
  Account(link);
  q.packets.push_back(pkt);
  q.bytes += p.bytes;
  q.stats.max_bytes = std::max(q.stats.max_bytes, q.bytes);
  if (p.hop > 0) max_switch_queue_ = std::max(max_switch_queue_, q.bytes);
  if (link == traced_link_) trace_.emplace_back(now_, q.bytes);
  TryTransmit(link);
}

void PacketEngine::TryTransmit(int link) {
  Queue& q = queues_[link];
  if (q.busy || q.packets.empty()) return;
  const Packet& p = packets_[q.packets.front()];
  const std::vector<int>& path = PathOf(p);
  if (p_.pfc && p.hop + 1 < static_cast<int>(path.size())) {
    int next = path[p.hop + 1];
    if (queues_[next].bytes >= p_.pfc_xoff_bytes) {  // paused by the downstream queue
      auto& w = queues_[next].waiters;
      if (std::find(w.begin(), w.end(), link) == w.end()) w.push_back(link);
      return;
    }
  }
  q.busy = true;
  Push(now_ + p.bytes / links_.capacity(link), kTxDone, link);
}

void PacketEngine::TxDone(int link) {
  Queue& q = queues_[link];
  const int pkt = q.packets.front();
  q.packets.pop_front();
  Account(link);
  q.bytes -= packets_[pkt].bytes;
  if (link == traced_link_) trace_.emplace_back(now_, q.bytes);
  q.busy = false;
  q.stats.busy_s += packets_[pkt].bytes / links_.capacity(link);
  Push(now_ + flows_[packets_[pkt].flow].hop_delay, kArrive, pkt);
  if (p_.pfc && q.bytes < p_.pfc_xon_bytes && !q.waiters.empty()) {
    std::vector<int> wake;
    wake.swap(q.waiters);
    for (int w : wake) TryTransmit(w);
  }
  TryTransmit(link);
}

void PacketEngine::Arrive(int pkt) {
  Packet& p = packets_[pkt];
  Flow& f = flows_[p.flow];
  ++p.hop;
  const std::vector<int>& path = PathOf(p);
  if (p.hop < static_cast<int>(path.size())) {
    Enqueue(path[p.hop], pkt);
    return;
  }
  f.received += p.bytes;
  if (p.marked && p_.dcqcn && (f.last_cnp_sent < 0 || now_ - f.last_cnp_sent >= p_.cnp_interval_s)) {
    f.last_cnp_sent = now_;
    ++cnps_;
    Push(now_ + f.hop_delay * f.path.size(), kCnp, p.flow);
  }
  const int fi = p.flow;
  free_packets_.push_back(pkt);
  if (!f.done && f.received >= f.bytes - 1e-9) Finish(fi);
}

void PacketEngine::Cnp(int fi) {
  Flow& f = flows_[fi];
  if (f.done) return;
  f.rt = f.rc;
  f.rc = std::max(p_.min_rate_fraction * f.line_rate, f.rc * (1 - f.alpha / 2));
  f.alpha = (1 - p_.g) * f.alpha + p_.g;
  f.cnp_since_alpha = true;
  f.timer_count = f.byte_count = 0;
  f.bytes_since_bc = 0;
}

void PacketEngine::Increase(int fi) {
  Flow& f = flows_[fi];
  const int fr = p_.fast_recovery_steps;
  if (std::max(f.timer_count, f.byte_count) < fr) {
    // fast recovery: toward the target
  } else if (std::min(f.timer_count, f.byte_count) > fr) {
    f.rt += p_.rate_hai_fraction * f.line_rate;
  } else {
    f.rt += p_.rate_ai_fraction * f.line_rate;
  }
  f.rt = std::min(f.rt, f.line_rate);
  f.rc = std::min(f.line_rate, (f.rt + f.rc) / 2);
}

void PacketEngine::Finish(int fi) {
  Flow& f = flows_[fi];
  f.done = true;
  results_[fi].finish_s = now_;
  makespan_ = std::max(makespan_, now_);
  ++finished_;
  for (int l : f.path) --routed_on_[l];
  for (int d : dependents_[fi]) {
    if (--flows_[d].pending_deps == 0) Push(now_, kRelease, d);
  }
}

Status PacketEngine::Run() {
  results_.assign(flows_.size(), FlowResult{});
  for (int f = 0; f < num_flows(); ++f) {
    if (flows_[f].pending_deps == 0) Push(flows_[f].release_s, kRelease, f);
  }
  while (!events_q_.empty()) {
    Event e = events_q_.top();
    events_q_.pop();
    now_ = e.t;
    ++events_;
    switch (e.type) {
      case kRelease: TESSERA_RETURN_IF_ERROR(Start(e.a)); break;
      case kPace: Pace(e.a); break;
      case kTxDone: TxDone(e.a); break;
      case kArrive: Arrive(e.a); break;
      case kCnp: Cnp(e.a); break;
      case kAlphaTimer:
        if (!flows_[e.a].done) {
          Flow& f = flows_[e.a];
          if (!f.cnp_since_alpha) f.alpha *= 1 - p_.g;
          f.cnp_since_alpha = false;
          Push(now_ + p_.alpha_timer_s, kAlphaTimer, e.a);
        }
        break;
      case kIncreaseTimer:
        if (!flows_[e.a].done) {
          ++flows_[e.a].timer_count;
          Increase(e.a);
          Push(now_ + p_.increase_timer_s, kIncreaseTimer, e.a);
        }
        break;
    }
  }
  if (finished_ != num_flows()) {
    return FailedPrecondition("{} of {} packet-level flows never finished (dependency cycle)", num_flows() - finished_,
                              num_flows());
  }
  for (size_t l = 0; l < queues_.size(); ++l) {
    now_ = makespan_;
    Account(static_cast<int>(l));
    queues_[l].stats.mean_bytes = makespan_ > 0 ? queues_[l].area / makespan_ : 0;
  }
  return Status::Ok();
}

}  // namespace tessera::sim
