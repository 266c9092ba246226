// Device models: roofline time per operation with an efficiency curve,
// HBM <-> host DDR offload traffic, and DVFS under a first-order thermal
// model with energy accounting. Pure functions and a value-type simulator;
// thread-safe.
//
// Roofline: t = max(flops / (peak(precision) * eff(flops) * clock),
//                   bytes / hbm_bw),  eff(w) = max_eff * w / (w + half_work)
// (small kernels cannot fill the machine; large ones approach max_eff).
// Thermal: C dT/dt = P - (T - ambient) / R with time constant tau = R C;
// P = idle + (tdp - idle) * utilization * clock^3 (dynamic power ~ f V^2,
// V ~ f). The governor lowers the clock by `step` when T passes
// limit - margin and raises it when T falls below limit - 2 margin.
// Training steps (SteadyStateStep): the device repeats one step long enough
// (10 tau) to reach its steady temperature, then the clock, temperature and
// energy are averaged over a window; the compute-bound part of the step
// stretches by 1 / mean clock, which lowers the busy fraction it runs at, so
// the two are iterated to a fixed point. Energy per step = mean power x
// throttled step time.
#pragma once

#include <cstdint>

#include "tessera/base/status.h"
#include "tessera/sim/cluster_spec.h"

namespace tessera::sim {

struct EfficiencyCurve {
  double max_efficiency = 0.85;  // of peak, for large operations
  double half_work_flops = 2e9;  // work at which half of max_efficiency is reached
  double At(double flops) const { return flops <= 0 ? 0 : max_efficiency * flops / (flops + half_work_flops); }
};

struct OpCost {
  double flops = 0;
  double hbm_bytes = 0;  // bytes moved to/from HBM
  Precision precision = Precision::kBf16;
};

// Seconds for one operation at relative clock `clock` (1 = nominal).
double RooflineTime(const DeviceSpec& device, const OpCost& op, const EfficiencyCurve& curve, double clock = 1.0);
// Arithmetic intensity (FLOP/byte) above which `op` is compute-bound.
double RidgeIntensity(const DeviceSpec& device, Precision precision, const EfficiencyCurve& curve, double flops);
// Seconds to move `bytes` between HBM and the host DDR tier (one direction).
double OffloadTime(const DeviceSpec& device, double bytes);

struct DvfsParams {
  double tau_s = 20;            // thermal time constant
  double margin_c = 3;          // throttle when T > limit - margin
  double clock_step = 0.05;     // governor step per interval
  double interval_s = 0.1;      // governor period and integration step
  double min_clock = 0.5;
};

struct DvfsResult {
  double mean_clock = 0;        // time-average relative clock
  double max_temp_c = 0;
  double energy_j = 0;
  double throttled_fraction = 0;  // of the time below nominal clock
  double work = 0;              // utilization x clock integrated (nominal-seconds of work done)
};

// Runs the device at `utilization` (0..1 of its compute) for `duration_s`
// starting at ambient temperature.
DvfsResult SimulateDvfs(const DeviceSpec& device, double utilization, double duration_s, const DvfsParams& p = {});

// One training step repeated at steady state under the device's thermal limit.
struct StepDvfs {
  double nominal_step_s = 0;   // at clock 1
  double compute_s = 0;        // compute-bound part at clock 1
  double step_s = 0;           // throttled: nominal - compute + compute / mean_clock
  double mean_clock = 1;       // steady-state time average (1 = nominal)
  double utilization = 0;      // busy fraction of the throttled step (at the mean clock)
  double temp_c = 0;           // steady-state maximum temperature over the window
  double throttled_fraction = 0;
  double power_w = 0;          // mean per device
  double energy_per_device_j = 0;  // per step
  double energy_total_j = 0;       // per step, all devices
};

// `compute_s` of the nominal `step_s` is compute-bound (0 <= compute_s <=
// step_s); `devices` identical devices. Needs tdp_w > idle_w >= 0.
StatusOr<StepDvfs> SteadyStateStep(const DeviceSpec& device, double step_s, double compute_s, int64_t devices,
                                   const DvfsParams& p = {});

}  // namespace tessera::sim
