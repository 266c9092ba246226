#include "tessera/sim/cluster_spec.h"

#include <gtest/gtest.h>

#include "tessera/sim/sim_test_util.h"

namespace tessera::sim {
namespace {

using testing::LoadPreset;
using testing::SpecText;

TEST(ClusterSpecTest, BriefPresetIsUbl128) {
  ClusterSpec c = LoadPreset("ascend950-ubl128");
  EXPECT_EQ(c.name, "ascend950-ubl128");
  EXPECT_EQ(c.supernode.devices, 128);
  EXPECT_EQ(c.TotalDevices(), 8192);
  const NetworkSpec& f = c.supernode.fabric;
  EXPECT_EQ(f.kind, NetworkKind::kLeafSpine);
  EXPECT_EQ(c.supernode.devices / f.endpoints_per_leaf, 16);  // 16 aggregation switches
  EXPECT_EQ(f.spines, 8);                                      // 8 core switches
  EXPECT_DOUBLE_EQ(f.port_bw, 200e9 / 8);
  EXPECT_DOUBLE_EQ(f.uplink_bw, 400e9 / 8);
  EXPECT_DOUBLE_EQ(f.EndpointBandwidth(), 50e9);
  EXPECT_DOUBLE_EQ(f.Oversubscription(), 1.0);
  EXPECT_EQ(c.network.kind, NetworkKind::kFatTree);
  EXPECT_EQ(c.network.k, 32);
  EXPECT_DOUBLE_EQ(c.device.PeakFlops(Precision::kFp8), 1000e12);
  EXPECT_DOUBLE_EQ(c.HostBytesPerDevice(), 8192e9 / 128);
}

TEST(ClusterSpecTest, A100PresetMatchesNarayananCluster) {
  ClusterSpec c = LoadPreset("a100-dgx");
  EXPECT_EQ(c.supernode.devices, 8);
  EXPECT_DOUBLE_EQ(c.supernode.fabric.EndpointBandwidth(), 300e9);
  EXPECT_DOUBLE_EQ(c.network.EndpointBandwidth(), 25e9);  // one 200 Gb/s HCA per GPU
  EXPECT_DOUBLE_EQ(c.device.peak_flops_bf16, 312e12);
  EXPECT_DOUBLE_EQ(c.device.hbm_bytes, 80e9);
  EXPECT_DOUBLE_EQ(c.device.PeakFlops(Precision::kFp8), 312e12);  // no fp8: bf16 rate
  EXPECT_GE(c.TotalDevices(), 3072);
  EXPECT_EQ(c.network.kind, NetworkKind::kRailOptimized);
}

TEST(ClusterSpecTest, OtherPresetsLoad) {
  ClusterSpec cm = LoadPreset("cloudmatrix384");
  EXPECT_EQ(cm.TotalDevices(), 384);
  EXPECT_EQ(cm.supernode.fabric.planes, 7);
  EXPECT_NEAR(cm.supernode.fabric.EndpointBandwidth(), 392e9, 1);
  EXPECT_DOUBLE_EQ(cm.supernode.fabric.Oversubscription(), 1.0);
  ClusterSpec h = LoadPreset("h100-cluster");
  EXPECT_DOUBLE_EQ(h.supernode.fabric.EndpointBandwidth(), 450e9);
  EXPECT_DOUBLE_EQ(h.network.EndpointBandwidth(), 50e9);
  EXPECT_NE(h.Describe().find("rail_optimized"), std::string::npos);
}

TEST(ClusterSpecTest, OversubscriptionAndLatency) {
  ClusterSpec c = testing::ParseOrDie(SpecText(
      32, 1,
      "kind = \"leaf_spine\"\nendpoint_ports = 1\nport_gbit = 400\nendpoints_per_leaf = 16\nspines = 4\n"
      "uplink_gbit = 400\nlink_latency_us = 1\nswitch_latency_us = 2\nendpoint_latency_us = 3"));
  EXPECT_DOUBLE_EQ(c.supernode.fabric.Oversubscription(), 4.0);
  EXPECT_EQ(c.supernode.fabric.MaxSwitchHops(), 3);
  EXPECT_NEAR(c.supernode.fabric.MaxPathLatency(), (3 + 4 * 1 + 3 * 2) * 1e-6, 1e-15);
}

void ExpectError(const std::string& text, const std::vector<std::string>& needles) {
  auto spec = ParseClusterSpec(text, "bad.toml");
  ASSERT_FALSE(spec.ok());
  for (const std::string& n : needles) {
    EXPECT_NE(spec.status().message().find(n), std::string::npos) << spec.status().message() << " lacks " << n;
  }
}

TEST(ClusterSpecTest, ErrorsNameFileLineAndKey) {
  const std::string fabric = "kind = \"switch\"\nport_gbyte_s = 100";
  std::string good = SpecText(8, 1, fabric);
  // Wrong type: line of hbm_gb (line 7 of SpecText's output).
  std::string wrong = good;
  wrong.replace(wrong.find("hbm_gb = 80"), 11, "hbm_gb = \"x\"");
  ExpectError(wrong, {"bad.toml:7", "device.hbm_gb", "expected a number"});
  // Unknown key with a suggestion.
  std::string typo = good;
  typo.insert(typo.find("tdp_w"), "ambient = 20\n");
  ExpectError(typo, {"bad.toml:9", "unknown key 'device.ambient'", "did you mean 'device.ambient_c'"});
  // Missing key.
  std::string missing = good;
  missing.erase(missing.find("mtbf_hours = 50000"), 18);
  ExpectError(missing, {"missing required key 'device.mtbf_hours'"});
  ExpectError(SpecText(8, 1, "kind = \"torus\"\nport_gbit = 1"), {"supernode.fabric.kind", "torus"});
  ExpectError(SpecText(8, 1, "kind = \"switch\"\nport_gbit = 1\nport_gbyte_s = 1"), {"not both"});
  ExpectError(SpecText(8, 1, "kind = \"switch\"\nplanes = 2\nendpoint_ports = 3\nport_gbit = 1"),
              {"endpoint_ports", "2 planes"});
  ExpectError(SpecText(8, 2, fabric), {"[network]"});
  ExpectError(SpecText(8, 2, fabric, "kind = \"fat_tree\"\nk = 2\nport_gbit = 100"), {"16 endpoints", "k=2"});
  ExpectError(SpecText(8, 2, fabric, "kind = \"fat_tree\"\nk = 3\nport_gbit = 100"), {"even"});
  ExpectError("name = [", {"malformed TOML bad.toml:1"});
  auto absent = LoadClusterSpec("/nonexistent/x.toml");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::sim
