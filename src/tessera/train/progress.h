// Progress output of a training run. On a terminal (or stdout relayed to
// one by `tessera launch`, which sets TESSERA_TERMINAL=1): one self-updating
// bar line (step, loss, tokens/s, ETA) redrawn at most ~10 times a second;
// when output is not a terminal (logs, CI): a plain line every `log_every`
// steps.
// Evaluation results and messages always print as their own lines.
// Single-threaded use.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tessera::train {

struct StepStats {
  int64_t step = 0;  // 1-based step just finished
  double loss = 0;
  double lr = 0;
  double tokens_per_s = 0;  // the run's throughput, in `rate_unit`
  double grad_norm = 0;
  double elapsed_s = 0;
  const char* rate_unit = "tok/s";  // "img/s" for image models
};

class Progress {
 public:
  // `out` is where lines go; `force_plain` disables the bar even on a tty.
  Progress(int64_t total_steps, int64_t log_every, FILE* out = stdout, bool force_plain = false);
  void Update(const StepStats& s);
  void Message(const std::string& line);
  void Finish();
  bool interactive() const { return interactive_; }

  static std::string FormatDuration(double seconds);  // "1m23s"
  static std::string FormatRate(double per_s);        // "12.3k"

 private:
  void ClearBar();

  int64_t total_;
  int64_t log_every_;
  FILE* out_;
  bool interactive_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace tessera::train
