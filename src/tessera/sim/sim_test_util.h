// Helpers shared by the sim tests: preset paths and small hand-built specs.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "tessera/sim/calibrate.h"
#include "tessera/sim/twin.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/simulate.h"

namespace tessera::sim::testing {

inline std::string PresetPath(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/clusters/" + name + ".toml";
}

inline ClusterSpec LoadPreset(const std::string& name) {
  auto spec = LoadClusterSpec(PresetPath(name));
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : ClusterSpec{};
}

// A minimal valid spec; `fabric` and `network` are TOML bodies of the
// [supernode.fabric] and [network] tables.
inline std::string SpecText(int devices, int supernodes, const std::string& fabric, const std::string& network = "") {
  std::string s = "name = \"t\"\nsupernodes = " + std::to_string(supernodes) +
                  "\n[device]\nname = \"d\"\npeak_tflops_fp32 = 10\npeak_tflops_bf16 = 100\nhbm_gb = 80\n"
                  "hbm_gbyte_s = 2000\ntdp_w = 400\nthermal_limit_c = 90\nmtbf_hours = 50000\n"
                  "[supernode]\ndevices = " + std::to_string(devices) + "\n[supernode.fabric]\n" + fabric + "\n";
  if (!network.empty()) s += "[network]\n" + network + "\n";
  return s;
}

inline ClusterSpec ParseOrDie(const std::string& text) {
  auto spec = ParseClusterSpec(text, "test.toml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : ClusterSpec{};
}

inline SimCollectiveOptions CollectiveOptions(CollectiveKind kind, CollectiveAlgo algo, double bytes, int ranks,
                                              Routing routing = Routing::kAdaptive, bool packet = false) {
  SimCollectiveOptions o;
  o.kind = kind;
  o.algo = algo;
  o.bytes = bytes;
  o.ranks = ranks;
  o.routing = routing;
  o.packet_level = packet;
  return o;
}

// A synthetic calibration of a 2-core host: every op line, the linear
// curve, optimizer, context factors and the meeting cost set, the ops with
// two points each.
inline HostCalibration SyntheticHost(int threads, double peak) {
  HostCalibration h;
  h.threads = threads;
  h.peak_flops = peak;
  h.triad_bytes_per_s = 20e9 * threads;
  h.gemm = {0.8, 1e6};
  h.kernel_overhead_s = 0.3e-6;
  h.elementwise_bytes_per_s = 100e9 * threads;
  h.autograd_op_s = 1.5e-6;
  h.linear = {2e-6, 0.6, 16, 8, 8, 0, {}};
  h.attention = {3e-6, 1e-9, 2e-11, 1e-10, 0, {}};
  h.optimizer_per_tensor_s = 1e-6;
  h.optimizer_per_param_s = 2e-9;
  for (int i = 0; i < kOpKinds; ++i) h.ops[i] = {1e-6 * (i + 1), 0.5e-9, {{10, 2e-6 * (i + 1)}, {1e4, 9e-6 * (i + 1)}}};
  return h;
}

// A small dense GPT for the twin's tests (4 layers, width 128, 4 heads).
inline TwinModel SmallDenseModel(int64_t seq) {
  TwinModel m;
  m.vocab = 64;
  m.seq = seq;
  m.layers = 4;
  m.d_model = 128;
  m.heads = 4;
  m.d_ff = 384;
  return m;
}

inline MachineCalibration SyntheticMachine() {
  MachineCalibration c;
  c.cpu = "test cpu";
  c.cores = 2;
  c.all = SyntheticHost(2, 400e9);
  c.one = SyntheticHost(1, 220e9);
  c.all.context_factor = 1.3;
  c.one.context_factor = 1.2;
  c.meeting.points = {{2, 40e-6}, {4, 80e-6}, {8, 200e-6}};
  c.context.points = {{2, 1.2}, {4, 1.3}, {8, 1.5}};
  c.host_memory_bytes = 16e9;
  c.bf16_peak_flops = 800e9;
  c.link = {3e-6, 5e9, 0.1};
  c.link_source = "synthetic";
  return c;
}

}  // namespace tessera::sim::testing
