#include "tessera/sim/flow_engine.h"

#include <algorithm>
#include <limits>

#include "tessera/base/check.h"

namespace tessera::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kRelEps = 1e-9;  // tolerance of the max-min check (saturation, largest rate)
constexpr int kMaxRefills = 16;   // then the whole connected component is re-filled

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
  return AddExplicit(std::move(links), bytes, release_s, extra_latency_s);
}

int FlowEngine::AddExplicit(std::vector<int> links, double bytes, double release_s, double extra_latency_s) {
  Flow f;
  f.bytes = bytes;
  f.release_s = release_s;
  f.extra_latency_s = extra_latency_s;
  f.explicit_route = true;
  flows_.push_back(f);
  explicit_links_.push_back(std::move(links));
  return num_flows() - 1;
}

int FlowEngine::AddRoutedFlow(int src, int dst, double bytes, double release_s, uint64_t flow_key) {
  TESSERA_CHECK(bytes >= 0 && src != dst && !prepared_, "routed flow {}->{} of {} bytes", src, dst, bytes);
  Flow f;
  f.src = src;
  f.dst = dst;
  f.key = flow_key;
  f.bytes = bytes;
  f.release_s = release_s;
  flows_.push_back(f);
  explicit_links_.emplace_back();
  return num_flows() - 1;
}

void FlowEngine::AddDependency(int flow, int depends_on) {
  TESSERA_CHECK(flow >= 0 && flow < num_flows() && depends_on >= 0 && depends_on < num_flows() && flow != depends_on,
                "dependency {} -> {}", depends_on, flow);
  dep_edges_.emplace_back(depends_on, flow);
  ++flows_[flow].pending_deps;
}

std::vector<int> FlowEngine::route(int flow) const {
  const FlowState& f = state_[flow];
  return std::vector<int>(route_links_.begin() + f.first_link, route_links_.begin() + f.first_link + f.num_links);
}

void FlowEngine::SetDelay(int flow, double delay_s) { flows_[flow].delay_s = delay_s; }

int FlowEngine::AddTask(double duration_s, double release_s) {
  TESSERA_CHECK(duration_s >= 0 && !prepared_, "task of {} s", duration_s);
  return AddExplicit({}, 0, release_s, duration_s);  // no links: done at its start, duration after release
}

Status FlowEngine::Prepare() {
  prepared_ = true;
  // Dependents as one CSR array (no per-flow allocation).
  dep_offset_.assign(flows_.size() + 1, 0);
  for (auto [from, to] : dep_edges_) ++dep_offset_[from + 1];
  for (size_t f = 0; f < flows_.size(); ++f) dep_offset_[f + 1] += dep_offset_[f];
  dep_list_.resize(dep_edges_.size());
  std::vector<int> fill(dep_offset_.begin(), dep_offset_.end() - 1);
  for (auto [from, to] : dep_edges_) dep_list_[fill[from]++] = to;
  std::vector<std::pair<int, int>>().swap(dep_edges_);
  results_.assign(flows_.size(), FlowResult{});
  state_.assign(flows_.size(), FlowState{});
  for (size_t f = 0; f < flows_.size(); ++f) state_[f].remaining = flows_[f].bytes;
  link_flows_.assign(capacity_.size(), {});
  link_mark_.assign(capacity_.size(), 0);
  stat_mark_.assign(capacity_.size(), 0);
  flow_mark_.assign(flows_.size(), 0);
  frozen_mark_.assign(flows_.size(), 0);
  new_rate_.assign(flows_.size(), 0);
  new_bottleneck_.assign(flows_.size(), -1);
  heap_pos_.assign(flows_.size(), -1);
  rem_.assign(capacity_.size(), 0);
  link_load_.assign(capacity_.size(), 0);
  link_max_.assign(capacity_.size(), 0);
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
  FlowState& st = state_[f];
  results_[f].release_s = t;
  st.first_link = static_cast<int>(route_links_.size());
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
  st.num_links = static_cast<int>(route_links_.size()) - st.first_link;
  for (int i = 0; i < st.num_links; ++i) ++routed_on_[route_links_[st.first_link + i]];
  slot_pos_.resize(route_links_.size(), -1);
  results_[f].start_s = t + latency;
  PushHeap(starts_, Timed{t + latency, f});
  return Status::Ok();
}

void FlowEngine::Activate(int f) {
  Flow& fl = flows_[f];
  FlowState& st = state_[f];
  fl.active = true;
  st.rate = 0;
  st.updated_s = now_;
  st.finish_t = kInf;
  active_pos_[f] = static_cast<int>(active_.size());
  active_.push_back(f);
  for (int i = 0; i < st.num_links; ++i) {
    int l = route_links_[st.first_link + i];
    slot_pos_[st.first_link + i] = static_cast<int>(link_flows_[l].size());
    link_flows_[l].emplace_back(f, i);
    dirty_links_.push_back(l);
  }
}

void FlowEngine::Deactivate(int f) {
  Flow& fl = flows_[f];
  FlowState& st = state_[f];
  HeapRemove(f);
  fl.active = false;
  fl.done = true;
  st.rate = 0;
  for (int i = 0; i < st.num_links; ++i) {
    int l = route_links_[st.first_link + i];
    auto& lf = link_flows_[l];
    int pos = slot_pos_[st.first_link + i];
    lf[pos] = lf.back();
    slot_pos_[state_[lf[pos].first].first_link + lf[pos].second] = pos;
    lf.pop_back();
    freed_links_.push_back(l);
  }
  int pos = active_pos_[f];
  active_[pos] = active_.back();
  active_pos_[active_[pos]] = pos;
  active_.pop_back();
  active_pos_[f] = -1;
}

void FlowEngine::Recompute() {
  if (dirty_links_.empty() && freed_links_.empty()) return;
  ++epoch_;
  // Candidates: every flow on a link that a flow joined; on a link a flow
  // left, the flows whose bottleneck it is (the others have theirs elsewhere,
  // unchanged unless that link changed too). The check below adds whatever
  // else has to move.
  refill_.clear();
  for (int l : dirty_links_) {
    for (auto [f, slot] : link_flows_[l]) {
      (void)slot;
      if (flow_mark_[f] != epoch_) flow_mark_[f] = epoch_, refill_.push_back(f);
    }
  }
  for (int l : freed_links_) {
    for (auto [f, slot] : link_flows_[l]) {
      (void)slot;
      if (flow_mark_[f] != epoch_ && state_[f].bottleneck == l) flow_mark_[f] = epoch_, refill_.push_back(f);
    }
  }
  dirty_links_.clear();
  freed_links_.clear();
  if (refill_.empty()) return;
  for (int round = 0;; ++round) {
    Fill();
    if (CollectViolations() == 0) break;
    if (round + 1 == kMaxRefills) {
      // Give up on locality: the connected component of the candidates
      // (no outside flow touches it, so one filling is exact).
      for (size_t i = 0; i < refill_.size(); ++i) {
        const FlowState& st = state_[refill_[i]];
        for (int j = 0; j < st.num_links; ++j) {
          for (auto [g, slot] : link_flows_[route_links_[st.first_link + j]]) {
            (void)slot;
            if (flow_mark_[g] != epoch_) flow_mark_[g] = epoch_, refill_.push_back(g);
          }
        }
      }
      Fill();
      break;
    }
  }
  for (int f : refill_) {
    state_[f].bottleneck = new_bottleneck_[f];
    if (new_rate_[f] != state_[f].rate) SetRate(f, new_rate_[f]);
  }
}

void FlowEngine::Fill() {
  ++fill_epoch_;
  refill_links_.clear();
  for (int f : refill_) {
    const FlowState& st = state_[f];
    for (int j = 0; j < st.num_links; ++j) {
      int l = route_links_[st.first_link + j];
      if (link_mark_[l] != fill_epoch_) link_mark_[l] = fill_epoch_, refill_links_.push_back(l);
    }
  }
  share_heap_.clear();
  for (int l : refill_links_) {
    double used = 0;  // by flows outside the re-filled set, at their current rates
    int count = 0;
    for (auto [g, slot] : link_flows_[l]) {
      (void)slot;
      if (flow_mark_[g] == epoch_) {
        ++count;
      } else {
        used += state_[g].rate;
      }
    }
    rem_[l] = capacity_[l] - used;
    cnt_[l] = count;
    share_heap_.push_back(Share{std::max(0.0, rem_[l]) / count, l, static_cast<uint32_t>(count)});
  }
  std::make_heap(share_heap_.begin(), share_heap_.end(), std::greater<Share>());
  // Progressive filling: repeatedly saturate the link with the smallest fair share.
  while (!share_heap_.empty()) {
    Share s = PopHeap(share_heap_);
    int l = s.link;
    if (cnt_[l] == 0 || s.version != static_cast<uint32_t>(cnt_[l])) continue;  // stale
    double share = std::max(0.0, rem_[l] / cnt_[l]);
    for (auto [f, slot] : link_flows_[l]) {
      (void)slot;
      if (flow_mark_[f] != epoch_ || frozen_mark_[f] == fill_epoch_) continue;
      frozen_mark_[f] = fill_epoch_;
      new_rate_[f] = share;
      new_bottleneck_[f] = l;
      ++rate_updates_;
      const FlowState& st = state_[f];
      for (int j = 0; j < st.num_links; ++j) {
        int l2 = route_links_[st.first_link + j];
        if (l2 == l) continue;
        rem_[l2] -= share;
        if (--cnt_[l2] > 0) {
          PushHeap(share_heap_, Share{std::max(0.0, rem_[l2]) / cnt_[l2], l2, static_cast<uint32_t>(cnt_[l2])});
        }
      }
    }
    cnt_[l] = 0;
  }
}

void FlowEngine::LinkStats(int l) {
  if (stat_mark_[l] == stat_epoch_) return;
  stat_mark_[l] = stat_epoch_;
  double load = 0, max_rate = 0;
  for (auto [g, slot] : link_flows_[l]) {
    (void)slot;
    double r = flow_mark_[g] == epoch_ ? new_rate_[g] : state_[g].rate;
    load += r;
    max_rate = std::max(max_rate, r);
  }
  link_load_[l] = load;
  link_max_[l] = max_rate;
}

int FlowEngine::CollectViolations() {
  // Max-min fair <=> every flow has a bottleneck: a saturated link on which
  // its rate is the largest. Re-filled flows have one among themselves (at
  // the link that froze them) unless an outside flow there is faster; outside
  // flows on the re-filled links must still have one. Flows elsewhere see
  // unchanged links. Violators are stamped frozen_mark_ (unused outside the set).
  ++stat_epoch_;
  const size_t before = refill_.size();
  std::vector<int>& violators = violators_;
  const size_t first_violator = violators.size();
  auto record = [&](int g) {
    frozen_mark_[g] = fill_epoch_;
    violators.push_back(g);
  };
  for (size_t i = 0; i < before; ++i) {
    const int f = refill_[i];
    const double r = new_rate_[f];
    for (auto [g, slot] : link_flows_[new_bottleneck_[f]]) {
      (void)slot;
      if (flow_mark_[g] != epoch_ && frozen_mark_[g] != fill_epoch_ && state_[g].rate > r * (1 + kRelEps)) record(g);
    }
  }
  for (int l : refill_links_) {
    for (auto [g, slot] : link_flows_[l]) {
      (void)slot;
      if (flow_mark_[g] == epoch_ || frozen_mark_[g] == fill_epoch_) continue;
      frozen_mark_[g] = fill_epoch_;  // checked
      const FlowState& st = state_[g];
      bool ok = false;
      for (int j = 0; j < st.num_links && !ok; ++j) {
        int m = route_links_[st.first_link + j];
        LinkStats(m);
        ok = link_load_[m] >= capacity_[m] * (1 - kRelEps) && st.rate >= link_max_[m] * (1 - kRelEps);
        if (ok) state_[g].bottleneck = m;  // keeps every recorded bottleneck valid
      }
      if (!ok) violators.push_back(g);
    }
  }
  for (size_t i = first_violator; i < violators.size(); ++i) {
    flow_mark_[violators[i]] = epoch_;
    refill_.push_back(violators[i]);
  }
  violators.resize(first_violator);
  return static_cast<int>(refill_.size() - before);
}

void FlowEngine::SetRate(int f, double rate) {
  FlowState& st = state_[f];
  st.remaining -= st.rate * (now_ - st.updated_s);
  st.updated_s = now_;
  st.rate = rate;
  if (st.remaining <= 1e-6) {
    st.finish_t = now_;
  } else {
    st.finish_t = rate > 0 ? now_ + st.remaining / rate : kInf;
  }
  HeapFix(f);
}

bool FlowEngine::HeapLess(int a, int b) const {
  const double ta = state_[a].finish_t, tb = state_[b].finish_t;
  return ta < tb || (ta == tb && a < b);
}

void FlowEngine::HeapSwap(int i, int j) {
  std::swap(finish_heap_[i], finish_heap_[j]);
  heap_pos_[finish_heap_[i]] = i;
  heap_pos_[finish_heap_[j]] = j;
}

void FlowEngine::HeapUp(int i) {
  while (i > 0) {
    int parent = (i - 1) / 2;
    if (!HeapLess(finish_heap_[i], finish_heap_[parent])) break;
    HeapSwap(i, parent);
    i = parent;
  }
}

void FlowEngine::HeapDown(int i) {
  const int n = static_cast<int>(finish_heap_.size());
  while (true) {
    int best = i, a = 2 * i + 1, b = a + 1;
    if (a < n && HeapLess(finish_heap_[a], finish_heap_[best])) best = a;
    if (b < n && HeapLess(finish_heap_[b], finish_heap_[best])) best = b;
    if (best == i) return;
    HeapSwap(i, best);
    i = best;
  }
}

void FlowEngine::HeapFix(int f) {
  if (state_[f].finish_t == kInf) {
    HeapRemove(f);
    return;
  }
  if (heap_pos_[f] < 0) {
    heap_pos_[f] = static_cast<int>(finish_heap_.size());
    finish_heap_.push_back(f);
  }
  HeapUp(heap_pos_[f]);
  HeapDown(heap_pos_[f]);
}

void FlowEngine::HeapRemove(int f) {
  const int pos = heap_pos_[f];
  if (pos < 0) return;
  const int last = static_cast<int>(finish_heap_.size()) - 1;
  if (pos != last) HeapSwap(pos, last);
  finish_heap_.pop_back();
  heap_pos_[f] = -1;
  if (pos < last) {
    HeapUp(pos);
    HeapDown(pos);
  }
}

StatusOr<bool> FlowEngine::Step(double limit) {
  double t_rel = releases_.empty() ? kInf : releases_.front().t;
  double t_start = starts_.empty() ? kInf : starts_.front().t;
  double t_fin = finish_heap_.empty() ? kInf : state_[finish_heap_.front()].finish_t;
  double t = std::min({t_rel, t_start, t_fin});
  if (t == kInf) {
    if (finished_ == num_flows()) return true;
    return FailedPrecondition("{} of {} flows never finished (dependency cycle or no bandwidth)",
                              num_flows() - finished_, num_flows());
  }
  if (t > limit) {
    now_ = std::max(now_, limit);
    return false;
  }
  now_ = std::max(now_, t);
  ++events_;
  // Completions (a relative tolerance merges flows finishing together).
  const double tol = 1e-12 * (1 + now_);
  done_.clear();
  while (!finish_heap_.empty() && state_[finish_heap_.front()].finish_t <= now_ + tol) {
    done_.push_back(finish_heap_.front());
    HeapRemove(finish_heap_.front());
  }
  auto finish = [&](int f) {
    results_[f].finish_s = now_;
    const FlowState& st = state_[f];
    for (int i = 0; i < st.num_links; ++i) --routed_on_[route_links_[st.first_link + i]];
    makespan_ = std::max(makespan_, now_);
    ++finished_;
    for (int k = dep_offset_[f]; k < dep_offset_[f + 1]; ++k) {
      const int d = dep_list_[k];
      if (--flows_[d].pending_deps == 0) PushHeap(releases_, Timed{now_ + flows_[d].delay_s, d});
    }
  };
  for (int f : done_) {
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
