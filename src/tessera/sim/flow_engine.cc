#include "tessera/sim/flow_engine.h"

#include <algorithm>
#include <limits>

#include "tessera/base/check.h"

namespace tessera::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
void PushHeap(std::vector<T>& heap, T v) {
  heap.push_back(v);
  std::push_heap(heap.begin(), heap.end(), std::greater<T>());
}
template <typename T>
T PopHeap(std::vector<T>& heap) {
  std::pop_heap(heap.begin(), heap.end(), std::greater<T>());
  T v = heap.back();
  heap.pop_back();
  return v;
}

struct Share {
  double share;
  int link;
  uint32_t version;
  bool operator>(const Share& o) const { return share > o.share || (share == o.share && link > o.link); }
};

}  // namespace

int FlowEngine::AddLink(double capacity_bps, double latency_s) {
  TESSERA_CHECK(capacity_bps > 0 && latency_s >= 0, "link capacity {} and latency {}", capacity_bps, latency_s);
  TESSERA_CHECK(!prepared_, "AddLink after Run");
  capacity_.push_back(capacity_bps);
  link_latency_.push_back(latency_s);
  failed_.push_back(false);
  return num_links() - 1;
}

void FlowEngine::FailLink(int link) {
  TESSERA_CHECK(link >= 0 && link < num_links() && !prepared_, "FailLink({}) before Run", link);
  failed_[link] = true;
}

int FlowEngine::AddFlow(std::vector<int> links, double bytes, double release_s, double extra_latency_s) {
  TESSERA_CHECK(!links.empty() && bytes >= 0 && !prepared_, "flow needs links and bytes >= 0");
  for (int l : links) TESSERA_CHECK(l >= 0 && l < num_links(), "flow uses unknown link {}", l);
  Flow f;
  f.bytes = f.remaining = bytes;
  f.release_s = release_s;
  f.extra_latency_s = extra_latency_s;
  f.explicit_route = true;
  flows_.push_back(f);
  explicit_links_.resize(flows_.size());
  explicit_links_.back() = std::move(links);
  dependents_.emplace_back();
  return num_flows() - 1;
}

int FlowEngine::AddRoutedFlow(int src, int dst, double bytes, double release_s, uint64_t flow_key) {
  TESSERA_CHECK(bytes >= 0 && src != dst && !prepared_, "routed flow {}->{} of {} bytes", src, dst, bytes);
  Flow f;
  f.src = src;
  f.dst = dst;
  f.key = flow_key;
  f.bytes = f.remaining = bytes;
  f.release_s = release_s;
  flows_.push_back(f);
  explicit_links_.emplace_back();
  dependents_.emplace_back();
  return num_flows() - 1;
}

void FlowEngine::AddDependency(int flow, int depends_on) {
  TESSERA_CHECK(flow >= 0 && flow < num_flows() && depends_on >= 0 && depends_on < num_flows() && flow != depends_on,
                "dependency {} -> {}", depends_on, flow);
  dependents_[depends_on].push_back(flow);
  ++flows_[flow].pending_deps;
}

std::vector<int> FlowEngine::route(int flow) const {
  const Flow& f = flows_[flow];
  return std::vector<int>(route_links_.begin() + f.first_link, route_links_.begin() + f.first_link + f.num_links);
}

void FlowEngine::SetDelay(int flow, double delay_s) { flows_[flow].delay_s = delay_s; }

Status FlowEngine::Prepare() {
  prepared_ = true;
  results_.assign(flows_.size(), FlowResult{});
  link_flows_.assign(capacity_.size(), {});
  link_mark_.assign(capacity_.size(), 0);
  flow_mark_.assign(flows_.size(), 0);
  rem_.assign(capacity_.size(), 0);
  cnt_.assign(capacity_.size(), 0);
  routed_on_.assign(capacity_.size(), 0);
  active_pos_.assign(flows_.size(), -1);
  for (int f = 0; f < num_flows(); ++f) {
    if (flows_[f].pending_deps == 0) PushHeap(releases_, Timed{flows_[f].release_s + flows_[f].delay_s, f});
  }
  return Status::Ok();
}

Status FlowEngine::Release(int f, double t) {
  Flow& fl = flows_[f];
  results_[f].release_s = t;
  fl.first_link = static_cast<int>(route_links_.size());
  double latency = fl.extra_latency_s;
  if (fl.explicit_route) {
    for (int l : explicit_links_[f]) {
      if (failed_[l]) return Unavailable("flow {} is routed over failed link {}", f, l);
      route_links_.push_back(l);
      latency += link_latency_[l];
    }
  } else {
    if (selector_ == nullptr) return FailedPrecondition("flow {} ({}->{}) needs a path selector", f, fl.src, fl.dst);
    double path_latency = 0;
    auto load = [this](int l) { return routed_on_[l]; };
    TESSERA_ASSIGN_OR_RETURN(results_[f].path,
                             selector_->Select(fl.src, fl.dst, fl.key, load, failed_, &route_links_, &path_latency));
    latency += path_latency;
  }
  fl.num_links = static_cast<int>(route_links_.size()) - fl.first_link;
  for (int i = 0; i < fl.num_links; ++i) ++routed_on_[route_links_[fl.first_link + i]];
  slot_pos_.resize(route_links_.size(), -1);
  results_[f].start_s = t + latency;
  PushHeap(starts_, Timed{t + latency, f});
  return Status::Ok();
}

void FlowEngine::Activate(int f) {
  Flow& fl = flows_[f];
  fl.active = true;
  active_pos_[f] = static_cast<int>(active_.size());
  active_.push_back(f);
  for (int i = 0; i < fl.num_links; ++i) {
    int l = route_links_[fl.first_link + i];
    slot_pos_[fl.first_link + i] = static_cast<int>(link_flows_[l].size());
    link_flows_[l].emplace_back(f, i);
    dirty_links_.push_back(l);
  }
}

void FlowEngine::Deactivate(int f) {
  Flow& fl = flows_[f];
  fl.active = false;
  fl.done = true;
  fl.rate = 0;
  for (int i = 0; i < fl.num_links; ++i) {
    int l = route_links_[fl.first_link + i];
    auto& lf = link_flows_[l];
    int pos = slot_pos_[fl.first_link + i];
    lf[pos] = lf.back();
    slot_pos_[flows_[lf[pos].first].first_link + lf[pos].second] = pos;
    lf.pop_back();
    dirty_links_.push_back(l);
  }
  int pos = active_pos_[f];
  active_[pos] = active_.back();
  active_pos_[active_[pos]] = pos;
  active_.pop_back();
  active_pos_[f] = -1;
}

void FlowEngine::Recompute() {
  if (dirty_links_.empty()) return;
  ++epoch_;
  // The component reachable from the dirty links through active flows.
  std::vector<int> links, comp_flows;
  for (int l : dirty_links_) {
    if (link_mark_[l] != epoch_) link_mark_[l] = epoch_, links.push_back(l);
  }
  dirty_links_.clear();
  for (size_t i = 0; i < links.size(); ++i) {
    for (auto [f, slot] : link_flows_[links[i]]) {
      (void)slot;
      if (flow_mark_[f] == epoch_) continue;
      flow_mark_[f] = epoch_;
      comp_flows.push_back(f);
      const Flow& fl = flows_[f];
      for (int j = 0; j < fl.num_links; ++j) {
        int l2 = route_links_[fl.first_link + j];
        if (link_mark_[l2] != epoch_) link_mark_[l2] = epoch_, links.push_back(l2);
      }
    }
  }
  // Progressive filling: repeatedly saturate the link with the smallest fair share.
  std::vector<Share> heap;
  heap.reserve(links.size());
  for (int l : links) {
    rem_[l] = capacity_[l];
    cnt_[l] = static_cast<int>(link_flows_[l].size());
    if (cnt_[l] > 0) heap.push_back(Share{rem_[l] / cnt_[l], l, static_cast<uint32_t>(cnt_[l])});
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<Share>());
  const uint32_t frozen = epoch_ | 0x80000000u;
  while (!heap.empty()) {
    Share s = PopHeap(heap);
    int l = s.link;
    if (cnt_[l] == 0 || s.version != static_cast<uint32_t>(cnt_[l])) continue;  // stale
    double share = std::max(0.0, rem_[l] / cnt_[l]);
    for (auto [f, slot] : link_flows_[l]) {
      (void)slot;
      if (flow_mark_[f] == frozen) continue;
      flow_mark_[f] = frozen;
      flows_[f].rate = share;
      ++rate_updates_;
      const Flow& fl = flows_[f];
      for (int j = 0; j < fl.num_links; ++j) {
        int l2 = route_links_[fl.first_link + j];
        if (l2 == l) continue;
        rem_[l2] -= share;
        if (--cnt_[l2] > 0) PushHeap(heap, Share{std::max(0.0, rem_[l2]) / cnt_[l2], l2, static_cast<uint32_t>(cnt_[l2])});
      }
    }
    cnt_[l] = 0;
  }
}

void FlowEngine::Advance(double t) {
  double dt = t - now_;
  if (dt > 0) {
    for (int f : active_) flows_[f].remaining -= flows_[f].rate * dt;
  }
  now_ = std::max(now_, t);
}

double FlowEngine::NextCompletion() const {
  double t = kInf;
  for (int f : active_) {
    const Flow& fl = flows_[f];
    if (fl.rate > 0) t = std::min(t, now_ + std::max(0.0, fl.remaining) / fl.rate);
  }
  return t;
}

StatusOr<bool> FlowEngine::Step(double limit) {
  double t_rel = releases_.empty() ? kInf : releases_.front().t;
  double t_start = starts_.empty() ? kInf : starts_.front().t;
  double t = std::min({t_rel, t_start, NextCompletion()});
  if (t == kInf) {
    if (finished_ == num_flows()) return true;
    return FailedPrecondition("{} of {} flows never finished (dependency cycle or no bandwidth)",
                              num_flows() - finished_, num_flows());
  }
  if (t > limit) {
    Advance(limit);
    return false;
  }
  Advance(t);
  ++events_;
  // Completions (a relative tolerance merges flows finishing together).
  const double tol = 1e-12 * (1 + now_);
  std::vector<int> done;
  for (int f : active_) {
    const Flow& fl = flows_[f];
    if (fl.remaining <= 1e-6 || (fl.rate > 0 && fl.remaining / fl.rate <= tol)) done.push_back(f);
  }
  auto finish = [&](int f) {
    results_[f].finish_s = now_;
    const Flow& fl = flows_[f];
    for (int i = 0; i < fl.num_links; ++i) --routed_on_[route_links_[fl.first_link + i]];
    makespan_ = std::max(makespan_, now_);
    ++finished_;
    for (int d : dependents_[f]) {
      if (--flows_[d].pending_deps == 0) PushHeap(releases_, Timed{now_ + flows_[d].delay_s, d});
    }
  };
  for (int f : done) {
    Deactivate(f);
    finish(f);
  }
  // Releases and starts due now (zero-latency chains resolve in this loop).
  while (true) {
    if (!releases_.empty() && releases_.front().t <= now_ + tol) {
      Timed r = PopHeap(releases_);
      TESSERA_RETURN_IF_ERROR(Release(r.flow, now_));
    } else if (!starts_.empty() && starts_.front().t <= now_ + tol) {
      Timed s = PopHeap(starts_);
      if (flows_[s.flow].bytes <= 0) {
        flows_[s.flow].done = true;
        finish(s.flow);
      } else {
        Activate(s.flow);
      }
    } else {
      break;
    }
  }
  Recompute();
  return finished_ == num_flows();
}

StatusOr<bool> FlowEngine::RunUntil(double t) {
  if (!prepared_) TESSERA_RETURN_IF_ERROR(Prepare());
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool done, Step(t));
    if (done) return true;
    if (now_ >= t) return false;
  }
}

Status FlowEngine::Run() {
  TESSERA_ASSIGN_OR_RETURN(bool done, RunUntil(kInf));
  (void)done;
  return Status::Ok();
}

}  // namespace tessera::sim
