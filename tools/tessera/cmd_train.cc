// `tessera train CONFIG.toml [--set key=value ...]`: single-process training.
#include <CLI/CLI.hpp>

#include "commands.h"
#include "tessera/train/trainer.h"

namespace tessera::cli {
namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  bool plain = false;
  bool help_config = false;
};

Status RunTrain(const TrainArgs& args) {
  if (args.help_config) {
    std::printf("config keys (TOML sections.keys, overridable with --set key=value):\n%s",
                train::TrainConfig::DescribeKeys().c_str());
    return Status::Ok();
  }
  if (args.config.empty()) return InvalidArgument("tessera train: a CONFIG.toml file is required");
  TESSERA_ASSIGN_OR_RETURN(train::TrainConfig config, train::TrainConfig::Load(args.config, args.overrides));
  train::TrainerOptions options;
  options.force_plain = args.plain;
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
  cmd->add_flag("--plain", args->plain, "plain log lines instead of a progress bar");
  cmd->add_flag("--help-config", args->help_config, "list every config key and exit");
  cmd->callback([args] { ExitWith(RunTrain(*args)); });
}
TESSERA_CLI_COMMAND(20, RegisterTrainCommand);

}  // namespace tessera::cli
