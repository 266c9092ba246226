// Slice: strided sub-tensors (Slice-1 reads starts / ends / axes attributes,
// Slice-10+ reads them, and steps, from inputs).
#include <algorithm>
#include <limits>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

Status SliceKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const int64_t r = static_cast<int64_t>(x.rank());
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false;
  if (ctx.opset() >= 10) {
    TESSERA_ASSIGN_OR_RETURN(starts, IntsInput(ctx, 1));
    TESSERA_ASSIGN_OR_RETURN(ends, IntsInput(ctx, 2));
    has_axes = ctx.has_input(3);
    TESSERA_ASSIGN_OR_RETURN(axes, IntsInput(ctx, 3));
    TESSERA_ASSIGN_OR_RETURN(steps, IntsInput(ctx, 4));
  } else {
    TESSERA_ASSIGN_OR_RETURN(starts, ctx.node().Ints("starts", {}));
    TESSERA_ASSIGN_OR_RETURN(ends, ctx.node().Ints("ends", {}));
    has_axes = ctx.node().Has("axes");
    TESSERA_ASSIGN_OR_RETURN(axes, ctx.node().Ints("axes", {}));
  }
  if (starts.size() != ends.size()) return ctx.Error("starts has {} entries, ends {}", starts.size(), ends.size());
  if (!has_axes) {
    axes.clear();
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.Error("starts, ends, axes and steps must have equal lengths ({}, {}, {}, {})", starts.size(),
                     ends.size(), axes.size(), steps.size());
  }
  TESSERA_ASSIGN_OR_RETURN(axes, NormalizeAxes(ctx, axes, r));
  // Per axis: first index, step, count.
  std::vector<int64_t> first(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1), shape = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const int64_t dim = x.dim(a);
    int64_t s = steps[i];
    if (s == 0) return ctx.Error("step 0 on axis {}", a);
    if (s == std::numeric_limits<int64_t>::min()) s = -std::numeric_limits<int64_t>::max();
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    int64_t count = 0;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > b ? (e - b - 1) / s + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, std::max<int64_t>(dim - 1, 0));
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = (b > e && dim > 0) ? (b - e - 1) / (-s) + 1 : 0;
    }
    first[a] = b;
    step[a] = s;
    shape[a] = count;
  }
  const int64_t n = Numel(shape);
  const std::vector<int64_t> strides = Strides(x.shape());
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> pos(static_cast<size_t>(r), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < static_cast<size_t>(r); ++d) src += (first[d] + pos[d] * step[d]) * strides[d];
    idx[static_cast<size_t>(k)] = src;
    NextIndex(pos, shape);
  }
  ctx.set_output(0, GatherFlat(x, shape, idx));
  return Status::Ok();
}

}  // namespace tessera::onnx
