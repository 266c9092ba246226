// Measured peak compute and memory bandwidth of this machine: the
// denominator of MFU ("MFU is model FLOPs per second divided by the peak
// FLOP/s that `tessera info` measures for this machine and dtype").
//
// Compute peak is measured, not looked up: a register-only micro-benchmark
// of independent multiply-add chains (16 accumulators, enough to hide FMA
// latency), 1 thread and NumThreads() threads (OpenMP):
//   fp32: AVX-512 VFMADD (AVX2+FMA fallback); 2 FLOPs per lane per FMA.
//   bf16: AVX-512 VDPBF16PS, 2 FLOPs per bf16 multiply-add (64 per zmm
//         instruction). Without AVX512-BF16, bf16 is computed in fp32 and its
//         peak is the fp32 peak. AMX is not measured.
// Memory bandwidth is a STREAM triad a[i] = b[i] + s*c[i] over doubles,
// arrays several times the last-level cache, allocated once and first
// touched by the measuring threads, counting 24 bytes per element.
//
// Measuring takes ~0.4-0.6 s, so results are cached in a JSON file
// ($TESSERA_PEAK_CACHE, else $XDG_CACHE_HOME/tessera/peak.json, else
// ~/.cache/tessera/peak.json) keyed by CPU model, thread count and ISAs;
// TESSERA_PEAK_CACHE=off disables the cache. A busy machine measures low:
// rerun with `tessera info --remeasure` when it is idle. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tessera/base/status.h"

namespace tessera::hal {

struct PeakInfo {
  std::string cpu_model;
  int threads = 1;          // threads of the all-core measurements
  std::string fp32_isa;     // "avx512" or "avx2"
  std::string bf16_isa;     // "avx512_bf16" or "fp32"
  double fp32_flops_per_core = 0;  // FLOP/s, 1 thread
  double fp32_flops = 0;           // FLOP/s, `threads` threads
  double bf16_flops_per_core = 0;
  double bf16_flops = 0;
  double triad_bytes_per_s_per_core = 0;  // bytes/s, 1 thread
  double triad_bytes_per_s = 0;           // bytes/s, `threads` threads
  double measure_seconds = 0;  // how long the measurement took
  bool from_cache = false;
  // Other processes visibly competed for the cores during the measurement
  // (all-thread figures below 1-thread ones); such results are not cached.
  bool disturbed = false;
  std::string cache_key;

  // Peak FLOP/s for computing in tensor dtype `dtype` ("fp32", "bf16",
  // "fp16", ...). Only bf16 has its own units; other dtypes compute in fp32.
  double FlopsFor(std::string_view dtype, bool all_cores = true) const;
  std::string ToString() const;
};

// Measures now with `threads` threads for the all-core figures (no cache).
PeakInfo MeasurePeak(int threads);

// The machine's peak for NumThreads() threads: from the cache when present,
// else measured once and cached. remeasure = true measures again and
// rewrites the cache entry. The returned reference stays valid for the
// process lifetime (a remeasure returns a new object).
const PeakInfo& MachinePeak(bool remeasure = false);

// The cache file used (empty when caching is off).
std::string PeakCachePath();

// The cache key MachinePeak uses for `threads` threads on this machine.
std::string PeakCacheKey(int threads);
// Cache file access: the entry for `key` (nullopt when the file or entry is
// missing; an error when the file or entry is malformed), and an atomic
// merge of `info` under info.cache_key.
StatusOr<std::optional<PeakInfo>> ReadPeakCache(const std::string& path, const std::string& key);
Status WritePeakCache(const std::string& path, const PeakInfo& info);

}  // namespace tessera::hal
