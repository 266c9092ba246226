#include "tessera/optim/clip.h"

#include <cmath>

#include <omp.h>

#include "tessera/base/check.h"
#include "tessera/ops/elementwise/elementwise.h"

namespace tessera::optim {

// 16 independent double lanes: vectorized (float -> double converts and
// FMAs), the add latency hidden, and squares of large finite gradients
// (|g| > 1.8e19 overflows a float square) stay finite.
double SumOfSquares(const float* x, int64_t n) {
  constexpr int64_t kLanes = 16;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(x[i + l]) * x[i + l];
  }
  double total = 0.0;
  for (; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  for (double a : acc) total += a;
  return total;
}

namespace {

double SumSquares(const Tensor& grad) {
  Tensor g = grad.To(DType::kF32).Contiguous();
  const float* data = g.data<float>();
  const int64_t n = g.numel();
  constexpr int64_t kParallelMin = 1 << 18;
  if (n < kParallelMin) return SumOfSquares(data, n);
  double total = 0.0;
#pragma omp parallel reduction(+ : total)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
    total += SumOfSquares(data + lo, hi - lo);
  }
  return total;
}

}  // namespace

double GradNorm(const std::vector<Tensor>& params) {
  double total = 0.0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) total += SumSquares(g);
  }
  return std::sqrt(total);
}

double ClipGradNorm(const std::vector<Tensor>& params, double max_norm) {
  TESSERA_CHECK(max_norm > 0, "ClipGradNorm: max_norm {} must be positive", max_norm);
  const double norm = GradNorm(params);
  if (!std::isfinite(norm) || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() == DType::kF32 && g.is_contiguous()) {
      float* data = g.data<float>();
      const int64_t n = g.numel();
#pragma omp parallel for simd schedule(static) if (n >= (1 << 16))
      for (int64_t i = 0; i < n; ++i) data[i] *= scale;
    } else {
      g.CopyFrom(ops::Affine(g, scale, 0.0f));
    }
  }
  return norm;
}

}  // namespace tessera::optim
