#include "tessera/train/run_query.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/job_env.h"
#include "tessera/parallel/parallel_config.h"
#include "tessera/train/auto_micro_batch.h"
#include "tessera/train/image_trainer.h"
#include "tessera/train/parallel_trainer.h"

namespace tessera::train {
namespace {

// Each rank pins its kernel threads to its share of the host's CPUs (the
// launcher's LOCAL_RANK of LOCAL_WORLD_SIZE; one process: all of them).
void SetPinning(TrainerOptions& options) {
  auto job = comm::ReadJobEnv();
  if (!job.ok() || job->local_rank < 0) return;
  options.bind_slot = job->local_rank;
  options.bind_slots = std::max(1, job->local_world_size);
}

StatusOr<TrainSummary> RunParallel(const TrainConfig& config, const TrainQuery& q) {
  auto world = comm::Communicator::FromEnvironment();
  if (!world.ok()) return world.status().WithContext("joining the training job");
  ParallelTrainerOptions options;
  options.base.force_plain = q.plain;
  SetPinning(options.base);
  options.trace_step = q.trace ? q.trace_step : 0;
  Status st;
  TrainSummary summary;
  {
    auto trainer = ParallelTrainer::Create(config, **world, options);
    if (trainer.ok()) {
      st = (*trainer)->Run(&summary);
    } else {
      st = trainer.status();
    }
  }
  if (!st.ok()) {
    // Tell the other ranks at once rather than let them time out.
    (*world)->Abort(st.ToString());
    return st.WithContext(fmt::format("rank {} of {}", (*world)->rank(), (*world)->size()));
  }
  // Rank 0 hosts the store: leave together.
  TESSERA_RETURN_IF_ERROR((*world)->Barrier());
  return summary;
}

// model.kind = "resnet": one process, or data-parallel over the job's ranks.
StatusOr<TrainSummary> RunImages(const TrainConfig& config, const TrainQuery& q, int world_size) {
  TrainerOptions options;
  options.force_plain = q.plain;
  SetPinning(options);
  TrainSummary summary;
  if (world_size <= 1) {
    TESSERA_RETURN_IF_ERROR(RunImageTraining(config, nullptr, options, &summary));
    return summary;
  }
  auto world = comm::Communicator::FromEnvironment();
  if (!world.ok()) return world.status().WithContext("joining the training job");
  Status st = RunImageTraining(config, world->get(), options, &summary);
  if (!st.ok()) {
    (*world)->Abort(st.ToString());
    return st.WithContext(fmt::format("rank {} of {}", (*world)->rank(), (*world)->size()));
  }
  TESSERA_RETURN_IF_ERROR((*world)->Barrier());
  return summary;
}

}  // namespace

StatusOr<TrainSummary> RunTrainQuery(const TrainQuery& q) {
  if (q.config.empty()) return InvalidArgument("tessera train: a CONFIG.toml file is required");
  TESSERA_ASSIGN_OR_RETURN(TrainConfig config, TrainConfig::Load(q.config, q.overrides));
  if (!q.resume.empty()) config.checkpoint.resume = q.resume;
  TESSERA_ASSIGN_OR_RETURN(comm::JobEnv job, comm::ReadJobEnv());
  if (config.is_image_model()) {
    if (config.parallel.dp > 1 && config.parallel.dp != job.world_size) {
      return InvalidArgument(
          "parallel.dp = {} but the job has {} rank(s): image models train data-parallel over "
          "every launched rank (leave parallel.dp at 1 or 0, or set it to the rank count)",
          config.parallel.dp, job.world_size);
    }
    return RunImages(config, q, job.world_size);
  }
  TESSERA_ASSIGN_OR_RETURN(AutoMicroBatch auto_mb,
                           ResolveAutoMicroBatch(config, job.world_size, std::max(1, job.local_world_size)));
  if (auto_mb.budget_bytes > 0 && job.rank <= 0) std::printf("%s\n", auto_mb.Describe().c_str());
  TESSERA_RETURN_IF_ERROR(parallel::ResolveElasticDp(config.parallel, config.model, config.train.global_batch,
                                                     config.train.micro_batch, job.world_size));
  // Graph mode lives in the parallel runtime (parallel/gpt_stage.h), which runs one process too.
  if (config.parallel.is_parallel() || job.world_size > 1 || config.parallel.graph) return RunParallel(config, q);
  if (config.parallel.recompute != "none") {
    TLOG(WARN,
         "train.recompute = '{}' is done by the parallel runtime; the single-process trainer keeps every "
         "activation (run it under `tessera launch` with a parallel layout to recompute)",
         config.parallel.recompute);
  }
  TrainerOptions options;
  options.force_plain = q.plain;
  SetPinning(options);
  TESSERA_ASSIGN_OR_RETURN(auto trainer, Trainer::Create(config, options));
  TrainSummary summary;
  TESSERA_RETURN_IF_ERROR(trainer->Run(&summary));
  return summary;
}

}  // namespace tessera::train
