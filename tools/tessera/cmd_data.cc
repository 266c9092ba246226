// `tessera data export CONFIG.toml --steps N --out FILE`: writes the exact
// training batches `tessera train` would use for its first N steps, so other
// frameworks (bench/torch_gpt.py) train on the same data. Format: magic
// "TSBT", int64 steps, int64 batch, int64 seq_len, then per step int32
// inputs [batch, seq_len] followed by int32 targets [batch, seq_len].
#include <cstdio>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "tessera/train/trainer.h"

namespace tessera::cli {
namespace {

struct ExportArgs {
  std::string config;
  std::vector<std::string> overrides;
  int64_t steps = 10;
  std::string out;
};

Status RunExport(const ExportArgs& args) {
  TESSERA_ASSIGN_OR_RETURN(train::TrainConfig config, train::TrainConfig::Load(args.config, args.overrides));
  TESSERA_ASSIGN_OR_RETURN(auto dataset, train::MakeDataset(config));
  if (args.steps < 1) return InvalidArgument("--steps must be >= 1");
  FILE* f = std::fopen(args.out.c_str(), "wb");
  if (f == nullptr) return IoError("cannot create '{}'", args.out);
  const int64_t b = config.train.global_batch, t = config.model.seq_len;
  int64_t header[3] = {args.steps, b, t};
  bool ok = std::fwrite("TSBT", 1, 4, f) == 4 && std::fwrite(header, sizeof(int64_t), 3, f) == 3;
  std::vector<int32_t> buf(b * t);
  for (int64_t step = 0; ok && step < args.steps; ++step) {
    data::Batch batch = dataset->TrainBatch(step * b, b);
    for (const Tensor* src : {&batch.inputs, &batch.targets}) {
      const int64_t* p = src->data<int64_t>();
      for (int64_t i = 0; i < b * t; ++i) buf[i] = static_cast<int32_t>(p[i]);
      ok = ok && std::fwrite(buf.data(), sizeof(int32_t), buf.size(), f) == buf.size();
    }
  }
  if (std::fclose(f) != 0 || !ok) return IoError("cannot write '{}'", args.out);
  std::printf("wrote %lld steps of [%lld, %lld] batches to %s\n", static_cast<long long>(args.steps),
              static_cast<long long>(b), static_cast<long long>(t), args.out.c_str());
  return Status::Ok();
}

}  // namespace

void RegisterDataCommand(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Dataset utilities");
  data->require_subcommand(1);
  auto args = std::make_shared<ExportArgs>();
  CLI::App* exp = data->add_subcommand("export", "Write the training batches of a config to a binary file");
  exp->add_option("config", args->config, "training config (TOML)")->required();
  exp->add_option("--set", args->overrides, "override a config key (repeatable)");
  exp->add_option("--steps", args->steps, "optimizer steps to export");
  exp->add_option("--out", args->out, "output file")->required();
  exp->callback([args] { ExitWith(RunExport(*args)); });
}
TESSERA_CLI_COMMAND(30, RegisterDataCommand);

}  // namespace tessera::cli
