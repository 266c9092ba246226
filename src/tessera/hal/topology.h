// Machine topology from hwloc: packages, physical cores, hardware threads
// (PUs), NUMA nodes with their local memory and PUs, and data-cache sizes
// (L1d, L2, L3). Used to size thread pools, pick tile sizes that fit in
// cache, and report the machine in `tessera info`. Discovery runs once per
// process (it reads /sys and /proc; a few ms); if hwloc fails, sysconf()
// supplies core/PU counts and memory and `source` says so. Immutable after
// discovery; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::hal {

struct CacheLevel {
  int level = 0;            // 1, 2, 3
  int64_t size_bytes = 0;   // one instance
  int line_bytes = 0;
  int instances = 0;        // how many in the machine
  int pus_per_instance = 0; // hardware threads sharing one instance
};

struct NumaNode {
  int os_index = 0;
  int64_t memory_bytes = 0;  // local memory
  std::vector<int> pus;      // OS indices of the PUs closest to it
};

struct Topology {
  int packages = 0;
  int cores = 0;  // physical cores
  int pus = 0;    // hardware threads
  int64_t total_memory_bytes = 0;
  std::vector<NumaNode> numa_nodes;
  std::vector<CacheLevel> caches;  // data/unified caches, by level
  std::string source;              // "hwloc 2.9.0" or "sysconf (hwloc failed: ...)"

  // Size of one instance of the level-`level` data cache; 0 if unknown.
  int64_t CacheBytes(int level) const;
  // Multi-line human-readable summary.
  std::string ToString() const;
};

// Runs hwloc discovery (no caching).
StatusOr<Topology> DiscoverTopology();

// The machine's topology, discovered on first call; falls back to sysconf
// with a warning if hwloc fails.
const Topology& MachineTopology();

}  // namespace tessera::hal
