// The calibration's probes (docs/twin.md): generic small GPTs trained as
// the trainer does (the context factor), their blocks stepped one at a
// time (the meeting probe), busy neighbour threads standing in for the
// other ranks of a job, and the context factor of ranks that outnumber the
// cores. Single-threaded driver.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "calibrate_measure.h"
#include "tessera/base/status.h"
#include "tessera/hal/threading.h"
#include "tessera/models/gpt_config.h"
#include "tessera/sim/calibrate.h"
#include "tessera/sim/twin.h"

namespace tessera::cli {

// While alive, `count` neighbour threads with 1 kernel thread each run a
// workload back to back: the other ranks of a multi-rank job keep their
// cores busy, competing for the shared cache and memory.
class BusyNeighbours {
 public:
  BusyNeighbours(int count, const std::function<std::function<void()>()>& make) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this, work = make()] {
        hal::SetNumThreads(1);
        while (!stop_.load(std::memory_order_relaxed)) work();
      });
    }
  }
  ~BusyNeighbours() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

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
