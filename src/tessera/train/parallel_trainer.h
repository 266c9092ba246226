// ParallelTrainer: `tessera train` on several ranks — data, tensor,
// pipeline and expert parallelism with ZeRO — under `tessera launch`
// (or torchrun / mpirun / srun). Every rank runs one; they meet through the
// job's store (comm::Communicator::FromEnvironment), build the DeviceMesh of
// config.parallel, their GptStage and a ZeroOptimizer.
//
// Each step: data-parallel rank r takes micro-batches [r·A/dp, (r+1)·A/dp)
// of the step's A = global_batch / micro_batch micro-batches — exactly the
// samples and dropout masks the single-process Trainer uses — then
// TrainStep (forward/backward with overlapped gradient reduction),
// global-norm clipping over the whole mesh, fp16 dynamic loss scaling,
// AdamW through ZeroOptimizer at the warm-up + cosine rate. So fp32 losses
// and parameters match the single-process run up to summation order.
// With [checkpoint], every rank saves its shard of each checkpoint
// asynchronously (sharded_checkpointer.h), and a run resumes from a
// checkpoint of any layout (or of the single-process Trainer): parameters,
// AdamW state, loss scale, and the step, which fixes the data order and
// dropout masks, so training continues as if uninterrupted.
// With pp > 1, layers move between pipeline stages at step boundaries
// until the stages' measured compute times agree (parallel.rebalance:
// StageRebalancer decides, MoveLayers carries the state over).
// Rank 0 shows the progress bar and writes runs/<name>/ (config.json,
// metrics.jsonl, summary.json with per-rank memory, communication
// fraction, pipeline bubble and stage balance; report.html; and with
// `trace` a Chrome trace of one step across all ranks).
// One thread drives a ParallelTrainer; kernels parallelize inside.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/api/communicator.h"
#include "tessera/parallel/gpt_stage.h"
#include "tessera/parallel/mesh.h"
#include "tessera/parallel/train_step.h"
#include "tessera/parallel/zero.h"
#include "tessera/train/checkpointing.h"
#include "tessera/train/memory_checkpoint.h"
#include "tessera/train/run_record.h"
#include "tessera/train/sharded_checkpointer.h"
#include "tessera/train/stage_rebalancer.h"
#include "tessera/train/trainer.h"

namespace tessera::train {

struct ParallelTrainerOptions {
  TrainerOptions base;
  int64_t trace_step = 0;  // > 0: write trace.json of this step
  // Fault injection (tests): poison one gradient with inf at this step
  // (0: the TESSERA_INJECT_GRAD_OVERFLOW_STEP knob, default never).
  int64_t inject_overflow_step = 0;
  // Fault injection (tests; 0: the TESSERA_INJECT_GRAD_NAN_STEP /
  // TESSERA_INJECT_GRAD_CORRUPT_STEP knobs): at this step, rank
  // `inject_rank` alone puts a NaN into its reduced gradient, or flips one
  // bit of it (silent corruption of one replica). Each happens once per
  // process (a rollback's replay runs clean).
  int64_t inject_nan_step = 0;
  int64_t inject_corrupt_step = 0;
  int inject_rank = -1;  // -1: TESSERA_INJECT_RANK (default 0)
  // Testing: Run() stops with Aborted right after this step (a crash; saves
  // in flight finish in the destructor). 0: never.
  int64_t crash_after_step = 0;
  // The agent's restart count (-1: TESSERA_RESTART_COUNT) and ranks per
  // node for the in-memory tier's replicas (0: LOCAL_WORLD_SIZE).
  int restart_count = -1;
  int ranks_per_node = 0;
  // Testing: the initial pipeline partition (first layer of each virtual
  // stage) instead of the one balanced by measured layer costs.
  std::vector<int> first_layer;
};

class ParallelTrainer {
 public:
  // `world` is the job's world communicator (must outlive the trainer).
  static StatusOr<std::unique_ptr<ParallelTrainer>> Create(const TrainConfig& config, comm::Communicator& world,
                                                           const ParallelTrainerOptions& options = {});
  ~ParallelTrainer();
  Status Run(TrainSummary* summary);
  EvalResult Evaluate();

  // This rank's parameters by full name (values as this rank holds them;
  // under ZeRO-3 gathered first, so collective then) — for parity checks
  // against the single-process Trainer.
  StatusOr<std::map<std::string, Tensor>> LocalParameters();
  // Collective, synchronous: saves the current state (after the last step
  // run, or the resumed one) as a checkpoint in `dir` (`tessera ckpt
  // convert` to another layout).
  Status SaveCheckpoint(const std::filesystem::path& dir);
  int64_t completed_steps() const { return first_step_ - 1 + static_cast<int64_t>(losses_.size()); }
  const parallel::DeviceMesh& mesh() const { return *mesh_; }
  // Per-step mean training loss of the run so far (every rank).
  const std::vector<double>& losses() const { return losses_; }
  double loss_scale() const { return loss_scale_; }  // fp16 dynamic loss scale (1 otherwise)

 private:
  ParallelTrainer(const TrainConfig& config, comm::Communicator& world, const ParallelTrainerOptions& options)
      : config_(config), world_(world), options_(options) {}
  Status RunImpl(TrainSummary* summary);
  StatusOr<EvalResult> EvaluateImpl();
  std::vector<parallel::MicroBatchInput> MicroBatches(int64_t step, float loss_scale);
  StatusOr<double> GlobalGradNorm();
  // This rank's GptStage (layers [first_layer[u], first_layer[u+1]) of its
  // virtual stages u), ZeroOptimizer and TrainStep (Create, and each move).
  Status BuildStage(const std::vector<int>& first_layer);
  // Run-time pipeline rebalancing (parallel_trainer_rebalance.cc): records
  // this step's per-chunk compute time; at the end of a window gathers every
  // virtual stage's figures (collective), asks the rebalancer, and moves the
  // layers when it says so (MoveLayers). `message`: the progress log.
  Status MaybeRebalance(int64_t step, const parallel::StepResult& res,
                        const std::function<void(const std::string&)>& message);
  // Collective: the state (parameters, AdamW moments and step counts) saved
  // as a sharded checkpoint, this rank's stage rebuilt with layers
  // [first_layer[u], first_layer[u+1]) and the state loaded back into it.
  // false (on every rank): the state could not be saved, nothing changed.
  StatusOr<bool> MoveLayers(int64_t step, const std::vector<int>& first_layer);
  nlohmann::json RebalanceJson() const;  // summary.json's parallel.rebalance
  Status SetUpCheckpoints();  // resume, and the saver (Create)
  // Fault injection for this step (see the options).
  void InjectGradientFaults(int64_t step);
  // SIGKILL / SIGSTOP of this process after `step` (TESSERA_INJECT_KILL_STEP,
  // TESSERA_INJECT_STOP_STEP on TESSERA_INJECT_RANK; first attempt only).
  void InjectProcessFaults(int64_t step) const;
  // Replicas' reduced gradients compared, agreed over the world: "" when all
  // agree, else what differs where.
  StatusOr<std::string> ReplicaMismatch();
  // Reloads the latest checkpoint into the optimizer (collective); returns
  // its step, from which the run replays.
  StatusOr<int64_t> RollBack(int64_t step, const std::string& why);
  void Event(nlohmann::json event) const;  // rank 0: runs/<name>/events.jsonl
  void RestoreScalars(const nlohmann::json& metadata);  // loss scale (fp16)
  // After the first step of a resumed run: the "recovered" (after an agent
  // restart) or "resumed" event — source, steps lost, seconds since the failure.
  void RecordRecovery(const RunRecord* record) const;
  int restart_count() const { return options_.restart_count >= 0 ? options_.restart_count : RestartCount(); }
  nlohmann::json CheckpointMetadata(int64_t step) const;

  TrainConfig config_;
  comm::Communicator& world_;
  ParallelTrainerOptions options_;
  bool is_rank0_ = false;
  std::unique_ptr<data::Dataset> dataset_;
  std::unique_ptr<parallel::DeviceMesh> mesh_;
  std::unique_ptr<parallel::GptStage> stage_;
  std::unique_ptr<parallel::ZeroOptimizer> zero_;
  parallel::ZeroCommBytes grad_bytes_carried_;  // of optimizers replaced by a stage rebalance
  std::unique_ptr<parallel::TrainStep> step_;
  std::vector<double> losses_;
  std::vector<double> layer_costs_;  // measured, when the model is pipelined
  std::unique_ptr<StageRebalancer> rebalancer_;   // parallel.rebalance with pp · virtual_stages > 1
  std::vector<std::vector<double>> chunk_times_;  // this window's per-step compute seconds per local chunk
  int64_t measure_after_ = 0;                     // steps up to this one are not measured (warm-up)
  double loss_scale_ = 1.0;
  int64_t good_steps_ = 0;
  // Checkpoints ([checkpoint]): where, the saver, and the first step to run
  // (after a resumed checkpoint's).
  std::filesystem::path ckpt_root_;
  std::unique_ptr<ShardedCheckpointer> checkpointer_;
  std::unique_ptr<MemoryCheckpointer> memory_;
  std::string restore_source_;  // "disk" | "memory" when resumed
  int64_t first_step_ = 1;
  std::string resumed_from_;
  bool injected_nan_ = false, injected_corruption_ = false;
  std::map<int64_t, int> rollbacks_;  // per step: a failure that recurs after a rollback is skipped instead
};

}  // namespace tessera::train
