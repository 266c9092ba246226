// Local / axis-wise normalizations: LRN (across channels) and
// MeanVarianceNormalization (over the `axes` attribute).
#include <cmath>
#include <set>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"
#include "tessera/onnx/ops/nn/nn_util.h"

namespace tessera::onnx::nn {
namespace {

Status LrnKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type()) || x.rank() < 2) return ctx.Error("X must be a float N x C x ... tensor");
  TESSERA_ASSIGN_OR_RETURN(int64_t size, ctx.node().Int("size", 0));
  TESSERA_ASSIGN_OR_RETURN(double alpha, ctx.node().Float("alpha", 1e-4f));
  TESSERA_ASSIGN_OR_RETURN(double beta, ctx.node().Float("beta", 0.75f));
  TESSERA_ASSIGN_OR_RETURN(double bias, ctx.node().Float("bias", 1.0f));
  if (size <= 0) return ctx.Error("size must be positive, got {}", size);
  const int64_t n = x.dim(0), c = x.dim(1), plane = c > 0 && n > 0 ? x.numel() / (n * c) : 0;
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Array y(ElemType::kDouble, x.shape());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t i = 0; i < plane; ++i) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - lo); k <= std::min(c - 1, ch + hi); ++k) {
          const double v = x.GetDouble((b * c + k) * plane + i);
          sq += v * v;
        }
        const int64_t at = (b * c + ch) * plane + i;
        y.data<double>()[at] = x.GetDouble(at) / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
    }
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

Status MvnKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("X must be a float tensor");
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.node().Ints("axes", {0, 2, 3}));
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::set<int64_t> reduced;
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int64_t na, NormalizeAxis(ctx, a, rank));
    reduced.insert(na);
  }
  // Group index of each element: its coordinates on the kept axes, row-major.
  std::vector<int64_t> kept_shape;
  for (int64_t d = 0; d < rank; ++d) kept_shape.push_back(reduced.count(d) ? 1 : x.dim(static_cast<size_t>(d)));
  const std::vector<int64_t> group = BroadcastIndex(kept_shape, x.shape());
  const int64_t groups = Numel(kept_shape);
  std::vector<double> sum(static_cast<size_t>(groups)), sum2(static_cast<size_t>(groups)),
      cnt(static_cast<size_t>(groups));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const size_t g = static_cast<size_t>(group[static_cast<size_t>(i)]);
    const double v = x.GetDouble(i);
    sum[g] += v;
    sum2[g] += v * v;
    cnt[g] += 1;
  }
  Array y(ElemType::kDouble, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const size_t g = static_cast<size_t>(group[static_cast<size_t>(i)]);
    const double mu = sum[g] / cnt[g];
    const double sd = std::sqrt(std::max(0.0, sum2[g] / cnt[g] - mu * mu));
    y.data<double>()[i] = (x.GetDouble(i) - mu) / (sd + 1e-9);
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

}  // namespace

void RegisterLocalNormKernels(OpRegistry& r) {
  r.Register("LRN", LrnKernel);
  r.Register("MeanVarianceNormalization", MvnKernel);
}

}  // namespace tessera::onnx::nn
