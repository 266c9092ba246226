#include "tessera/sim/topology.h"

#include <algorithm>
#include <limits>

#include "tessera/base/check.h"

namespace tessera::sim {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t FlowHash(int src, int dst, uint64_t key) {
  return Mix(Mix(Mix(static_cast<uint64_t>(src)) ^ static_cast<uint64_t>(dst)) ^ key);
}

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

}  // namespace

StatusOr<Routing> ParseRouting(std::string_view text) {
  if (text == "ecmp") return Routing::kEcmp;
  if (text == "adaptive") return Routing::kAdaptive;
  return InvalidArgument("unknown routing '{}' (ecmp, adaptive)", text);
}

int Topology::Fabric::Leaf(int e) const {
  switch (spec.kind) {
    case NetworkKind::kSwitch: return 0;
    case NetworkKind::kLeafSpine: return e / spec.endpoints_per_leaf;
    case NetworkKind::kRailOptimized: {
      int node = e / devices_per_node, rail = e % devices_per_node;
      return (node / spec.endpoints_per_leaf) * devices_per_node + rail;
    }
    case NetworkKind::kFatTree: return e / (spec.k / 2);  // edge switch
  }
  return 0;
}

int Topology::Fabric::Build(FlowEngine& engine) {
  const NetworkSpec& n = spec;
  const double access = (n.endpoint_ports / n.planes) * n.port_bw * n.efficiency;
  first_link = engine.num_links();
  for (int plane = 0; plane < n.planes; ++plane) {
    for (int i = 0; i < 2 * endpoints; ++i) engine.AddLink(access);
    if (n.kind == NetworkKind::kLeafSpine || n.kind == NetworkKind::kRailOptimized) {
      leaves = n.kind == NetworkKind::kLeafSpine
                   ? CeilDiv(endpoints, n.endpoints_per_leaf)
                   : CeilDiv(CeilDiv(endpoints, devices_per_node), n.endpoints_per_leaf) * devices_per_node;
      for (int i = 0; i < 2 * leaves * n.spines * n.uplinks_per_spine; ++i) engine.AddLink(n.uplink_bw * n.efficiency);
    } else if (n.kind == NetworkKind::kFatTree) {
      const int half = n.k / 2;
      leaves = CeilDiv(endpoints, half * half);  // pods
      for (int i = 0; i < 4 * leaves * half * half; ++i) engine.AddLink(n.port_bw * n.efficiency);
    }
    if (plane == 0) links_per_plane = engine.num_links() - first_link;
  }
  return engine.num_links() - first_link;
}

int Topology::Fabric::PathsPerPlane(int a, int b) const {
  switch (spec.kind) {
    case NetworkKind::kSwitch: return 1;
    case NetworkKind::kLeafSpine:
    case NetworkKind::kRailOptimized: return Leaf(a) == Leaf(b) ? 1 : spec.spines * spec.uplinks_per_spine;
    case NetworkKind::kFatTree: {
      const int half = spec.k / 2;
      if (Leaf(a) == Leaf(b)) return 1;
      return Leaf(a) / half == Leaf(b) / half ? half : half * half;
    }
  }
  return 1;
}

double Topology::Fabric::PathLinks(int a, int b, int index, std::vector<int>* links) const {
  const int ppp = PathsPerPlane(a, b);
  const int plane = index / ppp, p = index % ppp;
  const int base = first_link + plane * links_per_plane;
  const int e = endpoints;
  links->push_back(base + a);  // up
  int switches = 1;
  const int la = Leaf(a), lb = Leaf(b);
  if (la != lb) {
    if (spec.kind == NetworkKind::kLeafSpine || spec.kind == NetworkKind::kRailOptimized) {
      const int su = spec.spines * spec.uplinks_per_spine;
      links->push_back(base + 2 * e + la * su + p);
      links->push_back(base + 2 * e + leaves * su + lb * su + p);
      switches = 3;
    } else if (spec.kind == NetworkKind::kFatTree) {
      const int half = spec.k / 2;
      const int edges = leaves * half;  // leaves = pods here
      const int e2a = base + 2 * e, a2e = e2a + edges * half, a2c = a2e + edges * half, c2a = a2c + edges * half;
      if (la / half == lb / half) {
        links->push_back(e2a + la * half + p);
        links->push_back(a2e + lb * half + p);
        switches = 3;
      } else {
        const int agg = p / half, j = p % half;
        links->push_back(e2a + la * half + agg);
        links->push_back(a2c + ((la / half) * half + agg) * half + j);
        links->push_back(c2a + ((lb / half) * half + agg) * half + j);
        links->push_back(a2e + lb * half + agg);
        switches = 5;
      }
    }
  }
  links->push_back(base + e + b);  // down
  return spec.PathLatency(switches);
}

StatusOr<Topology> Topology::Build(const ClusterSpec& spec, FlowEngine& engine, Routing routing, int64_t devices) {
  TESSERA_RETURN_IF_ERROR(spec.Validate());
  if (devices <= 0) devices = spec.TotalDevices();
  if (devices > spec.TotalDevices()) {
    return InvalidArgument("{} devices requested; cluster {} has {}", devices, spec.name, spec.TotalDevices());
  }
  Topology t;
  t.routing_ = routing;
  const int d = spec.supernode.devices;
  const int supernodes = static_cast<int>((devices + d - 1) / d);
  t.devices_per_supernode_ = d;
  t.num_devices_ = supernodes * d;
  t.fabrics_.resize(supernodes);
  for (Fabric& f : t.fabrics_) {
    f.spec = spec.supernode.fabric;
    f.endpoints = d;
    f.devices_per_node = d;
    f.Build(engine);
  }
  if (supernodes > 1) {
    t.has_network_ = true;
    t.network_.spec = spec.network;
    t.network_.endpoints = t.num_devices_;
    t.network_.devices_per_node = d;
    t.network_.Build(engine);
  }
  t.capacity_.resize(engine.num_links());
  for (int l = 0; l < engine.num_links(); ++l) t.capacity_[l] = engine.capacity(l);
  return t;
}

const Topology::Fabric& Topology::FabricFor(int src, int dst, int* a, int* b) const {
  TESSERA_CHECK(src >= 0 && src < num_devices_ && dst >= 0 && dst < num_devices_ && src != dst, "route {} -> {}", src,
                dst);
  const int sa = src / devices_per_supernode_, sb = dst / devices_per_supernode_;
  if (sa == sb) {
    *a = src % devices_per_supernode_;
    *b = dst % devices_per_supernode_;
    return fabrics_[sa];
  }
  *a = src;
  *b = dst;
  return network_;
}

int Topology::FabricPlanes(int src, int dst) const {
  int a, b;
  return FabricFor(src, dst, &a, &b).spec.planes;
}

int Topology::NumPaths(int src, int dst) const {
  int a, b;
  const Fabric& f = FabricFor(src, dst, &a, &b);
  return f.PathsPerPlane(a, b) * f.spec.planes;
}

double Topology::Path(int src, int dst, int index, std::vector<int>* links) const {
  int a, b;
  const Fabric& f = FabricFor(src, dst, &a, &b);
  return f.PathLinks(a, b, index, links);
}

int Topology::AccessUpLink(int device, bool scale_out, int plane) const {
  if (scale_out) return network_.first_link + plane * network_.links_per_plane + device;
  const Fabric& f = fabrics_[device / devices_per_supernode_];
  return f.first_link + plane * f.links_per_plane + device % devices_per_supernode_;
}

int Topology::UplinkOfLeaf(int supernode, int leaf, int spine, int parallel, int plane) const {
  const Fabric& f = fabrics_[supernode];
  const int su = f.spec.spines * f.spec.uplinks_per_spine;
  return f.first_link + plane * f.links_per_plane + 2 * f.endpoints + leaf * su + spine * f.spec.uplinks_per_spine +
         parallel;
}

StatusOr<int> Topology::Select(int src, int dst, uint64_t flow_key, const std::function<int(int)>& active_flows_on,
                               const std::vector<bool>& failed, std::vector<int>* links, double* latency_s) {
  const int n = NumPaths(src, dst);
  const uint64_t h = FlowHash(src, dst, flow_key);
  auto alive = [&](int idx) {
    scratch_.clear();
    Path(src, dst, idx, &scratch_);
    for (int l : scratch_) {
      if (failed[l]) return false;
    }
    return true;
  };
  int best = -1;
  if (routing_ == Routing::kEcmp) {
    for (int i = 0; i < n && best < 0; ++i) {
      int idx = static_cast<int>((h + i) % n);
      if (alive(idx)) best = idx;
    }
  } else {
    // With one plane every path shares the access links (first and last), so
    // their load bounds every path's from below: stop at a path that reaches
    // it (the first such in hash order, as a full scan would pick), and stop
    // summing a path once it cannot beat the best.
    const bool shared_access = FabricPlanes(src, dst) == 1;
    double best_load = std::numeric_limits<double>::infinity(), bound = 0;
    for (int i = 0; i < n; ++i) {
      int idx = static_cast<int>((h + i) % n);
      if (!alive(idx)) continue;
      auto load_of = [&](int l) { return (active_flows_on(l) + 1) / capacity_[l]; };
      if (shared_access && best < 0) bound = std::max(load_of(scratch_.front()), load_of(scratch_.back()));
      double load = 0;
      for (size_t j = 0; j < scratch_.size() && load < best_load; ++j) load = std::max(load, load_of(scratch_[j]));
      if (load < best_load) best_load = load, best = idx;
      if (shared_access && best_load <= bound) break;
    }
  }
  if (best < 0) return Unavailable("no live path from device {} to {}: all {} paths cross failed links", src, dst, n);
  *latency_s = Path(src, dst, best, links);
  return best;
}

}  // namespace tessera::sim
