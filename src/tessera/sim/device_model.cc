#include "tessera/sim/device_model.h"

#include <algorithm>
#include <cmath>

#include "tessera/base/check.h"

namespace tessera::sim {

double RooflineTime(const DeviceSpec& device, const OpCost& op, const EfficiencyCurve& curve, double clock) {
  TESSERA_CHECK(clock > 0 && op.flops >= 0 && op.hbm_bytes >= 0, "roofline: clock {}, flops {}, bytes {}", clock,
                op.flops, op.hbm_bytes);
  double compute = op.flops > 0 ? op.flops / (device.PeakFlops(op.precision) * curve.At(op.flops) * clock) : 0;
  double memory = op.hbm_bytes / device.hbm_bw;
  return std::max(compute, memory);
}

double RidgeIntensity(const DeviceSpec& device, Precision precision, const EfficiencyCurve& curve, double flops) {
  return device.PeakFlops(precision) * curve.At(flops) / device.hbm_bw;
}

double OffloadTime(const DeviceSpec& device, double bytes) {
  TESSERA_CHECK(device.ddr_link_bw > 0, "device {} has no host DDR link", device.name);
  return bytes / device.ddr_link_bw;
}

DvfsResult SimulateDvfs(const DeviceSpec& d, double utilization, double duration_s, const DvfsParams& p) {
  TESSERA_CHECK(utilization >= 0 && utilization <= 1 && duration_s >= 0 && p.interval_s > 0, "dvfs arguments");
  DvfsResult r;
  double temp = d.ambient_c, clock = 1.0, t = 0;
  r.max_temp_c = temp;
  const double capacity = d.thermal_resistance_c_per_w > 0 ? p.tau_s / d.thermal_resistance_c_per_w : 0;
  while (t < duration_s) {
    const double dt = std::min(p.interval_s, duration_s - t);
    const double power = d.idle_w + (d.tdp_w - d.idle_w) * utilization * clock * clock * clock;
    r.energy_j += power * dt;
    r.work += utilization * clock * dt;
    r.mean_clock += clock * dt;
    if (clock < 1.0) r.throttled_fraction += dt;
    if (capacity > 0) {
      // Exact step of the linear ODE toward the steady state at this power.
      const double steady = d.ambient_c + power * d.thermal_resistance_c_per_w;
      temp = steady + (temp - steady) * std::exp(-dt / p.tau_s);
    }
    r.max_temp_c = std::max(r.max_temp_c, temp);
    if (temp > d.thermal_limit_c - p.margin_c) {
      clock = std::max(p.min_clock, clock - p.clock_step);
    } else if (temp < d.thermal_limit_c - 2 * p.margin_c) {
      clock = std::min(1.0, clock + p.clock_step);
    }
    t += dt;
  }
  if (duration_s > 0) {
    r.mean_clock /= duration_s;
    r.throttled_fraction /= duration_s;
  }
  return r;
}

}  // namespace tessera::sim
