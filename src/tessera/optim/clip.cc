#include "tessera/optim/clip.h"

#include <cmath>

#include "tessera/base/check.h"
#include "tessera/ops/elementwise/elementwise.h"

namespace tessera::optim {
namespace {

double SumSquares(const Tensor& grad) {
  Tensor g = grad.To(DType::kF32).Contiguous();
  const float* data = g.data<float>();
  const int64_t n = g.numel();
  double total = 0.0;
#pragma omp parallel for simd reduction(+ : total) schedule(static) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(data[i]) * data[i];
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
