// The shape-aware fits of calibrate.h: non-negative relative least
// squares, the linear-layer cost (half dimensions searched on a grid) and
// the attention cost.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>

#include "tessera/sim/calibrate.h"

namespace tessera::sim {
namespace {

// Solves the k x k system a x = b (Gaussian elimination with partial
// pivoting); false when singular.
bool Solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const size_t k = b.size();
  for (size_t c = 0; c < k; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < k; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    }
    if (!(std::fabs(a[piv][c]) > 1e-300)) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (size_t r = c + 1; r < k; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t j = c; j < k; ++j) a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  x.assign(k, 0);
  for (size_t c = k; c-- > 0;) {
    double s = b[c];
    for (size_t j = c + 1; j < k; ++j) s -= a[c][j] * x[j];
    x[c] = s / a[c][c];
  }
  return true;
}

double q(double d, double half) { return d / (d + half); }

}  // namespace

StatusOr<RelativeFit> FitNonNegativeRelative(const std::vector<std::vector<double>>& features,
                                             const std::vector<double>& y) {
  if (features.size() != y.size() || y.empty()) {
    return InvalidArgument("fit: {} feature rows for {} samples", features.size(), y.size());
  }
  const size_t k = features[0].size();
  if (k == 0 || k > 6) return InvalidArgument("fit: {} features (1-6 supported)", k);
  for (size_t i = 0; i < y.size(); ++i) {
    if (features[i].size() != k) return InvalidArgument("fit: sample {} has {} features, not {}", i, features[i].size(), k);
    if (!(y[i] > 0) || !std::isfinite(y[i])) return InvalidArgument("fit: sample {} has y = {} (must be > 0)", i, y[i]);
    for (double f : features[i]) {
      if (!std::isfinite(f)) return InvalidArgument("fit: sample {} has a non-finite feature", i);
    }
  }
  std::vector<bool> active(k, true);
  RelativeFit out;
  for (size_t round = 0; round <= k; ++round) {
    std::vector<size_t> idx;
    for (size_t j = 0; j < k; ++j) {
      if (active[j]) idx.push_back(j);
    }
    if (idx.empty()) return InvalidArgument("fit: no feature has a positive coefficient");
    // Normal equations of sum ((f . c - y) / y)^2 over the active features.
    std::vector<std::vector<double>> a(idx.size(), std::vector<double>(idx.size(), 0));
    std::vector<double> b(idx.size(), 0), x;
    for (size_t i = 0; i < y.size(); ++i) {
      const double w = 1 / (y[i] * y[i]);
      for (size_t r = 0; r < idx.size(); ++r) {
        b[r] += w * features[i][idx[r]] * y[i];
        for (size_t c = 0; c < idx.size(); ++c) a[r][c] += w * features[i][idx[r]] * features[i][idx[c]];
      }
    }
    if (!Solve(a, b, x)) {
      // Degenerate (a feature never varies independently): drop the last active one.
      active[idx.back()] = false;
      continue;
    }
    size_t worst = idx.size();
    for (size_t r = 0; r < idx.size(); ++r) {
      if (x[r] < 0 && (worst == idx.size() || x[r] < x[worst])) worst = r;
    }
    if (worst != idx.size()) {
      active[idx[worst]] = false;
      continue;
    }
    out.coef.assign(k, 0);
    for (size_t r = 0; r < idx.size(); ++r) out.coef[idx[r]] = x[r];
    double sq = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      double fit = 0;
      for (size_t j = 0; j < k; ++j) fit += out.coef[j] * features[i][j];
      sq += (fit - y[i]) * (fit - y[i]) / (y[i] * y[i]);
    }
    out.rms_rel_error = std::sqrt(sq / static_cast<double>(y.size()));
    return out;
  }
  return InvalidArgument("fit: no non-negative solution");
}

double Residuals::At(double a, double b, double c) const {
  if (points.empty() || a <= 0 || b <= 0 || c <= 0) return 1;
  const double la = std::log2(a), lb = std::log2(b), lc = std::log2(c);
  double sw = 0, sr = 0;
  for (const auto& p : points) {
    const double d2 = (p[0] - la) * (p[0] - la) + (p[1] - lb) * (p[1] - lb) + (p[2] - lc) * (p[2] - lc);
    if (d2 > 4) continue;
    const double w = 1 / (d2 + 1e-6);
    sw += w;
    sr += w * p[3];
  }
  return sw > 0 ? sr / sw : 1;
}

void Residuals::Add(double a, double b, double c, double ratio) {
  points.push_back({std::log2(a), std::log2(b), std::log2(c), ratio});
}

std::string Residuals::Text() const {
  std::string s;
  for (const auto& p : points) {
    s += fmt::format("{}{:.6g},{:.6g},{:.6g}:{:.5f}", s.empty() ? "" : " ", std::exp2(p[0]), std::exp2(p[1]),
                     std::exp2(p[2]), p[3]);
  }
  return s;
}

StatusOr<Residuals> Residuals::Parse(const std::string& text) {
  Residuals r;
  std::istringstream in(text);
  for (std::string item; in >> item;) {
    double a = 0, b = 0, c = 0, ratio = 0;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%lf,%lf,%lf:%lf%c", &a, &b, &c, &ratio, &tail) != 4 || !(a > 0) || !(b > 0) ||
        !(c > 0) || !(ratio > 0) || !std::isfinite(ratio)) {
      return InvalidArgument("residual '{}': expected 'a,b,c:ratio' with positive numbers", item);
    }
    r.Add(a, b, c, ratio);
  }
  return r;
}

double LinearCost::CurveSeconds(double m, double n, double k, double peak_flops) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  return fixed_s + 6 * m * n * k / (peak_flops * max_efficiency * q(m, half_m) * q(n, half_n) * q(k, half_k));
}

double LinearCost::Seconds(double m, double n, double k, double peak_flops) const {
  return CurveSeconds(m, n, k, peak_flops) * residuals.At(m, n, k);
}

StatusOr<LinearCost> FitLinearCost(const std::vector<LinearSample>& samples, double peak_flops) {
  if (!(peak_flops > 0)) return InvalidArgument("linear fit: peak FLOP/s must be > 0, got {}", peak_flops);
  if (samples.size() < 4) return InvalidArgument("linear fit: needs >= 4 samples, got {}", samples.size());
  std::vector<double> grid = {0};
  for (double h = 1; h <= 1024; h *= 2) grid.push_back(h);
  std::vector<double> y;
  for (const LinearSample& s : samples) y.push_back(s.seconds);
  LinearCost best;
  bool found = false;
  for (double hm : grid) {
    for (double hn : grid) {
      for (double hk : grid) {
        // t = fixed + (6 m n k / (peak q q q)) / e: linear in (fixed, 1 / e).
        std::vector<std::vector<double>> f;
        for (const LinearSample& s : samples) {
          f.push_back({1.0, 6 * s.m * s.n * s.k / (peak_flops * q(s.m, hm) * q(s.n, hn) * q(s.k, hk))});
        }
        auto fit = FitNonNegativeRelative(f, y);
        if (!fit.ok() || !(fit->coef[1] > 0)) continue;
        if (!found || fit->rms_rel_error < best.rms_rel_error) {
          found = true;
          best = LinearCost{fit->coef[0], 1 / fit->coef[1], hm, hn, hk, fit->rms_rel_error, {}};
        }
      }
    }
  }
  if (!found) return InvalidArgument("linear fit: time does not grow with the work of the samples");
  for (const LinearSample& x : samples) {
    best.residuals.Add(x.m, x.n, x.k, x.seconds / best.CurveSeconds(x.m, x.n, x.k, peak_flops));
  }
  return best;
}

double AttentionCost::CurveSeconds(double bh, double t, double dh) const {
  return fixed_s + per_element_s * bh * t * dh + per_score_dim_s * bh * t * t * dh + per_score_s * bh * t * t;
}

double AttentionCost::Seconds(double bh, double t, double dh) const {
  return CurveSeconds(bh, t, dh) * residuals.At(bh, t, dh);
}

StatusOr<AttentionCost> FitAttentionCost(const std::vector<AttentionSample>& samples) {
  if (samples.size() < 4) return InvalidArgument("attention fit: needs >= 4 samples, got {}", samples.size());
  std::vector<std::vector<double>> f;
  std::vector<double> y;
  for (const AttentionSample& s : samples) {
    f.push_back({1.0, s.bh * s.t * s.dh, s.bh * s.t * s.t * s.dh, s.bh * s.t * s.t});
    y.push_back(s.seconds);
  }
  TESSERA_ASSIGN_OR_RETURN(RelativeFit fit, FitNonNegativeRelative(f, y));
  AttentionCost c{fit.coef[0], fit.coef[1], fit.coef[2], fit.coef[3], fit.rms_rel_error, {}};
  for (const AttentionSample& s : samples) c.residuals.Add(s.bh, s.t, s.dh, s.seconds / c.CurveSeconds(s.bh, s.t, s.dh));
  return c;
}

}  // namespace tessera::sim
