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

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/hal/peak.h"
#include "tessera/models/gpt_config.h"
#include "tessera/sim/calibrate.h"
#include "tessera/sim/twin.h"

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

// The context factor of 1-thread ranks that outnumber the cores (x = ranks,
// y = factor, sim::MachineCalibration::context): the probe models' steps
// with 2x and 4x as many busy ranks (threads) as cores, over their op-sum
// times the time share; the first point is `one`'s (ranks = cores). Tiny
// sweeps measure only that first point.
StatusOr<sim::OpLine> MeasureSharedCoreContext(const sim::HostCalibration& one, int cores, SweepSize size,
                                               std::vector<std::string>* report);

// The twin's view of a model config.
sim::TwinModel TwinModelOf(const models::GptConfig& m);

// The context probes' models: generic shapes from the sweep (width 64,
// 2 layers, 64 tokens, dense; width 256, 2 layers, 32 tokens, 8 experts
// top-1).
std::vector<models::GptConfig> ProbeModelConfigs();

// Seconds of forward + backward per micro-batch of a probe model in real
// training steps (zero gradients, 4 micro-batches accumulated); the upper
// median over `seconds` of steps.
class ProbeRank {
 public:
  static StatusOr<std::unique_ptr<ProbeRank>> Create(const models::GptConfig& config, int64_t micro_batch,
                                                     uint64_t seed);
  ~ProbeRank();
  double Step();
  // Forward + backward of every block on its own tape, calling `meet`
  // after each forward and each backward. Returns seconds.
  template <typename Meet>
  double BlockSteps(Meet&& meet);
  int layers() const;
  int64_t micro_batch() const { return micro_batch_; }
  const models::GptConfig& config() const;

 private:
  struct State;
  ProbeRank(std::unique_ptr<State> state, int64_t micro_batch);
  void BlockStep(int layer, bool backward);
  std::unique_ptr<State> state_;
  int64_t micro_batch_;
};

template <typename Meet>
double ProbeRank::BlockSteps(Meet&& meet) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < layers(); ++i) {
    BlockStep(i, false);
    meet();
    BlockStep(i, true);
    meet();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tessera::cli
