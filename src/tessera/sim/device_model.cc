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

StatusOr<StepDvfs> SteadyStateStep(const DeviceSpec& d, double step_s, double compute_s, int64_t devices,
                                   const DvfsParams& p) {
  if (!(step_s > 0) || compute_s < 0 || compute_s > step_s * (1 + 1e-9) || devices < 1) {
    return InvalidArgument("dvfs: step {} s with {} s of compute on {} devices", step_s, compute_s, devices);
  }
  if (!(d.tdp_w > d.idle_w) || d.idle_w < 0) {
    return InvalidArgument("device '{}': DVFS needs tdp_w > idle_w >= 0 (got {} W, {} W)", d.name, d.tdp_w, d.idle_w);
  }
  compute_s = std::min(compute_s, step_s);
  const double warm = 10 * p.tau_s, window = std::max(5 * p.tau_s, 20 * p.interval_s);
  StepDvfs out;
  out.nominal_step_s = step_s;
  out.compute_s = compute_s;
  double clock = 1;
  for (int iter = 0; iter < 8; ++iter) {
    const double stretched = step_s - compute_s + compute_s / clock;
    const double util = compute_s / clock / stretched;  // busy fraction of the wall time
    // The first `warm` seconds of both runs are identical: their difference is the window.
    const DvfsResult a = SimulateDvfs(d, util, warm, p), b = SimulateDvfs(d, util, warm + window, p);
    const double mean = (b.mean_clock * (warm + window) - a.mean_clock * warm) / window;
    out.utilization = util;
    out.mean_clock = mean;
    out.temp_c = b.max_temp_c;
    out.throttled_fraction = (b.throttled_fraction * (warm + window) - a.throttled_fraction * warm) / window;
    out.power_w = (b.energy_j - a.energy_j) / window;
    if (std::abs(mean - clock) < 1e-4) break;
    clock = mean;
  }
  out.step_s = step_s - compute_s + compute_s / out.mean_clock;
  out.energy_per_device_j = out.power_w * out.step_s;
  out.energy_total_j = out.energy_per_device_j * static_cast<double>(devices);
  return out;
}

}  // namespace tessera::sim
