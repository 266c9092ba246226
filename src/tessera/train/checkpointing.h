// Checkpoints of a single-process Trainer and of the image trainer
// ([checkpoint] in the config). A training state is: the model's parameters
// and buffers (batch-norm running statistics), AdamW's state (moments and
// per-parameter step counts), the step, and for a GPT its dropout counter
// (forward_count). Data order depends only on (train.seed, step), so the
// step is the data-loader position too: a resumed run sees exactly the
// samples, dropout masks and learning rates the uninterrupted run would,
// and ends with bitwise-identical parameters.
//
// On disk it is a one-shard checkpoint (parallel/checkpoint/) in
// <root>/step-<N>/: tensors "model/<name>", "buffer/<name>" and
// "optim/<key>", metadata {"kind": "tessera-trainer", "step", "config"} plus
// the caller's fields ("forward_count" for a GPT).
//
// Saving is asynchronous: Save() copies the state into host buffers at a
// step boundary (the only cost on the training path) and a background
// thread writes the checkpoint (crash-safe: index last) and deletes all but
// the last `keep`. The next Save() and Wait() report a failed write.
// Not thread-safe: one training thread drives an AsyncCheckpointer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/graph/module.h"
#include "tessera/models/gpt.h"
#include "tessera/optim/adamw.h"
#include "tessera/train/background_job.h"
#include "tessera/train/train_config.h"

namespace tessera::train {

// When to save: every `every` steps and/or once `every_seconds` passed since
// the last save. With neither set and mtbf_hours > 0, the interval is Young
// and Daly's sqrt(2 C M) (sim::YoungDalyInterval, the simulator's fault
// model) with M the configured MTBF and C the measured cost of a save on
// the training path; the first step of the run saves once to measure C.
class CheckpointSchedule {
 public:
  explicit CheckpointSchedule(const CheckpointOptions& options)
      : options_(options), interval_s_(options.every_seconds > 0 ? options.every_seconds : 0) {}
  bool enabled() const { return options_.every > 0 || options_.every_seconds > 0 || options_.mtbf_hours > 0; }
  // Whether to save after `step` (the run's first step is `first_step`),
  // `since_last_s` seconds after the last save (or the run's start).
  bool Due(int64_t step, int64_t first_step, double since_last_s) const;
  // After a save that stalled training for `blocking_s`.
  void Saved(double blocking_s);
  double interval_seconds() const { return interval_s_; }  // by time, in force (0: none)

 private:
  CheckpointOptions options_;
  double interval_s_ = 0;
  bool measured_ = false;
};

class AsyncCheckpointer {
 public:
  AsyncCheckpointer(std::filesystem::path root, int64_t keep);
  ~AsyncCheckpointer();  // waits for a save in flight (its error is logged)
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Waits for the previous save (returning its error, if any), snapshots the
  // state after `step` (parameters, buffers, optimizer; `extra` fields join
  // the metadata) and starts writing it.
  Status Save(int64_t step, const graph::Module& model, const optim::AdamW& optimizer, const nlohmann::json& config,
              const nlohmann::json& extra = nlohmann::json::object());
  // A GPT's save also records its dropout counter.
  Status Save(int64_t step, const models::Gpt& model, const optim::AdamW& optimizer, const nlohmann::json& config);
  // Waits for the save in flight; its status.
  Status Wait();

  const std::filesystem::path& root() const { return root_; }
  int64_t saves() const { return saves_; }
  double snapshot_seconds() const { return snapshot_s_; }  // on the training path, all saves
  double last_snapshot_seconds() const { return last_snapshot_s_; }
  double write_seconds() const { return writer_.seconds(); }  // in the background, all finished saves

 private:
  struct Snapshot;
  std::filesystem::path root_;
  int64_t keep_;
  BackgroundJob writer_;
  int64_t saves_ = 0;
  double snapshot_s_ = 0;
  double last_snapshot_s_ = 0;
};

// The checkpoints to try, in order, for `spec`: "latest" means every
// checkpoint under `root`, newest first (NotFound when there is none) — a
// resume falls back to an older one when a newer one is damaged; a path
// means just that directory.
StatusOr<std::vector<std::filesystem::path>> ResumeCandidates(const std::string& spec,
                                                              const std::filesystem::path& root);

// Testing: the rank that injected faults (TESSERA_INJECT_* knobs) hit
// (TESSERA_INJECT_RANK, default 0).
int64_t FaultInjectionRank();

// The event of a run resumed at `restored_step` from `source` ("memory",
// "disk") / `from` (where): "recovered" after an agent restart, else
// "resumed"; steps lost against `last_step_before` (the last step the run
// had recorded, -1: unknown) and, from TESSERA_LAST_FAILURE, the agent's
// failure record and the seconds since it saw the failure.
nlohmann::json RecoveryEvent(const std::string& source, const std::string& from, int64_t restored_step,
                             int restart_count, int64_t last_step_before);

// How many times the launcher's agent restarted this job
// (TESSERA_RESTART_COUNT; 0 for a first attempt or without an agent).
int RestartCount();

// What a run resumes from: `options.resume`; else, when the launcher's
// agent restarted the job (TESSERA_RESTART_COUNT > 0) and the run saves
// checkpoints, "latest" if `root` holds any; else "" (start fresh).
// `restart_count`: RestartCount() unless given.
StatusOr<std::string> EffectiveResume(const CheckpointOptions& options, const std::filesystem::path& root,
                                      int restart_count = -1);

struct ResumedState {
  int64_t step = 0;
  uint64_t forward_count = 0;  // a GPT's; 0 for other models
};

// Loads checkpoint `dir` into a freshly built model and optimizer (same
// model config: names, shapes and dtypes of parameters and buffers must
// match, else nothing changes and the error names the tensors). Verifies
// every shard first.
StatusOr<ResumedState> LoadTrainerCheckpoint(const std::filesystem::path& dir, graph::Module& model,
                                             optim::AdamW& optimizer);
// A GPT's load also restores its dropout counter (which must be recorded).
StatusOr<ResumedState> LoadTrainerCheckpoint(const std::filesystem::path& dir, models::Gpt& model,
                                             optim::AdamW& optimizer);

// The checkpoint a run resumed from.
struct ResumedRun {
  ResumedState state;
  std::filesystem::path dir;
  std::string skipped;  // newer checkpoints that could not be loaded ("" if none)
};

// Resumes a run of `total_steps` steps: tries ResumeCandidates(spec, root)
// in order with `load` (which must leave the model unchanged when it
// fails). A named directory's error is returned as it is; "latest" falls
// back to older checkpoints and, when none loads, fails listing every
// reason. A checkpoint at or past `total_steps` is an error (nothing left).
StatusOr<ResumedRun> ResumeFromCheckpoints(
    const std::string& spec, const std::filesystem::path& root, int64_t total_steps,
    const std::function<StatusOr<ResumedState>(const std::filesystem::path&)>& load);

}  // namespace tessera::train
