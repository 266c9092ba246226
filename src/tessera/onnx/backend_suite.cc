#include "tessera/onnx/backend_suite.h"

#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/onnx/interpreter.h"
#include "tessera/onnx/model_loader.h"

namespace tessera::onnx {
namespace fs = std::filesystem;

namespace {

std::string CompareArrays(const Array& got, const Array& want, double rtol, double atol) {
  if (got.type() != want.type())
    return fmt::format("type {} != expected {}", ElemName(got.type()), ElemName(want.type()));
  if (got.shape() != want.shape()) return fmt::format("shape {} != expected {}", got.ShapeString(), want.ShapeString());
  if (want.type() == ElemType::kString) {
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (got.data<std::string>()[i] != want.data<std::string>()[i]) {
        return fmt::format("element {}: '{}' != expected '{}'", i, got.data<std::string>()[i],
                           want.data<std::string>()[i]);
      }
    }
    return "";
  }
  int64_t bad = 0, first = -1;
  double worst = 0;
  const bool exact = !IsFloatType(want.type());
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.GetDouble(i), w = want.GetDouble(i);
    bool ok;
    if (exact) {
      ok = got.GetInt(i) == want.GetInt(i) && (want.type() != ElemType::kUint64 || g == w);
    } else if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    }
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
      if (!std::isnan(g - w)) worst = std::max(worst, std::fabs(g - w));
    }
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ (first at {}: {} vs expected {}; max abs diff {:.3g})", bad,
                     want.numel(), first, got.GetDouble(first), want.GetDouble(first), worst);
}

}  // namespace

std::string CompareValues(const Value& got, const Value& want, double rtol, double atol) {
  if (want.kind == Value::Kind::kOptional) {
    const Value* g = &got;
    if (got.kind == Value::Kind::kOptional) {
      if (!want.optional || !got.optional) {
        return !want.optional && !got.optional ? "" : fmt::format("{} != expected {}", got.Describe(), want.Describe());
      }
      g = got.optional.get();
    } else if (!want.optional) {
      return fmt::format("{} != expected an empty optional", got.Describe());
    }
    return CompareValues(*g, *want.optional, rtol, atol);
  }
  if (got.kind == Value::Kind::kOptional && got.optional) return CompareValues(*got.optional, want, rtol, atol);
  if (got.kind != want.kind) return fmt::format("{} != expected {}", got.Describe(), want.Describe());
  if (want.kind == Value::Kind::kTensor) return CompareArrays(got.tensor, want.tensor, rtol, atol);
  if (got.sequence.size() != want.sequence.size()) {
    return fmt::format("sequence of {} != expected {}", got.sequence.size(), want.sequence.size());
  }
  for (size_t i = 0; i < want.sequence.size(); ++i) {
    std::string d = CompareArrays(got.sequence[i], want.sequence[i], rtol, atol);
    if (!d.empty()) return fmt::format("sequence item {}: {}", i, d);
  }
  return "";
}

namespace {

std::vector<std::string> SortedDataFiles(const std::string& dir, const std::string& prefix) {
  std::vector<std::pair<int, std::string>> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + 3 && name.ends_with(".pb")) {
      files.emplace_back(std::atoi(name.c_str() + prefix.size()), e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (auto& f : files) out.push_back(f.second);
  return out;
}

Status RunDataSet(const Model& model, const std::string& set_dir, const SuiteOptions& o) {
  // Graph inputs that the test feeds: the non-initializer ones, in order.
  std::vector<const ValueInfo*> feeds;
  for (const ValueInfo& in : model.graph.inputs) {
    if (!model.graph.initializers.count(in.name)) feeds.push_back(&in);
  }
  const std::vector<std::string> in_files = SortedDataFiles(set_dir, "input_");
  const std::vector<std::string> out_files = SortedDataFiles(set_dir, "output_");
  if (in_files.size() > model.graph.inputs.size()) {
    return InvalidArgument("{} input files for a graph of {} inputs", in_files.size(), model.graph.inputs.size());
  }
  std::map<std::string, Value> inputs;
  for (size_t i = 0; i < in_files.size(); ++i) {
    const ValueInfo& info = i < feeds.size() ? *feeds[i] : model.graph.inputs[i];
    TESSERA_ASSIGN_OR_RETURN(Value v, LoadValueFile(in_files[i], info));
    inputs[info.name] = std::move(v);
  }
  Interpreter interp(model);
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> got, interp.Run(inputs));
  if (out_files.size() != model.graph.outputs.size()) {
    return InvalidArgument("{} output files for a graph of {} outputs", out_files.size(), model.graph.outputs.size());
  }
  for (size_t i = 0; i < out_files.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Value want, LoadValueFile(out_files[i], model.graph.outputs[i]));
    const std::string diff = CompareValues(got[i], want, o.rtol, o.atol);
    if (!diff.empty()) return InvalidArgument("output {} ('{}'): {}", i, model.graph.outputs[i].name, diff);
  }
  return Status::Ok();
}

}  // namespace

CaseResult RunBackendCase(const std::string& case_dir, const SuiteOptions& options) {
  CaseResult r;
  r.name = fs::path(case_dir).filename().string();
  const auto t0 = std::chrono::steady_clock::now();
  auto done = [&](CaseResult::Outcome outcome, std::string reason) {
    r.outcome = outcome;
    r.reason = std::move(reason);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  const std::string model_path = case_dir + "/model.onnx";
  if (!fs::exists(model_path)) return done(CaseResult::Outcome::kSkip, "no model.onnx");
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(case_dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return done(CaseResult::Outcome::kSkip, "no test_data_set_*");
  StatusOr<Model> model = LoadModelFile(model_path);
  if (!model.ok()) return done(CaseResult::Outcome::kFail, model.status().ToString());
  for (const std::string& set : sets) {
    Status st = RunDataSet(*model, set, options);
    if (!st.ok())
      return done(CaseResult::Outcome::kFail, fmt::format("{}: {}", fs::path(set).filename().string(), st.ToString()));
  }
  return done(CaseResult::Outcome::kPass, "");
}

namespace {

const char* OutcomeName(CaseResult::Outcome o) {
  return o == CaseResult::Outcome::kPass ? "pass" : o == CaseResult::Outcome::kFail ? "fail" : "skip";
}

// Runs one case in a forked child; the result comes back as JSON on a pipe.
CaseResult RunIsolated(const std::string& case_dir, const SuiteOptions& o) {
  CaseResult r;
  r.name = fs::path(case_dir).filename().string();
  int fds[2];
  if (pipe(fds) != 0) return RunBackendCase(case_dir, o);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return RunBackendCase(case_dir, o);
  }
  if (pid == 0) {
    close(fds[0]);
    const CaseResult c = RunBackendCase(case_dir, o);
    const std::string text =
        nlohmann::json{{"outcome", OutcomeName(c.outcome)}, {"reason", c.reason}, {"seconds", c.seconds}}.dump();
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t w = write(fds[1], text.data() + off, text.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    const double left = o.case_timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got <= 0) break;
    text.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (timed_out) {
    r.outcome = CaseResult::Outcome::kFail;
    r.reason = fmt::format("timed out after {} s", o.case_timeout_s);
    return r;
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("outcome")) {
    r.outcome = CaseResult::Outcome::kFail;
    r.reason = WIFSIGNALED(status) ? fmt::format("crashed (signal {})", WTERMSIG(status))
                                   : fmt::format("the case process exited with status {} and no result",
                                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return r;
  }
  const std::string outcome = j["outcome"].get<std::string>();
  r.outcome = outcome == "pass"   ? CaseResult::Outcome::kPass
              : outcome == "skip" ? CaseResult::Outcome::kSkip
                                  : CaseResult::Outcome::kFail;
  r.reason = j["reason"].get<std::string>();
  return r;
}

}  // namespace

StatusOr<std::vector<CaseResult>> RunBackendSuite(const std::string& dir, const SuiteOptions& options,
                                                  const std::function<void(const CaseResult&)>& on_case) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("'{}' is not a directory of ONNX backend test cases", dir);
  // POSIX extended regex (<regex.h>): std::regex trips GCC 12's
  // -Wmaybe-uninitialized under the sanitizers.
  regex_t filter;
  const std::string pattern = options.filter.empty() ? std::string(".*") : options.filter;
  if (const int rc = regcomp(&filter, pattern.c_str(), REG_EXTENDED | REG_NOSUB); rc != 0) {
    char why[256];
    regerror(rc, &filter, why, sizeof why);
    return InvalidArgument("--filter '{}' is not a valid extended regex: {}", options.filter, why);
  }
  std::unique_ptr<regex_t, void (*)(regex_t*)> free_filter(&filter, regfree);
  std::vector<std::string> cases;
  // DIR may itself be one case.
  if (fs::exists(fs::path(dir) / "model.onnx")) {
    cases.push_back(dir);
  } else {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_directory() && regexec(&filter, e.path().filename().string().c_str(), 0, nullptr, 0) == 0) {
        cases.push_back(e.path());
      }
    }
  }
  std::sort(cases.begin(), cases.end());
  std::vector<CaseResult> results;
  for (const std::string& c : cases) {
    results.push_back(options.isolate ? RunIsolated(c, options) : RunBackendCase(c, options));
    if (on_case) on_case(results.back());
  }
  return results;
}

}  // namespace tessera::onnx
