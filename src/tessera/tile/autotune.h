// The autotuner's mode and on-disk cache of winners.
//   TESSERA_TUNE=0      never tune, never read the cache: default heuristics
//   TESSERA_TUNE=1      (default) use cached winners; tune a shape class
//                       the cache lacks on its first use (large GEMMs only)
//   TESSERA_TUNE=force  retune every shape class once per process and
//                       overwrite its entry
//   TESSERA_TUNE_CACHE  the cache file; default $XDG_CACHE_HOME/tessera/
//                       tune.json or ~/.cache/tessera/tune.json
// Entries are keyed by shape class (GEMM type, transposes, M/N/K rounded to
// the nearest power of two, thread count; or a convolution's geometry) and
// the CPU (its brand string and ISA features), so a cache copied to another
// machine is not misread. The file is JSON, one object per section
// ({"version": 1, "gemm": {key: entry}, "conv": {key: entry}}; the GEMM
// tuner owns "gemm", ops/conv's algorithm choice "conv"), written atomically
// (temporary file + rename) after merging what other processes wrote; an
// unreadable or malformed cache is ignored with a warning, never fatal.
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/tile/kernels.h"

namespace tessera::tile {

enum class TuneMode { kOff, kOn, kForce };
TuneMode CurrentTuneMode();
std::string TuneCachePath();

// Tests and tools: override TESSERA_TUNE / TESSERA_TUNE_CACHE in this
// process (nullopt / empty: back to the environment). Changing the path
// also resets the process-wide cache.
void SetTuneModeOverride(std::optional<TuneMode> mode);
void SetTuneCachePathOverride(const std::string& path);

struct TunedGemm {
  std::string kernel;      // KernelInfo::name
  int64_t mc = 0, nc = 0;  // blocks
  int tm = 1, tn = 1;      // thread grid
  double gflops = 0;         // the winner, on the measured problem
  double default_gflops = 0; // the default configuration, same problem
  int64_t m = 0, n = 0, k = 0;  // the problem measured (maybe scaled down)
};

nlohmann::json ToJson(const TunedGemm& t);
// Null when a field is missing or of the wrong type.
std::optional<TunedGemm> TunedGemmFromJson(const nlohmann::json& j);

// "bf16f32 tn m4096 n1024 k256 t2" (sizes rounded to the nearest power of
// two on a log scale); the CPU part is added by the cache.
std::string GemmShapeKey(GemmType type, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int threads);

class TuneCache {
 public:
  // The process-wide cache at TuneCachePath() (loaded on first use).
  static TuneCache& Get();

  // The "gemm" section, typed.
  std::optional<TunedGemm> Find(const std::string& shape_key);
  // Records the winner in memory and in the file.
  void Put(const std::string& shape_key, const TunedGemm& tuned);

  // Any section, as JSON: the entry of shape_key on this CPU, if present.
  std::optional<nlohmann::json> FindEntry(const std::string& section, const std::string& shape_key);
  // Records an entry in memory and in the file (merged with what other
  // processes wrote, replaced atomically).
  void PutEntry(const std::string& section, const std::string& shape_key, const nlohmann::json& entry);
  // Forgets what was loaded (tests: after changing TESSERA_TUNE_CACHE).
  void Reset();

 private:
  void LoadLocked();
  std::string FullKey(const std::string& shape_key) const;

  std::mutex mu_;
  bool loaded_ = false;
  std::string path_;
  nlohmann::json sections_ = nlohmann::json::object();  // section -> {full key: entry}
};

}  // namespace tessera::tile
