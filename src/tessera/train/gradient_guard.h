// GradientGuard: the algorithmic tier of fault tolerance — verifies the
// gradients before each optimizer step ([guard] in the config):
//   - non-finite: the global gradient norm is inf or NaN (a NaN or inf
//     anywhere, on any rank, reaches it);
//   - spike: the norm exceeds `spike_factor` × the median of the last
//     `spike_window` accepted norms (once `spike_window / 2` are known);
//   - replica mismatch: data-parallel replicas of a reduced gradient differ
//     (silent corruption on one replica; found by the caller, e.g.
//     ZeroOptimizer::CompareReplicaGradients, and passed in).
// Verdicts depend only on values every rank has (the all-reduced norm and
// the agreed mismatch flag), so all ranks decide alike. The caller then
// skips the update or rolls back to the last good checkpoint
// (guard.on_failure), and logs the reason.
// Not thread-safe: one per training loop.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "tessera/train/train_config.h"

namespace tessera::train {

enum class GradientVerdict { kOk, kNonFinite, kSpike, kReplicaMismatch };

class GradientGuard {
 public:
  explicit GradientGuard(const GuardOptions& options) : options_(options) {}

  // The verdict on this step's gradients; `why` says what was seen. An
  // accepted norm joins the running window.
  GradientVerdict Check(double grad_norm, const std::string& replica_mismatch, std::string* why);
  double median() const;  // of the window (0 when empty)

 private:
  GuardOptions options_;
  std::deque<double> window_;
};

std::string_view VerdictName(GradientVerdict v);

}  // namespace tessera::train
