// The options of the Tessera commands whose work is a library query
// (plan evaluate|search, sim collective|step, train, launch), declared once
// over the queries' typed structs (plan/query.h, plan/step_query.h,
// sim/query.h, train/run_query.h, comm/launch_query.h): names, help texts,
// required options and checks. The CLI (cmd_*.cc) adds them to its
// subcommands; the Python package (python/bindings) parses its keyword
// arguments, turned into the same option strings, with ParseQuery, so both
// take the same arguments with the same defaults and errors. CLI-only flags
// (--json, --help-config) are added by the CLI. Not thread-safe per App.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/base/status.h"
#include "tessera/comm/launch_query.h"
#include "tessera/plan/query.h"
#include "tessera/plan/step_query.h"
#include "tessera/sim/query.h"
#include "tessera/train/run_query.h"

namespace tessera::cli {

// `q` must outlive the parse of `app`.
void AddEvaluateOptions(CLI::App* app, plan::EvaluateQuery* q);
void AddSearchOptions(CLI::App* app, plan::SearchQuery* q);
void AddCollectiveOptions(CLI::App* app, sim::CollectiveQuery* q);
void AddStepOptions(CLI::App* app, plan::StepQuery* q);
void AddTrainOptions(CLI::App* app, train::TrainQuery* q);    // config is positional
void AddLaunchOptions(CLI::App* app, comm::LaunchQuery* q);   // the command is positional, after --

template <class Query>
using AddOptionsFn = void (*)(CLI::App*, Query*);

// Parses `args` (as after the subcommand on the command line, e.g.
// {"--model", "m.toml", "--dp", "8"}) into a Query with the defaults of its
// struct. A parse error (unknown option, missing required one, bad value)
// is InvalidArgument with CLI11's message, prefixed by `command`.
template <class Query>
StatusOr<Query> ParseQuery(const std::string& command, AddOptionsFn<Query> add, std::vector<std::string> args) {
  Query q;
  CLI::App app{command, command};
  add(&app, &q);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument("{}: {}", command, e.what());
  }
  return q;
}

// The options' help text (CLI11's), e.g. for a Python docstring.
template <class Query>
std::string QueryHelp(const std::string& command, AddOptionsFn<Query> add) {
  Query q;
  CLI::App app{command, command};
  add(&app, &q);
  return app.help();
}

}  // namespace tessera::cli
