// Reduction planning and single-axis geometry for the reduce family.
#include "tessera/onnx/ops/reduce/reduce_util.h"

#include <algorithm>

#include "tessera/onnx/ops/kernel_util.h"

namespace tessera::onnx {

StatusOr<ReducePlan> MakeReducePlan(const OpContext& ctx, const Array& x, bool axes_from_input) {
  std::vector<int64_t> axes;
  if (axes_from_input) {
    TESSERA_ASSIGN_OR_RETURN(axes, IntsInput(ctx, 1));
  } else {
    TESSERA_ASSIGN_OR_RETURN(axes, ctx.node().Ints("axes", {}));
  }
  TESSERA_ASSIGN_OR_RETURN(bool keepdims, BoolAttr(ctx, "keepdims", true));
  TESSERA_ASSIGN_OR_RETURN(bool noop_with_empty_axes, BoolAttr(ctx, "noop_with_empty_axes", false));

  const int64_t rank = static_cast<int64_t>(x.rank());
  ReducePlan plan;
  if (axes.empty() && noop_with_empty_axes) {
    plan.noop = true;
    plan.out_shape = x.shape();
    plan.out_numel = x.numel();
    return plan;
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return ctx.Error("axis {} is out of range for rank {}", a, rank);
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }

  // Output strides per input dimension (0 along reduced ones).
  std::vector<int64_t> kept_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[static_cast<size_t>(d)]) {
      plan.group *= x.dim(static_cast<size_t>(d));
      if (keepdims) plan.out_shape.push_back(1);
    } else {
      kept_shape.push_back(x.dim(static_cast<size_t>(d)));
      plan.out_shape.push_back(x.dim(static_cast<size_t>(d)));
    }
  }
  plan.out_numel = Numel(kept_shape);
  const std::vector<int64_t> kept_strides = Strides(kept_shape);
  std::vector<int64_t> stride(static_cast<size_t>(rank), 0);
  for (int64_t d = 0, k = 0; d < rank; ++d) {
    if (!reduced[static_cast<size_t>(d)]) stride[static_cast<size_t>(d)] = kept_strides[static_cast<size_t>(k++)];
  }

  // Walk the input in row-major order with a multi-index counter.
  const int64_t n = x.numel();
  plan.out_index.resize(static_cast<size_t>(n));
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t out = 0;
  for (int64_t i = 0; i < n; ++i) {
    plan.out_index[static_cast<size_t>(i)] = out;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const size_t ud = static_cast<size_t>(d);
      out += stride[ud];
      if (++idx[ud] < x.dim(ud)) break;
      out -= stride[ud] * idx[ud];
      idx[ud] = 0;
    }
  }
  return plan;
}

AxisGeometry GeometryAt(const std::vector<int64_t>& shape, int64_t axis) {
  AxisGeometry g;
  if (shape.empty()) return g;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t sd = static_cast<int64_t>(d);
    if (sd < axis) {
      g.outer *= shape[d];
    } else if (sd == axis) {
      g.n = shape[d];
    } else {
      g.inner *= shape[d];
    }
  }
  return g;
}

StatusOr<bool> BoolAttr(const OpContext& ctx, const std::string& name, bool dflt) {
  TESSERA_ASSIGN_OR_RETURN(int64_t v, ctx.node().Int(name, dflt ? 1 : 0));
  return v != 0;
}

}  // namespace tessera::onnx
