// The measurements behind `tessera sim calibrate` (docs/twin.md): generic
// sweeps of each autograd op kind of Tessera's transformer — sizes chosen
// from each op's own scaling, powers of two over the range the planner may
// ask for (tokens 16-4096, widths 32-2048, heads' widths 16-128, sequences
// 16-512, vocabularies 16-1024, experts 2-64), never a config in the
// repository — fitted per kind (sim/calibrate.h), the optimizer, and the
// context probes (generic small GPTs, dense and MoE, in real training steps
// vs the sum of their ops' isolated costs).
// Single-threaded driver; the measured kernels use `threads` threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/hal/peak.h"
#include "tessera/sim/calibrate.h"

namespace tessera::cli {

// What to measure: kFull for a calibration, kTiny (a few small points per
// kind, ~1 s) for tests.
enum class SweepSize { kFull, kTiny };

// The host calibration of `threads` kernel threads (1: beside cores - 1
// busy neighbour threads, as one rank of a multi-rank job), including the
// context factor. Repeats the op sweep (up to 3 times) while a fit is poor
// (the machine was disturbed); keeps the best. `report` collects the fits'
// errors, one line per kind.
StatusOr<sim::HostCalibration> MeasureHostCalibration(int threads, int cores, const hal::PeakInfo& peak,
                                                      SweepSize size, std::vector<std::string>* report);

}  // namespace tessera::cli
