// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to
// 2-D at `axis` (default 1) and the op runs over each row's flattened tail;
// from opset 13 it runs along `axis` alone (default -1). Computed in double.
#include <cmath>
#include <vector>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/reduce/kernels.h"
#include "tessera/onnx/ops/reduce/reduce_util.h"

namespace tessera::onnx {
namespace {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

StatusOr<AxisGeometry> SoftmaxGeometry(const OpContext& ctx, const Array& x) {
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (ctx.opset() >= 13) {
    TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", -1));
    TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank));
    return GeometryAt(x.shape(), axis);
  }
  // Coerced to [prod(shape[:axis]), prod(shape[axis:])]; axis == rank gives rows of one element.
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 1));
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 0 || axis > rank) return ctx.Error("axis {} is out of range for rank {}", axis_attr, rank);
  AxisGeometry g;
  g.n = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? g.outer : g.n) *= x.dim(static_cast<size_t>(d));
  return g;
}

Status RunSoftmax(OpContext& ctx, SoftmaxKind kind) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("input must be a floating-point tensor, got {}", ElemName(x.type()));
  TESSERA_ASSIGN_OR_RETURN(AxisGeometry g, SoftmaxGeometry(ctx, x));
  Array out(x.type(), x.shape());
  std::vector<double> row(static_cast<size_t>(g.n));
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), ctx.node().op_type, [&](auto t) {
    using T = decltype(t);
    if constexpr (kIsFloatLike<T>) {
      const T* in = x.data<T>();
      T* po = out.data<T>();
      for (int64_t o = 0; o < g.outer; ++o) {
        for (int64_t i = 0; i < g.inner; ++i) {
          const int64_t base = o * g.n * g.inner + i;
          double mx = -std::numeric_limits<double>::infinity();
          int64_t arg = 0;  // first maximum (a NaN counts as the maximum)
          for (int64_t j = 0; j < g.n; ++j) {
            const double v = ToDouble(in[base + j * g.inner]);
            row[static_cast<size_t>(j)] = v;
            if (!std::isnan(mx) && (std::isnan(v) || v > mx)) {
              mx = v;
              arg = j;
            }
          }
          if (kind == SoftmaxKind::kHardmax) {
            for (int64_t j = 0; j < g.n; ++j) po[base + j * g.inner] = FromDouble<T>(j == arg ? 1.0 : 0.0);
            continue;
          }
          double sum = 0;
          for (double& v : row) {
            v = std::exp(v - mx);
            sum += v;
          }
          for (int64_t j = 0; j < g.n; ++j) {
            const double e = row[static_cast<size_t>(j)];
            const double r =
                kind == SoftmaxKind::kSoftmax ? e / sum : ToDouble(in[base + j * g.inner]) - mx - std::log(sum);
            po[base + j * g.inner] = FromDouble<T>(r);
          }
        }
      }
    }
  }));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

Status SoftmaxKernel(OpContext& ctx) { return RunSoftmax(ctx, SoftmaxKind::kSoftmax); }
Status LogSoftmaxKernel(OpContext& ctx) { return RunSoftmax(ctx, SoftmaxKind::kLogSoftmax); }
Status HardmaxKernel(OpContext& ctx) { return RunSoftmax(ctx, SoftmaxKind::kHardmax); }

}  // namespace tessera::onnx
