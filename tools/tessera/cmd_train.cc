// `tessera train CONFIG.toml [--set key=value ...] [--resume DIR|latest] [--trace]`: training on one
// process, or on every rank of a job started by `tessera launch` (torchrun,
// mpirun, srun) with the parallel runtime when the config's parallel.* mesh
// has more than one rank.
#include <algorithm>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "tessera/base/logging.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/job_env.h"
#include "tessera/train/parallel_trainer.h"
#include "tessera/train/trainer.h"

namespace tessera::cli {
namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string resume;
  bool plain = false;
  bool help_config = false;
  bool trace = false;
  int64_t trace_step = 2;
};

// Each rank pins its kernel threads to its share of the host's CPUs (the
// launcher's LOCAL_RANK of LOCAL_WORLD_SIZE; one process: all of them).
void SetPinning(train::TrainerOptions& options) {
  auto job = comm::ReadJobEnv();
  if (!job.ok() || job->local_rank < 0) return;
  options.bind_slot = job->local_rank;
  options.bind_slots = std::max(1, job->local_world_size);
}

Status RunParallel(const train::TrainConfig& config, const TrainArgs& args) {
  auto world = comm::Communicator::FromEnvironment();
  if (!world.ok()) return world.status().WithContext("joining the training job");
  train::ParallelTrainerOptions options;
  options.base.force_plain = args.plain;
  SetPinning(options.base);
  options.trace_step = args.trace ? args.trace_step : 0;
  Status st;
  {
    auto trainer = train::ParallelTrainer::Create(config, **world, options);
    if (trainer.ok()) {
      train::TrainSummary summary;
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
  return (*world)->Barrier();
}

Status RunTrain(const TrainArgs& args) {
  if (args.help_config) {
    std::printf("config keys (TOML sections.keys, overridable with --set key=value):\n%s",
                train::TrainConfig::DescribeKeys().c_str());
    return Status::Ok();
  }
  if (args.config.empty()) return InvalidArgument("tessera train: a CONFIG.toml file is required");
  TESSERA_ASSIGN_OR_RETURN(train::TrainConfig config, train::TrainConfig::Load(args.config, args.overrides));
  if (!args.resume.empty()) config.checkpoint.resume = args.resume;
  TESSERA_ASSIGN_OR_RETURN(comm::JobEnv job, comm::ReadJobEnv());
  TESSERA_RETURN_IF_ERROR(parallel::ResolveElasticDp(config.parallel, config.model, config.train.global_batch,
                                                     config.train.micro_batch, job.world_size));
  if (config.parallel.is_parallel() || job.world_size > 1) return RunParallel(config, args);
  if (config.parallel.recompute != "none") {
    TLOG(WARN, "train.recompute = '{}' is done by the parallel runtime; the single-process trainer keeps every "
               "activation (run it under `tessera launch` with a parallel layout to recompute)",
         config.parallel.recompute);
  }
  train::TrainerOptions options;
  options.force_plain = args.plain;
  SetPinning(options);
  TESSERA_ASSIGN_OR_RETURN(auto trainer, train::Trainer::Create(config, options));
  train::TrainSummary summary;
  return trainer->Run(&summary);
}

}  // namespace

void RegisterTrainCommand(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a TOML config");
  cmd->add_option("config", args->config, "training config (TOML)");
  cmd->add_option("--set", args->overrides, "override a config key: --set train.steps=50 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--resume", args->resume,
                  "resume from a checkpoint: its directory, or 'latest' under checkpoint.dir (= --set "
                  "checkpoint.resume=...)");
  cmd->add_flag("--plain", args->plain, "plain log lines instead of a progress bar");
  cmd->add_flag("--help-config", args->help_config, "list every config key and exit");
  cmd->add_flag("--trace", args->trace,
                "write runs/<name>/trace.json: a Chrome trace-event timeline of one step across all ranks");
  cmd->add_option("--trace-step", args->trace_step, "the step --trace records (default 2)");
  cmd->callback([args] { ExitWith(RunTrain(*args)); });
}
TESSERA_CLI_COMMAND(20, RegisterTrainCommand);

}  // namespace tessera::cli
