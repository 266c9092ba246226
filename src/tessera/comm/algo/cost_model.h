// The alpha-beta(-gamma) cost model that picks an algorithm per call:
// predicted time = steps x latency + bytes moved x seconds-per-byte +
// bytes reduced x seconds-per-byte, per (algorithm, transport), as NCCL's
// tuning model does. The constants are measured on this machine at a
// communicator's first use, with all its ranks running at once (so cache
// contention and ranks outnumbering cores are priced in), agreed across
// ranks (max over ranks, so every rank predicts the same and picks the same
// algorithm), and cached in a JSON file keyed by transport, rank count,
// CPU count and host ($TESSERA_COMM_MODEL_CACHE, else
// $XDG_CACHE_HOME/tessera/comm_model.json or ~/.cache/tessera/...; "off"
// disables it). Pure functions and value types; the cache file is
// replaced atomically. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "tessera/base/status.h"
#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/api/types.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::algo {

struct CostConstants {
  // shm windows (shm transport only).
  double barrier_s = 2e-6;          // one step barrier among all ranks
  double copy_s_per_byte = 1e-10;   // memcpy per rank while all ranks copy
  double reduce_s_per_byte = 1e-10; // reduction, per source byte read
  // Point-to-point messages over the communicator's transport.
  double p2p_latency_s = 5e-6;      // one zero-byte message step (ring)
  double p2p_s_per_byte = 3e-10;    // streaming cost per byte per step
  bool measured = false;
  // The measurement rounds varied wildly (other processes competed for the
  // cores): used for this communicator but not cached.
  bool disturbed = false;
  std::string source = "built-in defaults";

  std::string ToString() const;
  std::string Serialize() const;  // one line of key=value
  static StatusOr<CostConstants> Parse(const std::string& text);
};

// Built-in defaults for a transport (used when calibration is off).
CostConstants DefaultConstants(transport::TransportKind kind, int size);

// Inputs that every rank agrees on.
struct ModelInputs {
  int size = 1;
  transport::TransportKind transport = transport::TransportKind::kShm;
  size_t shm_window_bytes = 0;
  size_t shm_ll_bytes = 0;  // low-latency slot capacity
  bool shm_single_copy = false;  // data movement pulls peers' buffers directly
};

// One line of key=value for a communicator's whole model (inputs and
// constants): what `tessera sim calibrate` records so that the twin prices
// collectives exactly as the selector of a communicator of that size does.
std::string SerializeModel(const ModelInputs& in, const CostConstants& c);
StatusOr<std::pair<ModelInputs, CostConstants>> ParseModel(const std::string& text);

// Predicted seconds of `algo` for `args`; nullopt when `algo` cannot run
// `args.kind` on this transport.
std::optional<double> PredictSeconds(Algorithm algo, const CollectiveArgs& args, const ModelInputs& in,
                                     const CostConstants& c);

// Cache file (empty when off) and key.
std::string CostCachePath();
std::string CostCacheKey(transport::TransportKind kind, int size, const std::string& host_key);
StatusOr<std::optional<CostConstants>> ReadCostCache(const std::string& path, const std::string& key);
Status WriteCostCache(const std::string& path, const std::string& key, const CostConstants& c);

// Measures the constants collectively (every rank of env calls it at the
// same point); returns the per-rank maxima, identical on all ranks. Takes
// tens of milliseconds.
StatusOr<CostConstants> MeasureConstants(AlgoEnv& env);

}  // namespace tessera::comm::algo
