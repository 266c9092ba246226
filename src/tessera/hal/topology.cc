#include "tessera/hal/topology.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "tessera/base/logging.h"

namespace tessera::hal {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.4g} {}", v, units[u]);
}

std::string PuList(const std::vector<int>& pus) {
  std::string out;
  for (size_t i = 0; i < pus.size(); ++i) {
    // Compress consecutive runs: 0-15,32-47.
    size_t j = i;
    while (j + 1 < pus.size() && pus[j + 1] == pus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j > i ? fmt::format("{}-{}", pus[i], pus[j]) : fmt::format("{}", pus[i]);
    i = j;
  }
  return out;
}

Topology SysconfTopology(const std::string& why) {
  Topology t;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  t.packages = 1;
  t.pus = n > 0 ? static_cast<int>(n) : 1;
  t.cores = t.pus;
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) t.total_memory_bytes = static_cast<int64_t>(pages) * page_size;
  NumaNode node;
  node.memory_bytes = t.total_memory_bytes;
  for (int i = 0; i < t.pus; ++i) node.pus.push_back(i);
  t.numa_nodes.push_back(std::move(node));
  t.source = fmt::format("sysconf (hwloc failed: {})", why);
  return t;
}

}  // namespace

int64_t Topology::CacheBytes(int level) const {
  for (const CacheLevel& c : caches) {
    if (c.level == level) return c.size_bytes;
  }
  return 0;
}

std::string Topology::ToString() const {
  std::string out = fmt::format("{} package(s), {} core(s), {} PU(s), {} memory  [{}]\n", packages, cores, pus,
                                FormatBytes(total_memory_bytes), source);
  for (const NumaNode& n : numa_nodes) {
    out += fmt::format("  NUMA node {}: {}, PUs {}\n", n.os_index, FormatBytes(n.memory_bytes), PuList(n.pus));
  }
  for (const CacheLevel& c : caches) {
    out += fmt::format("  L{}{}: {} x {} ({} B lines, shared by {} PU(s))\n", c.level, c.level == 1 ? "d" : "",
                       c.instances, FormatBytes(c.size_bytes), c.line_bytes, c.pus_per_instance);
  }
  return out;
}

StatusOr<Topology> DiscoverTopology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return Internal("hwloc_topology_init failed");
  HwlocTopology topo(raw);
  if (hwloc_topology_load(topo.get()) != 0) return Internal("hwloc_topology_load failed");

  Topology t;
  const unsigned version = hwloc_get_api_version();
  t.source = fmt::format("hwloc {}.{}.{}", version >> 16, (version >> 8) & 0xff, version & 0xff);
  t.packages = std::max(1, hwloc_get_nbobjs_by_type(topo.get(), HWLOC_OBJ_PACKAGE));
  t.cores = hwloc_get_nbobjs_by_type(topo.get(), HWLOC_OBJ_CORE);
  t.pus = hwloc_get_nbobjs_by_type(topo.get(), HWLOC_OBJ_PU);
  if (t.pus <= 0) return Internal("hwloc found no processing units");
  if (t.cores <= 0) t.cores = t.pus;
  t.total_memory_bytes = static_cast<int64_t>(hwloc_get_root_obj(topo.get())->total_memory);

  const int num_numa = hwloc_get_nbobjs_by_type(topo.get(), HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < num_numa; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo.get(), HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    NumaNode node;
    node.os_index = static_cast<int>(obj->os_index);
    node.memory_bytes = static_cast<int64_t>(obj->attr->numanode.local_memory);
    unsigned pu;
    hwloc_bitmap_foreach_begin(pu, obj->cpuset) { node.pus.push_back(static_cast<int>(pu)); }
    hwloc_bitmap_foreach_end();
    t.numa_nodes.push_back(std::move(node));
  }

  const std::pair<int, hwloc_obj_type_t> kLevels[] = {
      {1, HWLOC_OBJ_L1CACHE}, {2, HWLOC_OBJ_L2CACHE}, {3, HWLOC_OBJ_L3CACHE}};
  for (const auto& [level, type] : kLevels) {
    const int n = hwloc_get_nbobjs_by_type(topo.get(), type);
    CacheLevel c;
    c.level = level;
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t obj = hwloc_get_obj_by_type(topo.get(), type, static_cast<unsigned>(i));
      if (obj->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
      c.instances++;
      c.size_bytes = std::max<int64_t>(c.size_bytes, static_cast<int64_t>(obj->attr->cache.size));
      c.line_bytes = std::max(c.line_bytes, static_cast<int>(obj->attr->cache.linesize));
      c.pus_per_instance = std::max(c.pus_per_instance, hwloc_bitmap_weight(obj->cpuset));
    }
    if (c.instances > 0 && c.size_bytes > 0) t.caches.push_back(c);
  }
  return t;
}

const Topology& MachineTopology() {
  static const Topology topology = [] {
    StatusOr<Topology> t = DiscoverTopology();
    if (t.ok()) {
      TLOG(DEBUG, "topology: {}", t->ToString());
      return std::move(t).value();
    }
    TLOG(WARN, "hwloc topology discovery failed ({}); using sysconf", t.status().ToString());
    return SysconfTopology(t.status().message());
  }();
  return topology;
}

}  // namespace tessera::hal
