#include "tessera/plan/search.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "tessera/plan/memory_model.h"

namespace tessera::plan {
namespace {

std::vector<int> Divisors(int64_t n) {
  std::vector<int> d;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    d.push_back(static_cast<int>(i));
    if (i * i != n) d.push_back(static_cast<int>(n / i));
  }
  std::sort(d.begin(), d.end());
  return d;
}

bool TpFits(const ModelSpec& m, int tp) {
  if (m.heads % tp != 0) return false;
  if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0) return false;
  return m.ffn_hidden == 0 || m.ffn_hidden % tp == 0;
}

// Faster first; equal times (within 1e-9) ranked by less memory.
bool Better(const StepBreakdown& a, const StepBreakdown& b) {
  const double eps = 1e-9 * b.step_time;
  if (a.step_time < b.step_time - eps) return true;
  if (a.step_time > b.step_time + eps) return false;
  return a.memory.Total() < b.memory.Total();
}

// Keeps the `k` best plans, best first.
class TopK {
 public:
  explicit TopK(int k) : k_(k) {}
  void Offer(const ParallelPlan& p, const StepBreakdown& r) {
    if (static_cast<int>(v_.size()) == k_ && !Better(r, v_.back().result)) return;
    auto it = std::upper_bound(v_.begin(), v_.end(), r,
                               [](const StepBreakdown& x, const RankedPlan& y) { return Better(x, y.result); });
    v_.insert(it, RankedPlan{p, r});
    if (static_cast<int>(v_.size()) > k_) v_.pop_back();
  }
  std::vector<RankedPlan> Take() { return std::move(v_); }

 private:
  int k_;
  std::vector<RankedPlan> v_;
};

}  // namespace

StatusOr<SearchResult> SearchPlans(const ModelSpec& m, const sim::ClusterSpec& c, const SearchOptions& o,
                                   const Efficiency& eff) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = o.devices;
  const int64_t batch = o.global_batch > 0 ? o.global_batch : m.global_batch;
  if (n < 1 || n > c.TotalDevices()) {
    return InvalidArgument("search: --devices {} must be in [1, {}] (cluster '{}')", n, c.TotalDevices(), c.name);
  }
  if (batch < 1) {
    return InvalidArgument("search: model '{}' has no global_batch; give one (sequences per step)", m.name);
  }
  if (o.top < 1) return InvalidArgument("search: --top must be >= 1, got {}", o.top);
  std::vector<Precision> precisions = {Precision::kBf16};
  if (o.allow_fp8 && c.device.peak_flops_fp8 > 0) precisions.push_back(Precision::kFp8);
  std::vector<bool> offloads = {false};
  if (o.allow_offload && c.device.ddr_link_bw > 0 && c.HostBytesPerDevice() > 0) offloads.push_back(true);
  const Recompute recomputes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  const double capacity = c.device.hbm_bytes * kUsableMemoryFraction;
  const double host_capacity = c.HostBytesPerDevice();

  SearchResult out;
  TopK top(o.top);
  for (int tp : Divisors(n)) {
    if (tp > c.supernode.devices || !TpFits(m, tp)) continue;  // tp stays inside a super-node
    for (int pp : Divisors(n / tp)) {
      if (pp > m.layers) continue;
      const int dp = static_cast<int>(n / (static_cast<int64_t>(tp) * pp));
      if (batch % dp != 0) continue;
      const int64_t per_replica = batch / dp;
      std::vector<int> eps = {1};
      if (m.IsMoe()) eps = Divisors(std::gcd(m.moe.experts, static_cast<int64_t>(dp) * tp));
      for (int ep : eps) {
        const bool sharded = dp > 1 || static_cast<int64_t>(dp) * tp / ep > 1;
        for (int vpp = 1; vpp <= o.max_vpp; ++vpp) {
          if (vpp > 1 && (pp < 2 || m.layers % (static_cast<int64_t>(pp) * vpp) != 0)) continue;
          for (int64_t mb : o.micro_batches) {
            if (per_replica % mb != 0) continue;
            const int64_t micro = per_replica / mb;
            if (vpp > 1 && micro % pp != 0) continue;
            std::vector<Schedule> schedules = {Schedule::kOneFOneB};
            if (vpp > 1) schedules = {Schedule::kInterleaved};
            if (vpp == 1 && pp > 1) schedules.push_back(Schedule::kZeroBubble);
            for (Precision prec : precisions) {
              for (Recompute rc : recomputes) {
                for (int zero = 0; zero <= (sharded ? 3 : 0); ++zero) {
                  for (bool offload : offloads) {
                    ParallelPlan p{.dp = dp, .tp = tp, .pp = pp, .ep = ep, .vpp = vpp, .micro_batch = mb,
                                   .global_batch = batch, .seq_len = o.seq_len, .zero = zero, .recompute = rc,
                                   .precision = prec, .offload_optimizer = offload};
                    const MemoryBreakdown mem = EstimateMemory(m, p);
                    out.candidates += static_cast<int64_t>(schedules.size());
                    if (mem.Total() > capacity || mem.host > host_capacity) continue;
                    out.feasible += static_cast<int64_t>(schedules.size());
                    for (Schedule s : schedules) {
                      p.schedule = s;
                      auto r = EvaluatePlan(m, c, p, eff);
                      if (!r.ok()) return r.status().WithContext("while searching plans");
                      top.Offer(p, *r);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  out.top = top.Take();
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::plan
