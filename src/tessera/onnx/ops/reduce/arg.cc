// ArgMax / ArgMin along one axis (keepdims, select_last_index). Integers
// compare exactly; NaN counts as the extreme value (numpy's argmax / argmin
// return the first NaN).
#include <vector>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/reduce/kernels.h"
#include "tessera/onnx/ops/reduce/reduce_util.h"

namespace tessera::onnx {
namespace {

// Whether `v` replaces the current best `b`; `last` keeps the last of equals.
template <typename K>
bool Replaces(K v, K b, bool is_max, bool last) {
  const bool v_nan = IsNaNKey(v), b_nan = IsNaNKey(b);
  if (b_nan) return v_nan && last;
  if (v_nan) return true;
  if (v == b) return last;
  return is_max ? v > b : v < b;
}

Status RunArg(OpContext& ctx, bool is_max) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() == ElemType::kString) return ctx.Error("element type string is not supported");
  const int64_t rank = static_cast<int64_t>(x.rank());
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank));
  TESSERA_ASSIGN_OR_RETURN(bool keepdims, BoolAttr(ctx, "keepdims", true));
  TESSERA_ASSIGN_OR_RETURN(bool last, BoolAttr(ctx, "select_last_index", false));

  const AxisGeometry g = GeometryAt(x.shape(), axis);
  std::vector<int64_t> out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) {
      out_shape.push_back(x.dim(static_cast<size_t>(d)));
    } else if (keepdims) {
      out_shape.push_back(1);
    }
  }
  Array out(ElemType::kInt64, out_shape);
  if (g.n == 0 && out.numel() > 0) return ctx.Error("cannot take {} along axis {} of size 0", ctx.node().op_type, axis);
  int64_t* po = out.data<int64_t>();
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), ctx.node().op_type, [&](auto t) {
    using T = decltype(t);
    const T* in = x.data<T>();
    for (int64_t o = 0; o < g.outer; ++o) {
      for (int64_t i = 0; i < g.inner; ++i) {
        const T* base = in + o * g.n * g.inner + i;
        int64_t best = 0;
        for (int64_t j = 1; j < g.n; ++j) {
          if (Replaces(OrderKey(base[j * g.inner]), OrderKey(base[best * g.inner]), is_max, last)) best = j;
        }
        po[o * g.inner + i] = best;
      }
    }
  }));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

Status ArgMaxKernel(OpContext& ctx) { return RunArg(ctx, true); }
Status ArgMinKernel(OpContext& ctx) { return RunArg(ctx, false); }

}  // namespace tessera::onnx
