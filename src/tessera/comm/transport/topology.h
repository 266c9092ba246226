// Topology detection for transport selection: which ranks share a host
// (same hostname AND same kernel boot id, so two containers or VMs that
// happen to share a name are not confused, and a rebooted host is a new
// host), which NUMA node each rank runs on (hwloc, via hal/topology.h), and
// the resulting plan: per communicator, one transport per peer (shm for
// peers on this host, tcp for the others) and the host groups hierarchical
// algorithms use. Each rank publishes its RankPlace through the Store;
// DetectTopology gathers them. Thread-safe (pure after discovery).
#pragma once

#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::transport {

struct RankPlace {
  std::string hostname;
  std::string host_key;  // hostname + "/" + boot id (or an override)
  int numa_node = -1;    // NUMA node of the CPU the rank started on; -1 unknown
  int cpus = 0;          // CPUs usable by the rank
  int pid = 0;
  std::string Serialize() const;
  static StatusOr<RankPlace> Parse(const std::string& text);
};

// This process's place. host_override (tests), else the TESSERA_HOST_ID
// knob, replaces hostname and key.
RankPlace LocalPlace(const std::string& host_override = "");

struct TopologyPlan {
  std::vector<RankPlace> ranks;           // by rank
  std::vector<std::vector<int>> hosts;    // ranks grouped by host, hosts ordered by their lowest rank
  std::vector<int> host_of;               // rank -> index into hosts
  std::vector<int> local_rank;            // rank -> index within its host group
  TransportKind transport = TransportKind::kShm;  // the communicator's flat transport
  std::string reason;                     // why that transport

  bool single_host() const { return hosts.size() == 1; }
  // Multi-line report for `tessera topo` and TESSERA_DEBUG=INFO.
  std::string ToString(int my_rank) const;
};

// Collective over `store` (keys "place/<rank>"): publishes this rank's
// place, gathers all and plans. requested: kAuto picks shm when every rank
// is on one host, tcp otherwise; kShm across hosts is an error.
StatusOr<TopologyPlan> DetectTopology(Store& store, int rank, int size, const RankPlace& mine,
                                      TransportKind requested, Timeout timeout);

}  // namespace tessera::comm::transport
