// `tessera onnx`: run ONNX models on Tessera's operators.
//   run MODEL.onnx --input NAME=FILE.pb ... [--output-dir DIR] [--json]
//       loads the model, binds each input from a TensorProto / SequenceProto
//       file, runs it and prints every output (type, shape, leading values);
//       --output-dir writes each output as OUTPUT_NAME.pb (TensorProto).
//   test DIR [--filter REGEX] [--no-isolate] [--timeout S] [--json FILE]
//       runs every ONNX backend test case under DIR (model.onnx +
//       test_data_set_*/input_*.pb, output_*.pb) with ONNX's tolerances and
//       prints one line per case and the final "N passed, M failed, K skipped"
//       (an unsupported operator is a failure). Exit code 0 however many fail:
//       the suite is a measurement; `--min-pass N` makes fewer passes an error.
//   train MODEL.onnx (--input NAME=FILE.pb ... --target FILE.pb | --data DIR) [--loss mse|cross-entropy]
//       [--steps N] [--lr F] [--graph] [--freeze NAME]... [--save OUT.onnx] [--json]
//       fine-tunes the model's float initializers on one batch, or on the
//       batches of DIR in turn, with AdamW,
//       the model lowered onto Tessera's differentiable operators
//       (onnx/trainable.h), eagerly or in graph mode; --save writes the
//       trained model.
//   ops   lists the operators the runtime implements (and those it can train).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "tessera/onnx/backend_suite.h"
#include "tessera/onnx/interpreter.h"
#include "tessera/onnx/model_loader.h"
#include "tessera/onnx/op.h"
#include "tessera/onnx/trainable.h"
#include "tessera/graph/compiled_function.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/optim/adamw.h"

namespace tessera::cli {
namespace {

using onnx::Array;
using onnx::CaseResult;
using onnx::Value;

struct RunArgs {
  std::string engine = "auto";
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  bool json = false;
  int repeat = 1;
  bool profile = false;
};

struct TrainArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string target;
  std::string data;
  std::string loss = "mse";
  int steps = 100;
  double lr = 1e-3;
  double weight_decay = 0.0;
  bool graph = false;
  bool eval_mode = false;
  std::vector<std::string> freeze;
  std::string save;
  int log_every = 10;
  bool json = false;
};

struct TestArgs {
  std::string dir;
  std::string filter;
  bool no_isolate = false;
  double timeout_s = 120;
  std::string json_out;
  int min_pass = 0;
  bool quiet = false;
};

std::string Preview(const Array& a) {
  std::string s;
  const int64_t n = std::min<int64_t>(a.numel(), 8);
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += a.type() == onnx::ElemType::kString ? "'" + a.data<std::string>()[i] + "'"
                                             : fmt::format("{:.6g}", a.GetDouble(i));
  }
  if (a.numel() > n) s += ", ...";
  return s;
}

// --input NAME=FILE.pb values, checked against the model's inputs.
StatusOr<std::map<std::string, Value>> LoadInputs(const onnx::Model& model, const std::vector<std::string>& kvs) {
  std::map<std::string, Value> inputs;
  for (const std::string& kv : kvs) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("--input '{}' must be NAME=FILE.pb", kv);
    const std::string name = kv.substr(0, eq), file = kv.substr(eq + 1);
    const onnx::ValueInfo* info = nullptr;
    for (const onnx::ValueInfo& in : model.graph.inputs) {
      if (in.name == name) info = &in;
    }
    if (info == nullptr) {
      std::string names;
      for (const onnx::ValueInfo& in : model.graph.inputs) names += (names.empty() ? "" : ", ") + in.name;
      return InvalidArgument("--input '{}': the model has no input '{}' (its inputs: {})", kv, name, names);
    }
    TESSERA_ASSIGN_OR_RETURN(Value v, onnx::LoadValueFile(file, *info));
    inputs[name] = std::move(v);
  }
  return inputs;
}

// The --input values as the tensors TrainableModel::Forward takes (its
// input_names() order).
StatusOr<std::vector<Tensor>> BindInputs(const onnx::TrainableModel& tm, const std::map<std::string, Value>& given) {
  std::vector<Tensor> inputs;
  for (const std::string& name : tm.input_names()) {
    auto it = given.find(name);
    if (it == given.end() || !it->second.is_tensor()) return InvalidArgument("--input {}=FILE.pb is missing", name);
    TESSERA_ASSIGN_OR_RETURN(Tensor t, onnx::TensorFromArray(it->second.tensor, "input '" + name + "'"));
    inputs.push_back(t);
  }
  return inputs;
}

// One training batch: the model's inputs (input_names() order) and the target.
struct TrainBatch {
  std::vector<Tensor> inputs;
  Tensor target;
};

// --input / --target: one batch. --data DIR: one batch per subfolder of DIR
// holding input_0.pb (ONNX's test-data layout: input_K.pb bound to the
// model's K-th input, output_0.pb the target), in name order.
StatusOr<std::vector<TrainBatch>> LoadBatches(const TrainArgs& a, const onnx::Model& model,
                                              const onnx::TrainableModel& tm,
                                              const std::map<std::string, Value>& given) {
  auto info_of = [&](const std::string& name) {
    onnx::ValueInfo info;
    for (const onnx::ValueInfo& v : model.graph.inputs) {
      if (v.name == name) info = v;
    }
    return info;
  };
  auto target_of = [](const std::string& path) -> StatusOr<Tensor> {
    TESSERA_ASSIGN_OR_RETURN(const Value v, onnx::LoadTensorFile(path));
    return onnx::TensorFromArray(v.tensor, "target " + path);
  };
  std::vector<TrainBatch> batches;
  if (a.data.empty()) {
    if (a.target.empty()) return InvalidArgument("give --target FILE.pb (with --input), or --data DIR");
    TrainBatch b;
    TESSERA_ASSIGN_OR_RETURN(b.inputs, BindInputs(tm, given));
    TESSERA_ASSIGN_OR_RETURN(b.target, target_of(a.target));
    batches.push_back(std::move(b));
    return batches;
  }
  if (!a.inputs.empty() || !a.target.empty()) return InvalidArgument("--data replaces --input and --target");
  std::vector<std::filesystem::path> dirs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(a.data, ec)) {
    if (e.is_directory() && std::filesystem::exists(e.path() / "input_0.pb")) dirs.push_back(e.path());
  }
  if (ec) return IoError("--data {}: {}", a.data, ec.message());
  if (dirs.empty()) return InvalidArgument("--data {}: no subfolder holds input_0.pb", a.data);
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    TrainBatch b;
    const std::vector<std::string>& names = tm.input_names();
    for (size_t k = 0; k < names.size(); ++k) {
      const std::string file = (dir / fmt::format("input_{}.pb", k)).string();
      TESSERA_ASSIGN_OR_RETURN(const Value v, onnx::LoadValueFile(file, info_of(names[k])));
      if (!v.is_tensor()) return InvalidArgument("{}: not a tensor", file);
      TESSERA_ASSIGN_OR_RETURN(Tensor t, onnx::TensorFromArray(v.tensor, file));
      b.inputs.push_back(t);
    }
    TESSERA_ASSIGN_OR_RETURN(b.target, target_of((dir / "output_0.pb").string()));
    batches.push_back(std::move(b));
  }
  return batches;
}

// Fine-tunes the model's float initializers on its batches (cycled) toward
// their targets with AdamW: the model lowered onto Tessera's differentiable
// operators (onnx/trainable.h), eagerly or captured as a graph.
Status Train(const TrainArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(onnx::Model model, onnx::LoadModelFile(a.model));
  using ValueMap = std::map<std::string, Value>;
  TESSERA_ASSIGN_OR_RETURN(const ValueMap given, LoadInputs(model, a.inputs));
  if (a.steps < 1) return InvalidArgument("--steps {} must be >= 1", a.steps);
  if (a.loss != "mse" && a.loss != "cross-entropy") return InvalidArgument("--loss '{}': mse or cross-entropy", a.loss);
  onnx::TrainableOptions options;
  options.training = !a.eval_mode;
  options.frozen.insert(a.freeze.begin(), a.freeze.end());
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<onnx::TrainableModel> tm, onnx::TrainableModel::Create(model, options));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<TrainBatch> batches, LoadBatches(a, model, *tm, given));
  if (tm->parameters().empty()) return InvalidArgument("{} has no trainable float initializer", a.model);
  optim::AdamWOptions o;
  o.lr = a.lr;
  o.weight_decay = a.weight_decay;
  optim::AdamW opt(tm->parameters(), o);
  graph::GraphFunction captured("onnx", [&](const std::vector<Tensor>& in) {
    StatusOr<std::vector<Tensor>> out = tm->Forward(in);
    if (!out.ok()) throw std::runtime_error(out.status().ToString());
    return *out;
  });
  auto loss_of = [&](const Tensor& y, const Tensor& target) -> Tensor {
    if (a.loss == "cross-entropy") return graph::CrossEntropy(y, target);
    if (y.shape() != target.shape()) {
      throw std::runtime_error(
          fmt::format("--target has shape {}, the output {}", ShapeString(target.shape()), ShapeString(y.shape())));
    }
    const Tensor d = graph::Sub(y, target);
    return graph::Mean(graph::Mul(d, d));
  };
  nlohmann::json losses = nlohmann::json::array();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (int step = 1; step <= a.steps; ++step) {
      for (const auto& [name, p] : tm->parameters()) Tensor(p).ZeroGrad();
      std::vector<Tensor> out;
      const TrainBatch& batch = batches[static_cast<size_t>(step - 1) % batches.size()];
      if (a.graph) {
        out = captured(batch.inputs);
      } else {
        TESSERA_ASSIGN_OR_RETURN(out, tm->Forward(batch.inputs));
      }
      Tensor loss = loss_of(out.at(0), batch.target);
      const double value = loss.Item();
      graph::Backward(loss);
      opt.Step();
      losses.push_back(value);
      if (!a.json && (step == 1 || step % std::max(1, a.log_every) == 0 || step == a.steps)) {
        std::printf("step %d loss %.6g\n", step, value);
      }
    }
  } catch (const std::exception& e) {
    graph::ClearTape();
    return InvalidArgument("{}", e.what());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.save.empty()) TESSERA_RETURN_IF_ERROR(onnx::SaveModelWithInitializers(a.model, tm->Initializers(), a.save));
  nlohmann::json j = {{"model", a.model},
                      {"steps", a.steps},
                      {"batches", batches.size()},
                      {"loss", a.loss},
                      {"first_loss", losses.front()},
                      {"final_loss", losses.back()},
                      {"seconds", seconds},
                      {"parameters", tm->parameters().size()},
                      {"graph", a.graph},
                      {"graph_replays", captured.replays()},
                      {"fused_layer_norms", tm->fused_layer_norms()},
                      {"lowered_nodes", tm->lowered_nodes()},
                      {"graph_fallback", captured.fallback_reason()}};
  if (!a.save.empty()) j["saved"] = a.save;
  if (a.json) {
    j["losses"] = losses;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("trained %zu parameters for %d steps in %.3f s: loss %.6g -> %.6g%s%s\n", tm->parameters().size(),
                a.steps, seconds, losses.front().get<double>(), losses.back().get<double>(),
                a.graph ? fmt::format(" (graph mode, {} replays)", captured.replays()).c_str() : "",
                a.save.empty() ? "" : (", saved " + a.save).c_str());
  }
  return Status::Ok();
}

// `onnx run` on Tessera's own operators: the model lowered (onnx/trainable.h,
// inference mode) and captured as a graph (fusion, memory plan), no grad.
// Two untimed calls capture and check the graph; then `repeat` timed replays.
struct LoweredRun {
  std::vector<Value> outputs;
  std::vector<double> seconds;
};
StatusOr<LoweredRun> RunLowered(const onnx::Model& model, const std::map<std::string, Value>& given, int repeat) {
  onnx::TrainableOptions options;
  options.training = false;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<onnx::TrainableModel> tm, onnx::TrainableModel::Create(model, options));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<Tensor> inputs, BindInputs(*tm, given));
  graph::NoGradGuard no_grad;
  Status failure = Status::Ok();
  graph::GraphFunction f("onnx", [&](const std::vector<Tensor>& in) {
    StatusOr<std::vector<Tensor>> out = tm->Forward(in);
    if (!out.ok()) throw std::runtime_error(out.status().ToString());
    return *out;
  });
  LoweredRun run;
  std::vector<Tensor> out;
  try {
    for (int i = 0; i < 2 + repeat; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      out = f(inputs);
      if (i >= 2) run.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  } catch (const std::exception& e) {
    return InvalidArgument("{}", e.what());
  }
  for (const Tensor& t : out) run.outputs.push_back(Value::Tensor(onnx::ArrayFromTensor(t)));
  return run;
}

Status Run(const RunArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(onnx::Model model, onnx::LoadModelFile(a.model));
  using ValueMap = std::map<std::string, Value>;
  TESSERA_ASSIGN_OR_RETURN(const ValueMap inputs, LoadInputs(model, a.inputs));
  if (a.repeat < 1) return InvalidArgument("--repeat {} must be >= 1", a.repeat);
  if (a.engine != "auto" && a.engine != "interpreter" && a.engine != "graph") {
    return InvalidArgument("--engine '{}': auto, interpreter or graph", a.engine);
  }
  std::vector<Value> outputs;
  std::vector<double> seconds;
  std::string engine = "interpreter", engine_note;
  if (a.engine != "interpreter" && !a.profile) {
    StatusOr<LoweredRun> lowered = RunLowered(model, inputs, a.repeat);
    if (lowered.ok()) {
      outputs = std::move(lowered->outputs);
      seconds = std::move(lowered->seconds);
      engine = "graph";
    } else if (a.engine == "graph") {
      return lowered.status();
    } else {
      engine_note = lowered.status().message();
    }
  }
  onnx::Interpreter interp(model);
  std::map<std::string, onnx::Interpreter::OpProfile> profile;
  if (a.profile) interp.SetProfile(&profile);
  for (int i = 0; engine == "interpreter" && i < a.repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    TESSERA_ASSIGN_OR_RETURN(outputs, interp.Run(inputs));
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  if (!a.output_dir.empty()) std::filesystem::create_directories(a.output_dir);
  nlohmann::json j = nlohmann::json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = model.graph.outputs[i].name;
    const Value& v = outputs[i];
    nlohmann::json o = {{"name", name}, {"value", v.Describe()}};
    if (v.is_tensor()) {
      o["type"] = std::string(onnx::ElemName(v.tensor.type()));
      o["shape"] = v.tensor.shape();
      if (!a.output_dir.empty()) {
        const std::string path = a.output_dir + "/" + name + ".pb";
        TESSERA_RETURN_IF_ERROR(onnx::SaveTensorFile(v.tensor, name, path));
        o["file"] = path;
      }
    }
    if (!a.json) {
      std::printf("%s: %s%s%s\n", name.c_str(), v.Describe().c_str(), v.is_tensor() ? " = " : "",
                  v.is_tensor() ? Preview(v.tensor).c_str() : "");
    }
    j.push_back(o);
  }
  if (a.json) {
    nlohmann::json doc{
        {"model", a.model}, {"outputs", j}, {"seconds", seconds}, {"seconds_median", median}, {"engine", engine}};
    if (engine == "interpreter") doc["peak_live_bytes"] = interp.peak_live_bytes();
    if (!engine_note.empty()) doc["engine_note"] = engine_note;
    std::printf("%s\n", doc.dump(2).c_str());
  } else if (a.repeat > 1) {
    std::printf("%d runs: median %.6f s, fastest %.6f s\n", a.repeat, median, sorted.front());
  }
  if (!a.json) {
    std::printf("engine: %s%s\n", engine.c_str(), engine_note.empty() ? "" : (" (" + engine_note + ")").c_str());
    if (engine == "interpreter") {
      std::printf("peak live tensors: %.1f MB\n", static_cast<double>(interp.peak_live_bytes()) / 1e6);
    }
  }
  if (a.profile) {
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (const auto& [op, p] : profile) {
      rows.emplace_back(p.seconds, op);
      total += p.seconds;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "kernel time by operator over %d runs (%.6f s):\n", a.repeat, total);
    for (const auto& [s, op] : rows) {
      std::fprintf(stderr, "  %-28s %10.6f s  %5.1f %%  %lld calls\n", op.c_str(), s, 100 * s / std::max(total, 1e-12),
                   static_cast<long long>(profile[op].calls));
    }
  }
  return Status::Ok();
}

Status Test(const TestArgs& a) {
  onnx::SuiteOptions o;
  o.filter = a.filter;
  o.isolate = !a.no_isolate;
  o.case_timeout_s = a.timeout_s;
  int passed = 0, failed = 0, skipped = 0;
  TESSERA_ASSIGN_OR_RETURN(std::vector<CaseResult> results, onnx::RunBackendSuite(a.dir, o, [&](const CaseResult& r) {
                             const char* tag = r.outcome == CaseResult::Outcome::kPass   ? "PASS"
                                               : r.outcome == CaseResult::Outcome::kFail ? "FAIL"
                                                                                         : "SKIP";
                             (r.outcome == CaseResult::Outcome::kPass   ? passed
                              : r.outcome == CaseResult::Outcome::kFail ? failed
                                                                        : skipped)++;
                             if (!a.quiet || r.outcome != CaseResult::Outcome::kPass) {
                               std::string reason = r.reason;
                               for (char& c : reason) c = c == '\n' ? ' ' : c;
                               std::printf("%s %s%s%s\n", tag, r.name.c_str(), reason.empty() ? "" : ": ",
                                           reason.c_str());
                               std::fflush(stdout);
                             }
                           }));
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (!a.json_out.empty()) {
    nlohmann::json cases = nlohmann::json::array();
    for (const CaseResult& r : results) {
      cases.push_back({{"name", r.name},
                       {"outcome", r.outcome == CaseResult::Outcome::kPass   ? "pass"
                                   : r.outcome == CaseResult::Outcome::kFail ? "fail"
                                                                             : "skip"},
                       {"reason", r.reason},
                       {"seconds", r.seconds}});
    }
    std::ofstream out(a.json_out);
    out << nlohmann::json{{"dir", a.dir},
                          {"passed", passed},
                          {"failed", failed},
                          {"skipped", skipped},
                          {"cases", cases}}
               .dump(1)
        << "\n";
    if (!out) return IoError("cannot write '{}'", a.json_out);
  }
  if (passed < a.min_pass) return FailedPrecondition("{} cases passed, fewer than --min-pass {}", passed, a.min_pass);
  return Status::Ok();
}

}  // namespace

void RegisterOnnxCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("onnx", "run ONNX models and the ONNX backend test suite");
  cmd->require_subcommand(1);

  auto run = std::make_shared<RunArgs>();
  CLI::App* r = cmd->add_subcommand("run", "run a model on input tensors (.pb TensorProto files)");
  r->add_option("model", run->model, "the .onnx file")->required();
  r->add_option("--input", run->inputs, "NAME=FILE.pb, one per graph input")->take_all();
  r->add_option("--output-dir", run->output_dir, "write each output as NAME.pb here");
  r->add_flag("--json", run->json, "print a JSON document");
  r->add_flag("--profile", run->profile, "print the kernel time per operator type (stderr)");
  r->add_option("--engine", run->engine,
                "auto (default: Tessera's graph engine when every node lowers, else the interpreter), graph, "
                "or interpreter");
  r->add_option("--repeat", run->repeat,
                "run the model this many times and report the median time (inputs loaded once)");
  r->callback([run] { ExitWith(Run(*run)); });

  auto test = std::make_shared<TestArgs>();
  CLI::App* t = cmd->add_subcommand("test", "run every backend test case under DIR and compare");
  t->add_option("dir", test->dir, "a folder of cases (e.g. /usr/share/libonnx-testdata/data/node) or one case")
      ->required();
  t->add_option("--filter", test->filter, "only cases whose name matches this (POSIX extended) regex");
  t->add_flag("--no-isolate", test->no_isolate, "run cases in this process (default: one child process each)");
  t->add_option("--timeout", test->timeout_s, "seconds per case before it counts as failed (isolated runs)");
  t->add_option("--json", test->json_out, "write per-case results to this file");
  t->add_option("--min-pass", test->min_pass, "exit with an error when fewer cases pass");
  t->add_flag("--quiet", test->quiet, "print only failures and skips, and the summary");
  t->callback([test] { ExitWith(Test(*test)); });

  auto train = std::make_shared<TrainArgs>();
  CLI::App* tr = cmd->add_subcommand("train", "fine-tune a model's float initializers toward a target (AdamW)");
  tr->add_option("model", train->model, "the .onnx file")->required();
  tr->add_option("--input", train->inputs, "NAME=FILE.pb, one per graph input (the training batch)")->take_all();
  tr->add_option("--target", train->target, "FILE.pb: float targets (mse) or int64 classes (cross-entropy)");
  tr->add_option("--data", train->data,
                 "DIR of batches instead of --input / --target: each subfolder holds input_K.pb (the model's K-th "
                 "input) and output_0.pb (the target), as ONNX's test_data_set_N folders; cycled in name order");
  tr->add_option("--loss", train->loss, "mse (default) or cross-entropy, on the model's first output");
  tr->add_option("--steps", train->steps, "optimizer steps (default 100)");
  tr->add_option("--lr", train->lr, "AdamW learning rate (default 1e-3)");
  tr->add_option("--weight-decay", train->weight_decay, "AdamW weight decay (default 0)");
  tr->add_flag("--graph", train->graph, "capture the model as a graph (graph mode) instead of running it eagerly");
  tr->add_flag("--eval-mode", train->eval_mode,
               "BatchNormalization uses its running statistics (nodes exported with training_mode=1 excepted)");
  tr->add_option("--freeze", train->freeze, "an initializer to keep fixed (repeatable)")->take_all();
  tr->add_option("--save", train->save, "write the trained model here (.onnx; may be the input file)");
  tr->add_option("--log-every", train->log_every, "print the loss every N steps (default 10)");
  tr->add_flag("--json", train->json, "print a JSON document (every step's loss)");
  tr->callback([train] { ExitWith(Train(*train)); });

  CLI::App* ops = cmd->add_subcommand("ops", "list the implemented ONNX operators");
  ops->callback([] {
    const std::vector<std::string> names = onnx::OpRegistry::Global().Names();
    for (const std::string& n : names) std::printf("%s\n", n.c_str());
    std::printf("%zu operators\n", names.size());
    const std::vector<std::string> trainable = onnx::TrainableOps();
    std::string list;
    for (const std::string& n : trainable) list += (list.empty() ? "" : " ") + n;
    std::printf("%zu usable by `tessera onnx train` (%zu with a backward; Constant and Shape are static): %s\n",
                trainable.size(), trainable.size() - 2, list.c_str());
  });
}
TESSERA_CLI_COMMAND(70, RegisterOnnxCommand);

}  // namespace tessera::cli
