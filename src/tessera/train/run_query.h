// `tessera train CONFIG [--set k=v ...]` as a library call: loads the config
// with its overrides, then trains on one process (Trainer) or, when the
// config's parallel mesh has more than one rank or the process is one rank
// of a launched job (WORLD_SIZE > 1), joins the job and runs the parallel
// runtime (ParallelTrainer). The CLI (tools/tessera/cmd_train.cc) and the
// Python package (tessera.train.run) both call RunTrainQuery. One call at a
// time per process (it may join a job's communicator); the calling thread
// drives training, kernels parallelize inside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/train/trainer.h"

namespace tessera::train {

struct TrainQuery {
  std::string config;                  // training config TOML
  std::vector<std::string> overrides;  // "key=value" (--set)
  std::string resume;                  // checkpoint dir or "latest" (= checkpoint.resume)
  bool plain = false;                  // plain log lines instead of a progress bar
  bool trace = false;                  // parallel runs: runs/<name>/trace.json of one step
  int64_t trace_step = 2;
};

// The summary of this process's run (on a parallel job: this rank's view).
StatusOr<TrainSummary> RunTrainQuery(const TrainQuery& q);

}  // namespace tessera::train
