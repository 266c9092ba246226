#include "tessera/graph/memory_plan.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "tessera/base/error.h"

namespace tessera::graph {
namespace {

// The placed requests, sorted by offset, as parallel arrays: the conflict
// test over `first`/`last` vectorizes, and the gap walk reads offsets and ends
// sequentially.
struct PlacedSet {
  std::vector<int> first;
  std::vector<int> last;
  std::vector<int64_t> offset;
  std::vector<int64_t> end;
  std::vector<uint8_t> conflict;  // scratch: 1 where the lifetime overlaps the request being placed

  void Insert(int f, int l, int64_t off, int64_t e) {
    const size_t pos = std::upper_bound(offset.begin(), offset.end(), off) - offset.begin();
    first.insert(first.begin() + pos, f);
    last.insert(last.begin() + pos, l);
    offset.insert(offset.begin() + pos, off);
    end.insert(end.begin() + pos, e);
  }
};

// Throws OpError on bad input. Bounding the total keeps every offset, end and
// gap computed below (all within [-total, 2 * total]) clear of overflow.
void CheckInputs(const std::vector<BufferRequest>& requests, int64_t alignment) {
  constexpr int64_t kMaxTotal = std::numeric_limits<int64_t>::max() / 4;
  if (alignment <= 0 || alignment > kMaxTotal) {
    throw OpError(fmt::format("PlanMemory: alignment must be in (0, {}], got {}", kMaxTotal, alignment));
  }
  int64_t total = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& r = requests[i];
    if (r.bytes <= 0) throw OpError(fmt::format("PlanMemory: request {} has bytes {} (must be > 0)", i, r.bytes));
    if (r.last < r.first) {
      throw OpError(fmt::format("PlanMemory: request {} has last {} < first {}", i, r.last, r.first));
    }
    if (r.bytes > kMaxTotal - alignment || (total += RoundUpBytes(r.bytes, alignment)) > kMaxTotal) {
      throw OpError(fmt::format("PlanMemory: requests up to {} total more than {} bytes", i, kMaxTotal));
    }
  }
}

// Places the requests one by one in `order`, each into the best-fitting gap
// left by the placed requests whose lifetimes conflict; fills `offsets` and
// returns the arena size. Stops early, returning a value >= `limit`, once the
// arena reaches `limit` (a plan at least as good is already known). O(n) per
// request: a vectorized pass flags the conflicting placed requests, the gap
// walk skips unflagged ones 8 at a time, and the insertion shifts the arrays.
int64_t PlaceInOrder(const std::vector<BufferRequest>& requests, const std::vector<int64_t>& sizes,
                     const std::vector<int>& order, int64_t limit, std::vector<int64_t>& offsets) {
  const size_t n = order.size();
  PlacedSet placed;
  for (auto* v : {&placed.first, &placed.last}) v->reserve(n);
  for (auto* v : {&placed.offset, &placed.end}) v->reserve(n);
  placed.conflict.assign(n + 8, 0);
  int64_t arena = 0;
  for (int idx : order) {
    const int64_t size = sizes[idx];
    const int first = requests[idx].first;
    const int last = requests[idx].last;
    const size_t m = placed.offset.size();
    const int* p_first = placed.first.data();
    const int* p_last = placed.last.data();
    uint8_t* conflict = placed.conflict.data();
    for (size_t i = 0; i < m; ++i) conflict[i] = static_cast<uint8_t>((p_last[i] >= first) & (p_first[i] <= last));

    int64_t cursor = 0;  // highest end among the conflicting requests seen so far
    int64_t best_offset = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    const int64_t* p_offset = placed.offset.data();
    const int64_t* p_end = placed.end.data();
    for (size_t base = 0; base < m && best_gap != size; base += 8) {  // stop at a perfect fit
      uint64_t word;
      std::memcpy(&word, conflict + base, sizeof(word));
      if (m - base < 8) word &= (uint64_t{1} << (8 * (m - base))) - 1;  // bytes past m are stale
      // Branchless best fit over the conflicting requests: a gap fits when
      // gap - size is in [0, best_gap - size), one unsigned comparison.
      auto visit = [&](size_t j) {
        const int64_t gap = p_offset[j] - cursor;
        const bool better = static_cast<uint64_t>(gap - size) < static_cast<uint64_t>(best_gap - size);
        best_gap = better ? gap : best_gap;
        best_offset = better ? cursor : best_offset;
        cursor = std::max(cursor, p_end[j]);
      };
      if (word == 0x0101010101010101) {  // all 8 conflict: common among long-lived buffers
        for (size_t j = base; j < base + 8; ++j) visit(j);
        continue;
      }
      while (word != 0) {
        visit(base + static_cast<size_t>(std::countr_zero(word)) / 8);
        word &= word - 1;
      }
    }
    const int64_t offset = best_offset >= 0 ? best_offset : cursor;
    offsets[idx] = offset;
    arena = std::max(arena, offset + size);
    if (arena >= limit) return arena;
    placed.Insert(first, last, offset, offset + size);
  }
  return arena;
}

}  // namespace

int64_t RoundUpBytes(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

int64_t PeakLiveBytes(const std::vector<BufferRequest>& requests, int64_t alignment) {
  // Sweep over lifetime events: a request adds its size at `first` and removes
  // it at `last + 1`; removals sort before additions at the same step.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * requests.size());
  for (const BufferRequest& r : requests) {
    const int64_t size = RoundUpBytes(r.bytes, alignment);
    events.emplace_back(r.first, size);
    events.emplace_back(static_cast<int64_t>(r.last) + 1, -size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  int64_t peak = 0;
  for (const auto& [step, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

MemoryPlan PlanMemory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  CheckInputs(requests, alignment);
  const int n = static_cast<int>(requests.size());
  MemoryPlan plan;
  plan.alignment = alignment;
  plan.offsets.assign(n, 0);
  if (n == 0) return plan;
  plan.peak_live_bytes = PeakLiveBytes(requests, alignment);

  std::vector<int64_t> sizes(n);
  std::vector<int64_t> lifetimes(n);
  for (int i = 0; i < n; ++i) {
    sizes[i] = RoundUpBytes(requests[i].bytes, alignment);
    lifetimes[i] = static_cast<int64_t>(requests[i].last) - requests[i].first + 1;
  }
  std::vector<int> base(n);
  std::iota(base.begin(), base.end(), 0);

  // Candidate orders, the strongest first; each comparator ends on the index
  // so every order is deterministic.
  auto by_size = [&](int a, int b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    if (lifetimes[a] != lifetimes[b]) return lifetimes[a] > lifetimes[b];
    return a < b;
  };
  auto by_area = [&](int a, int b) {
    // size x lifetime compared in long double: the product can exceed int64.
    const long double area_a = static_cast<long double>(sizes[a]) * lifetimes[a];
    const long double area_b = static_cast<long double>(sizes[b]) * lifetimes[b];
    if (area_a != area_b) return area_a > area_b;
    return by_size(a, b);
  };
  auto by_first_use = [&](int a, int b) {
    if (requests[a].first != requests[b].first) return requests[a].first < requests[b].first;
    return by_size(a, b);
  };

  std::vector<int64_t> offsets(n);
  plan.arena_bytes = std::numeric_limits<int64_t>::max();
  auto try_order = [&](auto comparator) {
    if (plan.arena_bytes == plan.peak_live_bytes) return;  // already optimal
    std::vector<int> order = base;
    std::sort(order.begin(), order.end(), comparator);
    const int64_t arena = PlaceInOrder(requests, sizes, order, plan.arena_bytes, offsets);
    if (arena < plan.arena_bytes) {  // a complete plan (an aborted one reached the limit)
      plan.arena_bytes = arena;
      plan.offsets.swap(offsets);
    }
  };
  try_order(by_size);
  try_order(by_area);
  try_order(by_first_use);
  return plan;
}

std::string ValidateMemoryPlan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  const int64_t alignment = plan.alignment;
  if (alignment <= 0) return fmt::format("alignment {} is not positive", alignment);
  if (plan.offsets.size() != requests.size()) {
    return fmt::format("plan has {} offsets for {} requests", plan.offsets.size(), requests.size());
  }
  const int n = static_cast<int>(requests.size());
  for (int i = 0; i < n; ++i) {
    const BufferRequest& r = requests[i];
    const int64_t offset = plan.offsets[i];
    if (r.bytes <= 0 || r.last < r.first) {
      return fmt::format("request {} is invalid (bytes {}, first {}, last {})", i, r.bytes, r.first, r.last);
    }
    if (offset < 0 || offset > std::numeric_limits<int64_t>::max() / 2 || r.bytes > plan.arena_bytes) {
      return fmt::format("request {} has offset {} outside arena_bytes {}", i, offset, plan.arena_bytes);
    }
    if (offset % alignment != 0) {
      return fmt::format("request {} offset {} is not a multiple of alignment {}", i, offset, alignment);
    }
    const int64_t end = offset + RoundUpBytes(r.bytes, alignment);
    if (end > plan.arena_bytes) {
      return fmt::format("request {} ends at byte {}, beyond arena_bytes {}", i, end, plan.arena_bytes);
    }
  }
  // Sweep by first use: each request is checked against the later-starting
  // requests that begin within its lifetime (O(n log n + conflicting pairs)).
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (requests[a].first != requests[b].first) return requests[a].first < requests[b].first;
    return a < b;
  });
  for (int k = 0; k < n; ++k) {
    const int a = order[k];
    const int64_t a_begin = plan.offsets[a];
    const int64_t a_end = a_begin + RoundUpBytes(requests[a].bytes, alignment);
    for (int m = k + 1; m < n && requests[order[m]].first <= requests[a].last; ++m) {
      const int b = order[m];
      const int64_t b_begin = plan.offsets[b];
      const int64_t b_end = b_begin + RoundUpBytes(requests[b].bytes, alignment);
      if (a_begin < b_end && b_begin < a_end) {
        const int lo = std::min(a, b);
        const int hi = std::max(a, b);
        return fmt::format(
            "requests {} and {} are live together (steps [{}, {}] and [{}, {}]) but overlap in memory "
            "(bytes [{}, {}) and [{}, {}))",
            lo, hi, requests[lo].first, requests[lo].last, requests[hi].first, requests[hi].last, plan.offsets[lo],
            plan.offsets[lo] + RoundUpBytes(requests[lo].bytes, alignment), plan.offsets[hi],
            plan.offsets[hi] + RoundUpBytes(requests[hi].bytes, alignment));
      }
    }
  }
  return "";
}

}  // namespace tessera::graph
