#include "tessera/comm/transport/topology.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tessera/base/knobs.h"
#include "tessera/comm/transport/shm/waiter.h"
#include "tessera/hal/topology.h"

namespace tessera::comm::transport {
namespace {

base::Knob<std::string> kHostIdKnob("TESSERA_HOST_ID", "",
                                    "communication topology: pretend this process runs on host <value> (ranks with "
                                    "different values are treated as different hosts; tests of multi-host jobs on "
                                    "one machine, e.g. in network namespaces)");

std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "unknown-boot" : id;
}

int CurrentNumaNode() {
  const int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  const hal::Topology& topo = hal::MachineTopology();
  for (const hal::NumaNode& node : topo.numa_nodes) {
    if (std::find(node.pus.begin(), node.pus.end(), cpu) != node.pus.end()) return node.os_index;
  }
  return -1;
}

}  // namespace

std::string RankPlace::Serialize() const {
  return fmt::format("{}\n{}\n{}\n{}\n{}", hostname, host_key, numa_node, cpus, pid);
}

StatusOr<RankPlace> RankPlace::Parse(const std::string& text) {
  std::vector<std::string> f;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) f.push_back(line);
  if (f.size() != 5) return DataLoss("malformed rank place '{}'", text);
  RankPlace p;
  p.hostname = f[0];
  p.host_key = f[1];
  try {
    p.numa_node = std::stoi(f[2]);
    p.cpus = std::stoi(f[3]);
    p.pid = std::stoi(f[4]);
  } catch (const std::exception&) {
    return DataLoss("malformed rank place '{}'", text);
  }
  return p;
}

RankPlace LocalPlace(const std::string& host_override) {
  RankPlace p;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) std::snprintf(name, sizeof(name), "unknown-host");
  p.hostname = name;
  p.host_key = fmt::format("{}/{}", p.hostname, ReadBootId());
  const std::string override_id = host_override.empty() ? kHostIdKnob.Get() : host_override;
  if (!override_id.empty()) {
    p.hostname = override_id;
    p.host_key = fmt::format("override/{}", override_id);
  }
  p.numa_node = CurrentNumaNode();
  p.cpus = shm::UsableCpus();
  p.pid = getpid();
  return p;
}

StatusOr<TopologyPlan> DetectTopology(Store& store, int rank, int size, const RankPlace& mine,
                                      TransportKind requested, Timeout timeout) {
  TESSERA_RETURN_IF_ERROR(store.SetString(fmt::format("place/{}", rank), mine.Serialize()));
  TopologyPlan plan;
  plan.ranks.resize(size);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      plan.ranks[r] = mine;
      continue;
    }
    auto left = std::chrono::duration_cast<Timeout>(deadline - std::chrono::steady_clock::now());
    StatusOr<std::string> text = store.GetString(fmt::format("place/{}", r), std::max(left, Timeout(0)));
    if (!text.ok()) {
      return text.status().WithContext(
          fmt::format("rank {} did not join within {} ms (store {})", r, timeout.count(), store.Address()));
    }
    TESSERA_ASSIGN_OR_RETURN(plan.ranks[r], RankPlace::Parse(*text));
  }
  plan.host_of.assign(size, -1);
  plan.local_rank.assign(size, -1);
  for (int r = 0; r < size; ++r) {
    int h = -1;
    for (size_t i = 0; i < plan.hosts.size(); ++i) {
      if (plan.ranks[plan.hosts[i][0]].host_key == plan.ranks[r].host_key) h = static_cast<int>(i);
    }
    if (h < 0) {
      h = static_cast<int>(plan.hosts.size());
      plan.hosts.emplace_back();
    }
    plan.local_rank[r] = static_cast<int>(plan.hosts[h].size());
    plan.hosts[h].push_back(r);
    plan.host_of[r] = h;
  }
  switch (requested) {
    case TransportKind::kAuto:
      plan.transport = plan.single_host() ? TransportKind::kShm : TransportKind::kTcp;
      plan.reason = plan.single_host() ? "all ranks on one host: shared memory"
                                       : fmt::format("ranks on {} hosts: tcp between hosts (shm inside each host "
                                                     "for hierarchical algorithms)",
                                                     plan.hosts.size());
      break;
    case TransportKind::kShm:
      if (!plan.single_host()) {
        return FailedPrecondition("transport shm was requested but the ranks are on {} hosts ({} and {})",
                                  plan.hosts.size(), plan.ranks[plan.hosts[0][0]].hostname,
                                  plan.ranks[plan.hosts[1][0]].hostname);
      }
      plan.transport = TransportKind::kShm;
      plan.reason = "shm requested";
      break;
    case TransportKind::kTcp:
      plan.transport = TransportKind::kTcp;
      plan.reason = "tcp requested";
      break;
  }
  return plan;
}

std::string TopologyPlan::ToString(int my_rank) const {
  std::string out = fmt::format("{} rank(s) on {} host(s); transport {} ({})\n", ranks.size(), hosts.size(),
                                TransportKindName(transport), reason);
  for (size_t h = 0; h < hosts.size(); ++h) {
    const RankPlace& first = ranks[hosts[h][0]];
    out += fmt::format("  host {} '{}' ({}): ranks", h, first.hostname, first.host_key);
    for (int r : hosts[h]) out += fmt::format(" {}{}", r, r == my_rank ? "*" : "");
    out += "\n";
    for (int r : hosts[h]) {
      out += fmt::format("    rank {}: pid {}, NUMA node {}, {} usable CPUs; to rank {}: {}\n", r, ranks[r].pid,
                         ranks[r].numa_node, ranks[r].cpus, my_rank,
                         r == my_rank ? "self"
                         : host_of[r] == host_of[my_rank] && transport == TransportKind::kShm
                             ? "shm"
                         : host_of[r] == host_of[my_rank] ? "tcp (flat) / shm (hierarchical)"
                                                          : "tcp");
    }
  }
  return out;
}

}  // namespace tessera::comm::transport
