#include "tessera/sim/device_model.h"

#include <gtest/gtest.h>

#include "tessera/sim/sim_test_util.h"

namespace tessera::sim {
namespace {

TEST(DeviceModelTest, RooflineIsComputeOrMemoryBound) {
  ClusterSpec c = testing::LoadPreset("a100-dgx");
  const DeviceSpec& d = c.device;
  EfficiencyCurve curve{0.8, 1e9};
  // 8192^3 GEMM in bf16: compute-bound at 0.8 x 312 TF (the curve is ~1 there).
  OpCost gemm{2.0 * 8192 * 8192 * 8192, 3.0 * 8192 * 8192 * 2, Precision::kBf16};
  double t = RooflineTime(d, gemm, curve);
  EXPECT_NEAR(t, gemm.flops / (312e12 * curve.At(gemm.flops)), 1e-12);
  EXPECT_NEAR(curve.At(gemm.flops), 0.8, 0.001);
  // An elementwise op over 1 GB: memory-bound at HBM bandwidth.
  OpCost add{0.25e9, 3e9, Precision::kBf16};
  EXPECT_DOUBLE_EQ(RooflineTime(d, add, curve), 3e9 / 2039e9);
  // Small kernels run far below peak; half clock doubles compute time.
  OpCost small{1e9, 0, Precision::kBf16};
  EXPECT_NEAR(RooflineTime(d, small, curve), 1e9 / (312e12 * 0.4), 1e-15);
  EXPECT_NEAR(RooflineTime(d, small, curve, 0.5), 2 * RooflineTime(d, small, curve), 1e-15);
  EXPECT_NEAR(RidgeIntensity(d, Precision::kBf16, curve, 1e15), 312e12 * curve.At(1e15) / 2039e9, 1e-9);
  EXPECT_DOUBLE_EQ(OffloadTime(d, 32e9), 1.0);  // PCIe 4.0 x16: 32 GB/s
}

TEST(DeviceModelTest, DvfsThrottlesPastTheThermalLimitAndAccountsEnergy) {
  DeviceSpec d = testing::LoadPreset("a100-dgx").device;
  // Cool card (steady 30 + 400 x 0.12 = 78 C < 85 - 3): full clock, P = TDP.
  DvfsResult cool = SimulateDvfs(d, 1.0, 100);
  EXPECT_DOUBLE_EQ(cool.mean_clock, 1.0);
  EXPECT_EQ(cool.throttled_fraction, 0);
  EXPECT_NEAR(cool.energy_j, 400 * 100, 1e-6);
  EXPECT_LT(cool.max_temp_c, 80);
  // Poor cooling: steady state at TDP would be 30 + 400 x 0.2 = 110 C.
  d.thermal_resistance_c_per_w = 0.2;
  DvfsResult hot = SimulateDvfs(d, 1.0, 300);
  EXPECT_LT(hot.mean_clock, 0.95);
  EXPECT_GT(hot.throttled_fraction, 0.5);
  EXPECT_LT(hot.max_temp_c, d.thermal_limit_c + 1);   // the governor holds the limit
  EXPECT_LT(hot.energy_j, cool.energy_j * 3);          // 300 s at reduced power
  EXPECT_LT(hot.energy_j / 300, 400.0);
  EXPECT_NEAR(hot.work, hot.mean_clock * 300, 1e-6);
  // Idle: idle power only, no heating to speak of.
  DvfsResult idle = SimulateDvfs(d, 0.0, 10);
  EXPECT_NEAR(idle.energy_j, d.idle_w * 10, 1e-9);
}

// A training step at steady state: under the preset's limit (85 C; the A100
// settles near 30 + 0.12 x 370 W) nothing throttles; a hot device under a
// low limit slows its clock, its compute-bound part stretches by 1 / clock
// (the memory-bound rest does not), and the energy per step is the mean
// power times the throttled step.
TEST(DeviceModelTest, SteadyStateStepThrottlesAHotDeviceUnderALowLimit) {
  ClusterSpec c = testing::LoadPreset("a100-dgx");
  auto cool = SteadyStateStep(c.device, 10.0, 8.0, 512);
  ASSERT_TRUE(cool.ok()) << cool.status().ToString();
  EXPECT_DOUBLE_EQ(cool->mean_clock, 1.0);
  EXPECT_DOUBLE_EQ(cool->step_s, 10.0);
  EXPECT_NEAR(cool->power_w, c.device.idle_w + (c.device.tdp_w - c.device.idle_w) * 0.8, 1e-6);
  EXPECT_NEAR(cool->energy_per_device_j, cool->power_w * 10.0, 1e-6);
  EXPECT_NEAR(cool->energy_total_j, 512 * cool->energy_per_device_j, 1e-3);

  DeviceSpec hot = c.device;
  hot.thermal_limit_c = 60;  // steady state at full power would be 78 C
  auto slow = SteadyStateStep(hot, 10.0, 8.0, 512);
  ASSERT_TRUE(slow.ok());
  EXPECT_LT(slow->mean_clock, 0.95);
  EXPECT_GT(slow->throttled_fraction, 0.5);
  EXPECT_NEAR(slow->step_s, 2.0 + 8.0 / slow->mean_clock, 1e-9);
  EXPECT_GT(slow->step_s, 10.0 * 1.04);
  EXPECT_LT(slow->temp_c, hot.thermal_limit_c + 1);
  EXPECT_LT(slow->power_w, cool->power_w);
  EXPECT_NEAR(slow->energy_per_device_j, slow->power_w * slow->step_s, 1e-6);
  // A memory-bound step (no compute) does not stretch.
  auto mem = SteadyStateStep(hot, 10.0, 0.0, 1);
  ASSERT_TRUE(mem.ok());
  EXPECT_DOUBLE_EQ(mem->step_s, 10.0);
  // Bad inputs are errors, not NaN.
  EXPECT_FALSE(SteadyStateStep(hot, 10.0, 11.0, 1).ok());
  EXPECT_FALSE(SteadyStateStep(hot, 0.0, 0.0, 1).ok());
  hot.tdp_w = hot.idle_w;
  EXPECT_FALSE(SteadyStateStep(hot, 10.0, 8.0, 1).ok());
}

}  // namespace
}  // namespace tessera::sim
