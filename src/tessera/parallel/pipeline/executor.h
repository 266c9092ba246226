// PipelineExecutor: runs one training step's pipeline schedule on this
// stage (rank of the pp communicator), given the stage's forward as a
// callback.
//
// For each forward action (micro-batch mb, local chunk c) it receives the
// activation from the previous virtual stage (none on virtual stage 0, which
// loads its own data), makes it a leaf with requires_grad, and runs
// stage.forward(c, mb, input) on a tape of its own (graph::Tape, one per
// in-flight (mb, c)); the result goes to the next virtual stage, or on the
// last virtual stage is the scalar loss (already divided by the number of
// micro-batches). For each backward action it receives the gradient of
// that output (ones for the loss), runs Backward on exactly that tape —
// parameter gradients accumulate into their .grad() over the micro-batches
// — and sends input.grad() upstream. Transfers are asynchronous and
// deadlock-free for every schedule (see p2p.h).
//
// RunStep returns OK, or a Status naming the stage, the micro-batch and the
// transfer or callback that failed (exceptions thrown by the callbacks,
// e.g. OpError, are caught and returned). On failure it aborts the
// channels, so the peers' RunStep fail promptly too (a step ends with a
// barrier of all stages, so no stage reports success for a step another
// stage failed); the executor is then unusable (create a new one over a
// fresh communicator).
//
// Per step it records the wall time, the time spent in forward and
// backward callbacks (busy), the bubble fraction 1 - busy/step and a
// timeline of events (compute and communication waits) for Chrome traces.
// Thread-safety: one thread drives an executor; the callbacks run on it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/parallel/pipeline/schedule.h"
#include "tessera/tensor/tensor.h"

namespace tessera::parallel {

class PipelineChannels;

struct PipelineStage {
  // Forward of local chunk `chunk` for micro-batch mb; `input` is the
  // received activation (undefined on the first virtual stage, which loads
  // its own data). Returns the activation to send on, or on the LAST virtual
  // stage the scalar loss to backpropagate (already divided by the number of
  // micro-batches).
  std::function<Tensor(int chunk, int microbatch, const Tensor& input)> forward;
  // Shape and dtype of the activation virtual stage (chunk, this stage)
  // receives for micro-batch mb.
  std::function<std::pair<Shape, DType>(int chunk, int microbatch)> input_spec;
  // Optional: called after each backward action (its input gradient already
  // sent upstream), e.g. to start reducing gradients that are now final.
  std::function<Status(int chunk, int microbatch)> after_backward;
};

struct PipelineConfig {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int microbatches = 1;
  int virtual_stages = 1;  // model chunks per stage (interleaved only)
  // Bound on each wait for a transfer; 0 = the communicators' per-operation
  // deadline (CommOptions::timeout / TESSERA_COMM_TIMEOUT_MS) bounds it.
  std::chrono::milliseconds wait_timeout{0};
};

struct PipelineEvent {
  std::string name;      // "F mb3 c0", "B mb3 c0", "recv act mb3 c0", "recv grad mb3 c0", "flush"
  std::string category;  // "compute" | "comm"
  double start_s = 0;    // since the step began
  double dur_s = 0;
};

struct PipelineStepStats {
  double step_s = 0;           // wall time of RunStep
  double busy_s = 0;           // inside forward and backward (callbacks and Backward)
  std::vector<double> chunk_busy_s;  // busy_s per local chunk (virtual_stages entries)
  double comm_wait_s = 0;      // blocked on receives and the final flush
  double bubble_fraction = 0;  // 1 - busy_s / step_s
  double loss = 0;             // sum of the losses of this stage's last virtual stage (0 elsewhere)
  int max_in_flight = 0;       // most (mb, chunk) tapes alive at once
  std::vector<PipelineEvent> timeline;
};

class PipelineExecutor {
 public:
  // Collective over `pp` (rank = stage, size = number of stages), which must
  // outlive the executor. InvalidArgument for a config the schedule cannot
  // run (see ValidatePipelineSchedule).
  static StatusOr<std::unique_ptr<PipelineExecutor>> Create(comm::Communicator& pp, const PipelineConfig& config);
  ~PipelineExecutor();
  PipelineExecutor(const PipelineExecutor&) = delete;
  PipelineExecutor& operator=(const PipelineExecutor&) = delete;

  // Changes the schedule or micro-batch count for the next steps (every
  // stage must make the same change). Validated; not collective.
  Status SetConfig(const PipelineConfig& config);
  const PipelineConfig& config() const { return config_; }

  Status RunStep(const PipelineStage& stage);
  const PipelineStepStats& last_step() const { return stats_; }

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  // Whether local chunk `chunk` is the first / last virtual stage.
  bool IsFirstVirtualStage(int chunk) const { return VirtualStage(stage_, chunk, stages_) == 0; }
  bool IsLastVirtualStage(int chunk) const {
    return VirtualStage(stage_, chunk, stages_) == stages_ * config_.virtual_stages - 1;
  }

 private:
  struct InFlight;
  class Step;
  PipelineExecutor(int stage, int stages, PipelineConfig config, std::unique_ptr<PipelineChannels> channels);

  int stage_, stages_;
  PipelineConfig config_;
  std::unique_ptr<PipelineChannels> channels_;
  PipelineStepStats stats_;
  Status broken_;
};

}  // namespace tessera::parallel
