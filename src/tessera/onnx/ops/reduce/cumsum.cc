// CumSum along the axis given as input 1 (exclusive, reverse). Integers wrap
// like numpy (summed on uint64); floating types accumulate in double.
#include <cmath>
#include <vector>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/reduce/kernels.h"
#include "tessera/onnx/ops/reduce/reduce_util.h"

namespace tessera::onnx {

Status CumSumKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() == ElemType::kBool || x.type() == ElemType::kString) {
    return ctx.Error("element type {} is not supported", ElemName(x.type()));
  }
  TESSERA_ASSIGN_OR_RETURN(Array axis_t, ctx.tensor(1));
  if (axis_t.type() != ElemType::kInt32 && axis_t.type() != ElemType::kInt64) {
    return ctx.Error("axis must be int32 or int64, got {}", ElemName(axis_t.type()));
  }
  if (axis_t.numel() != 1) return ctx.Error("axis must hold one value, has shape {}", axis_t.ShapeString());
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_t.GetInt(0), static_cast<int64_t>(x.rank())));
  TESSERA_ASSIGN_OR_RETURN(bool exclusive, BoolAttr(ctx, "exclusive", false));
  TESSERA_ASSIGN_OR_RETURN(bool reverse, BoolAttr(ctx, "reverse", false));

  const AxisGeometry g = GeometryAt(x.shape(), axis);
  Array out(x.type(), x.shape());
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), "CumSum", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) {
      using Acc = std::conditional_t<kIsFloatLike<T>, double, uint64_t>;
      const T* in = x.data<T>();
      T* po = out.data<T>();
      for (int64_t o = 0; o < g.outer; ++o) {
        for (int64_t i = 0; i < g.inner; ++i) {
          const int64_t base = o * g.n * g.inner + i;
          Acc acc = 0;
          for (int64_t s = 0; s < g.n; ++s) {
            const int64_t j = reverse ? g.n - 1 - s : s;
            const int64_t k = base + j * g.inner;
            Acc v;
            if constexpr (kIsFloatLike<T>) {
              v = ToDouble(in[k]);
            } else {
              // Sign-extended to 64 bits; the sum wraps modulo 2^64 and is truncated to T.
              v = static_cast<uint64_t>(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(in[k]));
            }
            if (!exclusive) acc += v;
            if constexpr (kIsFloatLike<T>) {
              po[k] = FromDouble<T>(acc);
            } else {
              po[k] = static_cast<T>(acc);
            }
            if (exclusive) acc += v;
          }
        }
      }
    }
  }));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
