// Det: determinants of square matrices [*, M, M] -> [*] by LU
// decomposition with partial pivoting (in double).
#include <cmath>
#include <utility>

#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {
namespace {

double Determinant(std::vector<double>& a, int64_t m) {
  double det = 1;
  for (int64_t c = 0; c < m; ++c) {
    int64_t piv = c;
    for (int64_t r = c + 1; r < m; ++r) {
      if (std::abs(a[r * m + c]) > std::abs(a[piv * m + c])) piv = r;
    }
    if (a[piv * m + c] == 0) return 0;
    if (piv != c) {
      for (int64_t k = 0; k < m; ++k) std::swap(a[c * m + k], a[piv * m + k]);
      det = -det;
    }
    const double p = a[c * m + c];
    det *= p;
    for (int64_t r = c + 1; r < m; ++r) {
      const double f = a[r * m + c] / p;
      if (f == 0) continue;
      for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
    }
  }
  return det;
}

}  // namespace

Status DetKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("input must be a float tensor, got {}", ElemName(x.type()));
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
    return ctx.Error("input must be [*, M, M], got {}", x.ShapeString());
  }
  const int64_t m = x.dim(x.rank() - 1);
  std::vector<int64_t> out_shape(x.shape().begin(), x.shape().end() - 2);
  Array out(x.type(), out_shape);
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < out.numel(); ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = x.GetDouble(b * m * m + i);
    out.SetDouble(b, Determinant(a, m));
  }
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
