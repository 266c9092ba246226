// ClusterSpec: a cluster of super-nodes, loaded from TOML (configs/clusters/).
// A cluster is `supernodes` identical super-nodes; each holds `devices`
// accelerators joined by an intra-node fabric (a bus/switch, or a two-stage
// fat-tree such as UBL128); a scale-out network joins the devices of
// different super-nodes (each device owns its NIC ports). Both fabrics are
// described by one NetworkSpec (kinds: switch, leaf_spine, fat_tree,
// rail_optimized; any of them with `planes` > 1 is multi-plane).
// All values are SI inside (bytes, bytes/s, FLOP/s, seconds, watts, °C);
// the TOML keys carry their units (hbm_gb, port_gbit, latency_us, ...).
// docs/sim.md lists every key and the source of each preset's numbers.
// Value types; immutable after loading, safe to share across threads.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/base/status.h"

namespace tessera::sim {

enum class Precision { kFp32, kBf16, kFp8 };

struct DeviceSpec {
  std::string name;
  double peak_flops_fp32 = 0;  // dense FLOP/s
  double peak_flops_bf16 = 0;
  double peak_flops_fp8 = 0;   // 0: no fp8 units (bf16 rate is used)
  double hbm_bytes = 0;
  double hbm_bw = 0;           // bytes/s
  double ddr_link_bw = 0;      // host DDR tier <-> device, bytes/s per direction
  double tdp_w = 0;            // power limit (DVFS throttles above it)
  double idle_w = 0;
  double thermal_limit_c = 0;  // junction limit; clocks throttle past it
  double ambient_c = 25;
  double thermal_resistance_c_per_w = 0;  // steady-state rise per watt
  double mtbf_hours = 0;       // per card

  double PeakFlops(Precision p) const;
};

enum class NetworkKind {
  kSwitch,         // one non-blocking crossbar (NVSwitch, a UB switch plane)
  kLeafSpine,      // two-stage fat-tree: leaves of contiguous endpoints, spines (UBL128)
  kFatTree,        // k-ary three-tier fat-tree (Al-Fares et al.): k^3/4 endpoints per plane
  kRailOptimized,  // leaf-spine whose leaf holds local device `r` of a group of nodes (rail r)
};
std::string_view NetworkKindName(NetworkKind kind);

struct NetworkSpec {
  NetworkKind kind = NetworkKind::kSwitch;
  int planes = 1;             // independent copies; endpoint port p attaches to plane p % planes
  int endpoint_ports = 1;     // ports per endpoint (all planes together)
  double port_bw = 0;         // bytes/s per endpoint port per direction
  // leaf_spine / rail_optimized (per plane):
  int endpoints_per_leaf = 0; // leaf_spine: endpoints (ports) per leaf; rail_optimized: nodes per leaf
  int spines = 0;
  int uplinks_per_spine = 1;  // parallel links from each leaf to each spine
  double uplink_bw = 0;       // bytes/s per leaf-spine link per direction
  // fat_tree: switch radix (all links port_bw).
  int k = 0;
  double link_latency_s = 0;      // per link (propagation + serialization start)
  double switch_latency_s = 0;    // per switch traversed
  double endpoint_latency_s = 0;  // per message at the endpoints (software, NIC)
  double efficiency = 1.0;        // achievable fraction of the link rate

  // Per endpoint per direction, all ports, times efficiency.
  double EndpointBandwidth() const { return endpoint_ports * port_bw * efficiency; }
  // Leaf down capacity / up capacity (1 = full bisection; > 1 oversubscribed).
  double Oversubscription() const;
  // Switches on the longest shortest path between two endpoints.
  int MaxSwitchHops() const;
  // End-to-end start-up latency of one message over `switch_hops` switches.
  double PathLatency(int switch_hops) const;
  double MaxPathLatency() const { return PathLatency(MaxSwitchHops()); }
};

struct SuperNodeSpec {
  int devices = 1;
  double ddr_bytes = 0;  // host DDR tier of the whole super-node
  NetworkSpec fabric;    // endpoints: the super-node's devices
};

struct ClusterSpec {
  std::string name;
  std::string description;
  std::string source;  // file it came from
  DeviceSpec device;
  SuperNodeSpec supernode;
  int supernodes = 1;
  NetworkSpec network;  // scale-out; endpoints: every device. Unused when supernodes == 1.
  bool has_network = false;

  int64_t TotalDevices() const { return static_cast<int64_t>(supernodes) * supernode.devices; }
  double HostBytesPerDevice() const { return supernode.ddr_bytes / supernode.devices; }
  // Checks ranges and that each fabric can hold its endpoints.
  Status Validate() const;
  // Multi-line human summary.
  std::string Describe() const;
};

// Loads and validates a cluster spec; errors name file:line and the key.
StatusOr<ClusterSpec> LoadClusterSpec(const std::string& path);
StatusOr<ClusterSpec> ParseClusterSpec(const std::string& toml_text, const std::string& source);

}  // namespace tessera::sim
