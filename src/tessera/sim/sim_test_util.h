// Helpers shared by the sim tests: preset paths and small hand-built specs.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/simulate.h"

namespace tessera::sim::testing {

inline std::string PresetPath(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / "../../../configs/clusters" / (name + ".toml")).string();
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

}  // namespace tessera::sim::testing
