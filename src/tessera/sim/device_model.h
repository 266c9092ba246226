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
#pragma once

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

}  // namespace tessera::sim
