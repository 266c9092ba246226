// Runs ONNX backend test cases (the layout of onnx/backend/test/data:
// CASE/model.onnx + CASE/test_data_set_N/{input,output}_K.pb) on the
// interpreter and compares with ONNX's tolerances: floating outputs
// |got - want| <= atol + rtol |want| (rtol 1e-3, atol 1e-7, NaN == NaN),
// integer / bool / string outputs exactly, shapes and element types exactly.
// An unsupported operator is a failure, never a skip; a case with no model
// or no data set is skipped. With isolation (the default) each case runs in
// a forked child with a time limit, so a crash or a hang in one case is
// that case's failure, not the suite's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/onnx/value.h"

namespace tessera::onnx {

struct CaseResult {
  enum class Outcome { kPass, kFail, kSkip };
  std::string name;
  Outcome outcome = Outcome::kFail;
  std::string reason;  // why it failed / was skipped
  double seconds = 0;
};

struct SuiteOptions {
  std::string filter;  // POSIX extended regex over case names; empty = all
  double rtol = 1e-3;
  double atol = 1e-7;
  bool isolate = true;
  double case_timeout_s = 120;
};

// Compares one output; empty = equal, else what differs.
std::string CompareValues(const Value& got, const Value& want, double rtol, double atol);

// One case directory, in this process.
CaseResult RunBackendCase(const std::string& case_dir, const SuiteOptions& options);

// Every case directory under `dir` (sorted), calling `on_case` after each.
StatusOr<std::vector<CaseResult>> RunBackendSuite(const std::string& dir, const SuiteOptions& options,
                                                  const std::function<void(const CaseResult&)>& on_case);

}  // namespace tessera::onnx
