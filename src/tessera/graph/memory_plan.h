// Static memory planning for a graph executor: packs buffers with known
// lifetimes into one arena so that buffers alive at the same time never share
// bytes, while buffers with disjoint lifetimes reuse the same memory.
//
// Each request has a size and a lifetime [first, last] in step indices (both
// inclusive): two requests conflict when their lifetimes share a step. Sizes
// are rounded up to `alignment`; every offset is a multiple of it.
//
// Algorithm (offline, the "greedy by size" best fit of TFLite's ArenaPlanner,
// PyTorch's static runtime and MXNet): requests are placed one at a time in a
// fixed order; each goes into the smallest gap between the already placed
// requests that conflict with it which fits it (lowest such gap on ties), or
// above the highest of them when no gap fits. Several orders are tried —
// decreasing size (ties: longer lifetime, then index), decreasing size x
// lifetime, and first use — and the smallest arena is kept. An order is
// abandoned as soon as its arena reaches the best one so far, and the search
// stops once an order reaches the lower bound.
//
// Bound: peak_live_bytes <= arena_bytes <= sum of the rounded sizes. On
// training-like interval sets (activations kept until a mirrored backward,
// plus short-lived temporaries) the arena is typically within a few percent
// of peak_live_bytes. Cost: O(n^2) time at worst and O(n) memory for n
// requests (20k requests plan in a fraction of a second).
//
// Invalid requests (bytes <= 0, last < first) or alignment <= 0 throw OpError.
// Thread-safety: both functions are pure (no shared state); call them from any
// thread concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::graph {

struct BufferRequest {
  int64_t bytes = 0;  // > 0
  int first = 0;      // step index of the producing node (inclusive)
  int last = 0;       // step index of the last reader (inclusive), >= first
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per request, byte offset into the arena, each a multiple of `alignment`
  int64_t arena_bytes = 0;       // max over requests of offset + rounded size
  int64_t peak_live_bytes = 0;   // lower bound: max over steps of the sum of the (rounded) sizes live at that step
  int64_t alignment = 64;
};

// Assigns offsets so that two requests whose [first, last] intervals overlap
// never overlap in memory.
MemoryPlan PlanMemory(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

// Checks a plan: every offset aligned and non-negative, no two interval-
// overlapping requests overlap in bytes, the arena covers every request.
// Returns "" when valid, else a message naming the offending request(s).
std::string ValidateMemoryPlan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);

// `bytes` rounded up to a multiple of `alignment` (> 0).
int64_t RoundUpBytes(int64_t bytes, int64_t alignment);

// Max over steps of the summed rounded sizes of the requests live at that step.
int64_t PeakLiveBytes(const std::vector<BufferRequest>& requests, int64_t alignment);

}  // namespace tessera::graph
