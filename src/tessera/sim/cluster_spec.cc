#include "tessera/sim/cluster_spec.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tessera/sim/toml_reader.h"

namespace tessera::sim {
namespace {

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;
constexpr double kMicro = 1e-6;

// Reads a bandwidth given either as `<base>_gbit` (Gb/s) or `<base>_gbyte_s`
// (GB/s); exactly one must be present unless `required` is false.
StatusOr<double> ReadBandwidth(const TomlTable& t, const std::string& base, bool required) {
  const std::string gbit = base + "_gbit", gbyte = base + "_gbyte_s";
  bool has_bit = t.Has(gbit), has_byte = t.Has(gbyte);
  if (has_bit && has_byte) return t.Error(gbit, fmt::format("give either {} or {}, not both", gbit, gbyte));
  if (has_bit) {
    TESSERA_ASSIGN_OR_RETURN(double v, t.Number(gbit));
    (void)t.Number(gbyte, 0.0);  // mark the alternative as known
    return v * kGiga / 8;
  }
  TESSERA_ASSIGN_OR_RETURN(double v, required ? t.Number(gbyte) : t.Number(gbyte, 0.0));
  (void)t.Number(gbit, 0.0);
  return v * kGiga;
}

StatusOr<NetworkKind> ParseKind(const TomlTable& t) {
  TESSERA_ASSIGN_OR_RETURN(std::string kind, t.String("kind"));
  if (kind == "switch") return NetworkKind::kSwitch;
  if (kind == "leaf_spine") return NetworkKind::kLeafSpine;
  if (kind == "fat_tree") return NetworkKind::kFatTree;
  if (kind == "rail_optimized") return NetworkKind::kRailOptimized;
  return t.Error("kind", fmt::format("unknown network kind '{}' (switch, leaf_spine, fat_tree, rail_optimized)", kind));
}

StatusOr<int> ReadInt(const TomlTable& t, const std::string& key, int64_t fallback, int64_t min_value) {
  TESSERA_ASSIGN_OR_RETURN(int64_t v, t.Integer(key, fallback));
  if (v < min_value || v > (int64_t{1} << 30)) {
    return t.Error(key, fmt::format("must be in [{}, 2^30], got {}", min_value, v));
  }
  return static_cast<int>(v);
}

StatusOr<double> ReadNonNegative(const TomlTable& t, const std::string& key, double fallback, double scale) {
  TESSERA_ASSIGN_OR_RETURN(double v, t.Number(key, fallback));
  if (v < 0) return t.Error(key, fmt::format("must be >= 0, got {}", v));
  return v * scale;
}

StatusOr<double> ReadPositive(const TomlTable& t, const std::string& key, double scale) {
  TESSERA_ASSIGN_OR_RETURN(double v, t.Number(key));
  if (v <= 0) return t.Error(key, fmt::format("must be > 0, got {}", v));
  return v * scale;
}

StatusOr<NetworkSpec> ReadNetwork(const TomlTable& t) {
  NetworkSpec n;
  TESSERA_ASSIGN_OR_RETURN(n.kind, ParseKind(t));
  TESSERA_ASSIGN_OR_RETURN(n.planes, ReadInt(t, "planes", 1, 1));
  TESSERA_ASSIGN_OR_RETURN(n.endpoint_ports, ReadInt(t, "endpoint_ports", n.planes, 1));
  if (n.endpoint_ports % n.planes != 0) {
    return t.Error("endpoint_ports", fmt::format("{} ports cannot be spread evenly over {} planes", n.endpoint_ports,
                                                 n.planes));
  }
  TESSERA_ASSIGN_OR_RETURN(n.port_bw, ReadBandwidth(t, "port", true));
  if (n.port_bw <= 0) return t.Error("port_gbit", "port bandwidth must be > 0");
  bool two_stage = n.kind == NetworkKind::kLeafSpine || n.kind == NetworkKind::kRailOptimized;
  if (two_stage) {
    const char* per_leaf = n.kind == NetworkKind::kLeafSpine ? "endpoints_per_leaf" : "nodes_per_leaf";
    TESSERA_ASSIGN_OR_RETURN(n.endpoints_per_leaf, ReadInt(t, per_leaf, 0, 1));
    TESSERA_ASSIGN_OR_RETURN(n.spines, ReadInt(t, "spines", 0, 1));
    TESSERA_ASSIGN_OR_RETURN(n.uplinks_per_spine, ReadInt(t, "uplinks_per_spine", 1, 1));
    TESSERA_ASSIGN_OR_RETURN(n.uplink_bw, ReadBandwidth(t, "uplink", true));
    if (n.uplink_bw <= 0) return t.Error("uplink_gbit", "uplink bandwidth must be > 0");
  }
  if (n.kind == NetworkKind::kFatTree) {
    TESSERA_ASSIGN_OR_RETURN(n.k, ReadInt(t, "k", 0, 2));
    if (n.k % 2 != 0) return t.Error("k", fmt::format("fat-tree radix k must be even, got {}", n.k));
  }
  TESSERA_ASSIGN_OR_RETURN(n.link_latency_s, ReadNonNegative(t, "link_latency_us", 0, kMicro));
  TESSERA_ASSIGN_OR_RETURN(n.switch_latency_s, ReadNonNegative(t, "switch_latency_us", 0, kMicro));
  TESSERA_ASSIGN_OR_RETURN(n.endpoint_latency_s, ReadNonNegative(t, "endpoint_latency_us", 0, kMicro));
  TESSERA_ASSIGN_OR_RETURN(n.efficiency, t.Number("efficiency", 1.0));
  if (n.efficiency <= 0 || n.efficiency > 1) {
    return t.Error("efficiency", fmt::format("must be in (0, 1], got {}", n.efficiency));
  }
  TESSERA_RETURN_IF_ERROR(t.Finish());
  return n;
}

StatusOr<DeviceSpec> ReadDevice(const TomlTable& t) {
  DeviceSpec d;
  TESSERA_ASSIGN_OR_RETURN(d.name, t.String("name"));
  TESSERA_ASSIGN_OR_RETURN(d.peak_flops_fp32, ReadPositive(t, "peak_tflops_fp32", kTera));
  TESSERA_ASSIGN_OR_RETURN(d.peak_flops_bf16, ReadPositive(t, "peak_tflops_bf16", kTera));
  TESSERA_ASSIGN_OR_RETURN(d.peak_flops_fp8, ReadNonNegative(t, "peak_tflops_fp8", 0, kTera));
  TESSERA_ASSIGN_OR_RETURN(d.hbm_bytes, ReadPositive(t, "hbm_gb", kGiga));
  TESSERA_ASSIGN_OR_RETURN(d.hbm_bw, ReadPositive(t, "hbm_gbyte_s", kGiga));
  TESSERA_ASSIGN_OR_RETURN(d.ddr_link_bw, ReadNonNegative(t, "ddr_link_gbyte_s", 0, kGiga));
  TESSERA_ASSIGN_OR_RETURN(d.tdp_w, ReadPositive(t, "tdp_w", 1));
  TESSERA_ASSIGN_OR_RETURN(d.idle_w, ReadNonNegative(t, "idle_w", 0, 1));
  TESSERA_ASSIGN_OR_RETURN(d.thermal_limit_c, ReadPositive(t, "thermal_limit_c", 1));
  TESSERA_ASSIGN_OR_RETURN(d.ambient_c, t.Number("ambient_c", 25.0));
  TESSERA_ASSIGN_OR_RETURN(d.thermal_resistance_c_per_w, ReadNonNegative(t, "thermal_resistance_c_per_w", 0, 1));
  TESSERA_ASSIGN_OR_RETURN(d.mtbf_hours, ReadPositive(t, "mtbf_hours", 1));
  if (d.idle_w > d.tdp_w) return t.Error("idle_w", fmt::format("idle power {} W exceeds TDP {} W", d.idle_w, d.tdp_w));
  if (d.ambient_c >= d.thermal_limit_c) {
    return t.Error("ambient_c", fmt::format("ambient {} °C is not below the thermal limit {} °C", d.ambient_c,
                                            d.thermal_limit_c));
  }
  TESSERA_RETURN_IF_ERROR(t.Finish());
  return d;
}

Status ValidateFabric(const NetworkSpec& n, int64_t endpoints, int devices_per_node, const std::string& what) {
  if (n.kind == NetworkKind::kFatTree) {
    int64_t capacity = static_cast<int64_t>(n.k) * n.k * n.k / 4;
    if (endpoints > capacity) {
      return InvalidArgument("{}: {} endpoints exceed a k={} fat-tree's {} hosts per plane", what, endpoints, n.k,
                             capacity);
    }
  }
  if (n.kind == NetworkKind::kRailOptimized && devices_per_node < 1) {
    return InvalidArgument("{}: rail_optimized needs devices per node", what);
  }
  return Status::Ok();
}

}  // namespace

double DeviceSpec::PeakFlops(Precision p) const {
  switch (p) {
    case Precision::kFp32: return peak_flops_fp32;
    case Precision::kBf16: return peak_flops_bf16;
    case Precision::kFp8: return peak_flops_fp8 > 0 ? peak_flops_fp8 : peak_flops_bf16;
  }
  return peak_flops_fp32;
}

std::string_view NetworkKindName(NetworkKind kind) {
  switch (kind) {
    case NetworkKind::kSwitch: return "switch";
    case NetworkKind::kLeafSpine: return "leaf_spine";
    case NetworkKind::kFatTree: return "fat_tree";
    case NetworkKind::kRailOptimized: return "rail_optimized";
  }
  return "?";
}

double NetworkSpec::Oversubscription() const {
  if (kind != NetworkKind::kLeafSpine && kind != NetworkKind::kRailOptimized) return 1.0;
  double down = static_cast<double>(endpoints_per_leaf) * (endpoint_ports / planes) * port_bw;
  if (kind == NetworkKind::kRailOptimized) down = static_cast<double>(endpoints_per_leaf) * port_bw;
  double up = static_cast<double>(spines) * uplinks_per_spine * uplink_bw;
  return std::max(1.0, down / up);
}

int NetworkSpec::MaxSwitchHops() const {
  switch (kind) {
    case NetworkKind::kSwitch: return 1;
    case NetworkKind::kLeafSpine:
    case NetworkKind::kRailOptimized: return 3;
    case NetworkKind::kFatTree: return 5;
  }
  return 1;
}

double NetworkSpec::PathLatency(int switch_hops) const {
  return endpoint_latency_s + (switch_hops + 1) * link_latency_s + switch_hops * switch_latency_s;
}

Status ClusterSpec::Validate() const {
  if (supernode.devices < 1) return InvalidArgument("{}: supernode.devices must be >= 1", source);
  if (supernodes < 1) return InvalidArgument("{}: supernodes must be >= 1", source);
  TESSERA_RETURN_IF_ERROR(ValidateFabric(supernode.fabric, supernode.devices, supernode.devices,
                                         source + ": supernode.fabric"));
  if (supernodes > 1) {
    if (!has_network) {
      return InvalidArgument("{}: {} super-nodes need a [network] table (the scale-out network)", source, supernodes);
    }
    TESSERA_RETURN_IF_ERROR(ValidateFabric(network, TotalDevices(), supernode.devices, source + ": network"));
  }
  return Status::Ok();
}

std::string ClusterSpec::Describe() const {
  auto net = [](const NetworkSpec& n) {
    return fmt::format("{}{} {} x {:.0f} GB/s per endpoint, oversubscription {:.2f}, latency {:.2f} us",
                       NetworkKindName(n.kind), n.planes > 1 ? fmt::format(" ({} planes)", n.planes) : "",
                       n.endpoint_ports, n.port_bw / kGiga, n.Oversubscription(), n.MaxPathLatency() / kMicro);
  };
  std::string s = fmt::format("cluster {}: {} super-node(s) x {} {} = {} devices\n", name, supernodes,
                              supernode.devices, device.name, TotalDevices());
  s += fmt::format("  device: {:.0f}/{:.0f}/{:.0f} TFLOP/s fp32/bf16/fp8, HBM {:.0f} GB at {:.0f} GB/s, "
                   "DDR link {:.0f} GB/s, TDP {:.0f} W, MTBF {:.0f} h\n",
                   device.peak_flops_fp32 / kTera, device.peak_flops_bf16 / kTera, device.peak_flops_fp8 / kTera,
                   device.hbm_bytes / kGiga, device.hbm_bw / kGiga, device.ddr_link_bw / kGiga, device.tdp_w,
                   device.mtbf_hours);
  s += fmt::format("  super-node fabric: {}; host DDR {:.0f} GB\n", net(supernode.fabric), supernode.ddr_bytes / kGiga);
  if (supernodes > 1) s += fmt::format("  scale-out network: {}\n", net(network));
  return s;
}

StatusOr<ClusterSpec> ParseClusterSpec(const std::string& toml_text, const std::string& source) {
  TESSERA_ASSIGN_OR_RETURN(toml::table root, ParseTomlText(toml_text, source));
  TomlTable t(root, source, "");
  ClusterSpec c;
  c.source = source;
  TESSERA_ASSIGN_OR_RETURN(c.name, t.String("name"));
  TESSERA_ASSIGN_OR_RETURN(c.description, t.String("description", ""));
  TESSERA_ASSIGN_OR_RETURN(c.supernodes, ReadInt(t, "supernodes", 1, 1));
  TESSERA_ASSIGN_OR_RETURN(TomlTable dev, t.Table("device"));
  TESSERA_ASSIGN_OR_RETURN(c.device, ReadDevice(dev));
  TESSERA_ASSIGN_OR_RETURN(TomlTable sn, t.Table("supernode"));
  TESSERA_ASSIGN_OR_RETURN(c.supernode.devices, ReadInt(sn, "devices", 0, 1));
  TESSERA_ASSIGN_OR_RETURN(c.supernode.ddr_bytes, ReadNonNegative(sn, "ddr_gb", 0, kGiga));
  TESSERA_ASSIGN_OR_RETURN(TomlTable fabric, sn.Table("fabric"));
  TESSERA_ASSIGN_OR_RETURN(c.supernode.fabric, ReadNetwork(fabric));
  TESSERA_RETURN_IF_ERROR(sn.Finish());
  if (t.Has("network")) {
    TESSERA_ASSIGN_OR_RETURN(TomlTable net, t.Table("network"));
    TESSERA_ASSIGN_OR_RETURN(c.network, ReadNetwork(net));
    c.has_network = true;
  }
  TESSERA_RETURN_IF_ERROR(t.Finish());
  TESSERA_RETURN_IF_ERROR(c.Validate());
  return c;
}

StatusOr<ClusterSpec> LoadClusterSpec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open cluster spec '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return ParseClusterSpec(text.str(), path);
}

}  // namespace tessera::sim
