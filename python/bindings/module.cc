// tessera._tessera: the pybind11 module behind the Python package. Each
// function takes the command's options as the CLI's argument strings (the
// package's keyword arguments, turned into them by tessera/_options.py),
// parses them with the CLI's own option table (tools/tessera/options), runs
// the same library query as the CLI (plan/query.h, plan/step_query.h,
// sim/query.h, train/run_query.h, comm/launch_query.h) and returns the
// CLI's JSON document as Python objects (json_to_python.h). A Tessera
// Status that is not OK, or an exception from the library, raises
// tessera.Error with the Status's message. The GIL is released while a
// query runs.
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "json_to_python.h"
#include "query_options.h"
#include "tessera/comm/launch_query.h"
#include "tessera/plan/query.h"
#include "tessera/plan/step_query.h"
#include "tessera/sim/query.h"
#include "tessera/train/run_query.h"

namespace py = pybind11;

namespace tessera::python {
namespace {

using Args = std::vector<std::string>;

// tessera.Error (created in PYBIND11_MODULE; lives as long as the module).
PyObject* error_type = nullptr;

// Raises tessera.Error(message); `result`, when given, becomes its `result`
// attribute (e.g. the search's document when no plan fits).
[[noreturn]] void Raise(const std::string& message, std::optional<py::object> result = std::nullopt) {
  py::object error = py::reinterpret_borrow<py::object>(error_type)(message);
  error.attr("result") = result ? *result : py::none();
  PyErr_SetObject(error_type, error.ptr());
  throw py::error_already_set();
}

// Runs `fn` without the GIL; a C++ exception escaping the library (an
// operator's argument error, bad_alloc, ...) becomes a Status as in the CLI.
template <class Fn>
auto Unlocked(Fn&& fn) -> decltype(fn()) {
  using Result = decltype(fn());
  std::optional<Result> out;
  std::string error;
  {
    py::gil_scoped_release release;
    try {
      out.emplace(fn());
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!out) Raise("internal error: " + error);
  return std::move(*out);
}

template <class T>
T ValueOrRaise(StatusOr<T> v) {
  if (!v.ok()) Raise(v.status().ToString());
  return std::move(*v);
}

template <class Query>
Query Parse(const char* command, cli::AddOptionsFn<Query> add, const Args& args) {
  return ValueOrRaise(cli::ParseQuery<Query>(command, add, args));
}

py::object PlanEvaluate(const Args& args) {
  auto q = Parse<plan::EvaluateQuery>("plan evaluate", cli::AddEvaluateOptions, args);
  auto a = ValueOrRaise(Unlocked([&] { return plan::RunEvaluateQuery(q); }));
  return JsonToPython(plan::EvaluateAnswerJson(a));
}

py::object PlanSearch(const Args& args) {
  auto q = Parse<plan::SearchQuery>("plan search", cli::AddSearchOptions, args);
  auto a = ValueOrRaise(Unlocked([&] { return plan::RunSearchQuery(q); }));
  py::object result = JsonToPython(plan::SearchAnswerJson(a));
  // As the CLI: the document, and a failure when no plan fits.
  if (Status found = plan::SearchFound(a); !found.ok()) Raise(found.ToString(), result);
  return result;
}

py::object SimCollective(const Args& args) {
  auto q = Parse<sim::CollectiveQuery>("sim collective", cli::AddCollectiveOptions, args);
  auto a = ValueOrRaise(Unlocked([&] { return sim::RunCollectiveQuery(q); }));
  return JsonToPython(sim::CollectiveAnswerJson(a));
}

py::object SimStep(const Args& args) {
  auto q = Parse<plan::StepQuery>("sim step", cli::AddStepOptions, args);
  auto a = ValueOrRaise(Unlocked([&] { return plan::RunStepQuery(q); }));
  return JsonToPython(plan::StepAnswerJson(a));
}

py::object TrainRun(const Args& args) {
  auto q = Parse<train::TrainQuery>("train", cli::AddTrainOptions, args);
  auto summary = ValueOrRaise(Unlocked([&] { return train::RunTrainQuery(q); }));
  return JsonToPython(summary.ToJson());
}

py::dict LaunchResultDict(const comm::LaunchResult& r) {
  py::list ranks;
  for (const comm::RankOutcome& o : r.ranks) {
    py::dict d;
    d["rank"] = o.rank;
    d["pid"] = static_cast<long>(o.pid);
    d["exited"] = o.exited;
    d["exit_code"] = o.exit_code;
    d["signal"] = o.signal;
    d["signalled_by_launcher"] = o.signalled_by_launcher;
    d["first_failure"] = o.first_failure;
    d["silent_s"] = o.silent_s;
    d["runtime_s"] = o.runtime_s;
    ranks.append(std::move(d));
  }
  py::dict out;
  out["exit_code"] = r.exit_code;
  out["reason"] = r.reason;
  out["restarts"] = r.restarts;
  out["attempts"] = r.attempts;
  out["ranks"] = std::move(ranks);
  return out;
}

py::object Launch(const Args& args, bool check) {
  auto q = Parse<comm::LaunchQuery>("launch", cli::AddLaunchOptions, args);
  auto r = ValueOrRaise(Unlocked([&] { return comm::RunLaunchQuery(q); }));
  py::dict result = LaunchResultDict(r);
  if (check && r.exit_code != 0) {
    Raise("launch: the job failed with exit code " + std::to_string(r.exit_code) +
              (r.reason.empty() ? std::string() : ": " + r.reason),
          result);
  }
  return result;
}

std::string Help(const std::string& command) {
  if (command == "plan evaluate") return cli::QueryHelp<plan::EvaluateQuery>(command, cli::AddEvaluateOptions);
  if (command == "plan search") return cli::QueryHelp<plan::SearchQuery>(command, cli::AddSearchOptions);
  if (command == "sim collective") return cli::QueryHelp<sim::CollectiveQuery>(command, cli::AddCollectiveOptions);
  if (command == "sim step") return cli::QueryHelp<plan::StepQuery>(command, cli::AddStepOptions);
  if (command == "train") return cli::QueryHelp<train::TrainQuery>(command, cli::AddTrainOptions);
  if (command == "launch") return cli::QueryHelp<comm::LaunchQuery>(command, cli::AddLaunchOptions);
  Raise("no command '" + command + "'");
}

}  // namespace
}  // namespace tessera::python

PYBIND11_MODULE(_tessera, m) {
  using namespace tessera::python;
  m.doc() = "Tessera's library queries (use the tessera package: tessera.plan, tessera.sim, tessera.train, "
            "tessera.launch)";
  static py::exception<std::exception> error(m, "Error");  // the type only: raised through Raise
  error_type = error.ptr();
  error.doc() = "A Tessera error: the message of the tessera::Status (or the CLI's option error).";
  m.def("plan_evaluate", &PlanEvaluate, py::arg("args"), "tessera plan evaluate ARGS --json, as a dict");
  m.def("plan_search", &PlanSearch, py::arg("args"), "tessera plan search ARGS --json, as a dict");
  m.def("sim_collective", &SimCollective, py::arg("args"), "tessera sim collective ARGS --json, as a dict");
  m.def("sim_step", &SimStep, py::arg("args"), "tessera sim step ARGS --json, as a dict");
  m.def("train_run", &TrainRun, py::arg("args"), "tessera train ARGS: the run's summary (summary.json) as a dict");
  m.def("launch", &Launch, py::arg("args"), py::arg("check") = true,
        "tessera launch ARGS -- CMD: the job's outcome as a dict");
  m.def("help", &Help, py::arg("command"), "the options of a command (CLI11's help text)");
}
