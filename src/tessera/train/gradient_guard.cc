#include "tessera/train/gradient_guard.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace tessera::train {

std::string_view VerdictName(GradientVerdict v) {
  switch (v) {
    case GradientVerdict::kOk: return "ok";
    case GradientVerdict::kNonFinite: return "non-finite gradient";
    case GradientVerdict::kSpike: return "gradient-norm spike";
    case GradientVerdict::kReplicaMismatch: return "replica mismatch";
  }
  return "?";
}

double GradientGuard::median() const {
  if (window_.empty()) return 0;
  std::vector<double> v(window_.begin(), window_.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

GradientVerdict GradientGuard::Check(double grad_norm, const std::string& replica_mismatch, std::string* why) {
  if (!replica_mismatch.empty()) {
    *why = replica_mismatch;
    return GradientVerdict::kReplicaMismatch;
  }
  if (!std::isfinite(grad_norm)) {
    *why = fmt::format("gradient norm is {}", grad_norm);
    return GradientVerdict::kNonFinite;
  }
  const int64_t window = std::max<int64_t>(1, options_.spike_window);
  if (options_.spike_factor > 0 && static_cast<int64_t>(window_.size()) >= std::max<int64_t>(1, window / 2)) {
    const double m = median();
    if (grad_norm > options_.spike_factor * m) {
      *why = fmt::format("gradient norm {:.4g} is {:.1f}x the median {:.4g} of the last {} steps (guard.spike_factor "
                         "= {})",
                         grad_norm, grad_norm / m, m, window_.size(), options_.spike_factor);
      return GradientVerdict::kSpike;
    }
  }
  window_.push_back(grad_norm);
  while (static_cast<int64_t>(window_.size()) > window) window_.pop_front();
  return GradientVerdict::kOk;
}

}  // namespace tessera::train
