// `tessera train CONFIG.toml [--set key=value ...] [--resume DIR|latest] [--trace]`: training on one
// process, or on every rank of a job started by `tessera launch` (torchrun,
// mpirun, srun) with the parallel runtime when the config's parallel.* mesh
// has more than one rank. The run is a library call (train/run_query.h)
// shared with the Python package (tessera.train.run); the options are
// declared once in options/query_options.h.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "query_options.h"
#include "tessera/train/run_query.h"
#include "tessera/train/train_config.h"

namespace tessera::cli {
namespace {

struct TrainArgs {
  train::TrainQuery query;
  bool help_config = false;
};

Status RunTrain(const TrainArgs& args) {
  if (args.help_config) {
    std::printf("config keys (TOML sections.keys, overridable with --set key=value):\n%s",
                train::TrainConfig::DescribeKeys().c_str());
    return Status::Ok();
  }
  return train::RunTrainQuery(args.query).status();
}

}  // namespace

void RegisterTrainCommand(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a TOML config");
  AddTrainOptions(cmd, &args->query);
  cmd->add_flag("--help-config", args->help_config, "list every config key and exit");
  cmd->callback([args] { ExitWith(RunTrain(*args)); });
}
TESSERA_CLI_COMMAND(20, RegisterTrainCommand);

}  // namespace tessera::cli
