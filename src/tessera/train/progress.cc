#include "tessera/train/progress.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "tessera/base/knobs.h"

namespace tessera::train {
namespace {

// Under `tessera launch` stdout is a pipe to the launcher, which relays
// in-place redraws to its terminal and says so with TESSERA_TERMINAL=1.
base::Knob<bool> kRelayedTerminal("TESSERA_TERMINAL", false,
                                  "stdout is relayed to a terminal (set by tessera launch): draw a progress bar");

bool OutputIsRelayedTerminal() { return kRelayedTerminal.Get(); }

}  // namespace

Progress::Progress(int64_t total_steps, int64_t log_every, FILE* out, bool force_plain)
    : total_(std::max<int64_t>(1, total_steps)),
      log_every_(std::max<int64_t>(1, log_every)),
      out_(out),
      interactive_(!force_plain && (isatty(fileno(out)) || (out == stdout && OutputIsRelayedTerminal()))) {}

std::string Progress::FormatDuration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string Progress::FormatRate(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

void Progress::ClearBar() {
  if (bar_shown_) {
    std::fputs("\r\033[2K", out_);
    bar_shown_ = false;
  }
}

void Progress::Update(const StepStats& s) {
  double eta = s.step > 0 ? s.elapsed_s / static_cast<double>(s.step) * static_cast<double>(total_ - s.step) : 0;
  if (interactive_) {
    auto now = std::chrono::steady_clock::now();
    if (s.step != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(kWidth * s.step / total_);
    std::string bar(filled, '#');
    bar.append(kWidth - filled, '.');
    std::fprintf(out_, "\r\033[2Kstep %lld/%lld [%s] loss %.4f | %s %s | lr %.2e | ETA %s",
                 static_cast<long long>(s.step), static_cast<long long>(total_), bar.c_str(), s.loss,
                 FormatRate(s.tokens_per_s).c_str(), s.rate_unit, s.lr, FormatDuration(eta).c_str());
    std::fflush(out_);
    bar_shown_ = true;
    return;
  }
  if (s.step % log_every_ == 0 || s.step == total_ || s.step == 1) {
    std::fprintf(out_, "step %lld/%lld loss %.4f lr %.3e grad_norm %.3f %s %s elapsed %s ETA %s\n",
                 static_cast<long long>(s.step), static_cast<long long>(total_), s.loss, s.lr, s.grad_norm,
                 s.rate_unit, FormatRate(s.tokens_per_s).c_str(), FormatDuration(s.elapsed_s).c_str(),
                 FormatDuration(eta).c_str());
    std::fflush(out_);
  }
}

void Progress::Message(const std::string& line) {
  ClearBar();
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::Finish() {
  if (bar_shown_) {
    std::fputs("\n", out_);
    bar_shown_ = false;
  }
  std::fflush(out_);
}

}  // namespace tessera::train
