// Selection by value or position: OneHot, NonZero, Compress, and Trilu.
#include <cmath>

#include "tessera/onnx/ops/index/index_kernels.h"
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

Status OneHotKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array ind, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(double depth_d, ScalarInput(ctx, 1));
  TESSERA_ASSIGN_OR_RETURN(Array values, ctx.tensor(2));
  if (ind.type() == ElemType::kString) return ctx.Error("indices must be numeric");
  if (values.numel() != 2) return ctx.Error("values must hold [off, on], has shape {}", values.ShapeString());
  if (!(depth_d >= 1 && depth_d <= static_cast<double>(int64_t{1} << 40)))
    return ctx.Error("invalid depth {}", depth_d);
  const int64_t depth = static_cast<int64_t>(depth_d);
  const int64_t r = static_cast<int64_t>(ind.rank());
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, ctx.node().Int("axis", -1));
  if (axis < 0) axis += r + 1;
  if (axis < 0 || axis > r) return ctx.Error("axis is out of range for output rank {}", r + 1);
  std::vector<int64_t> shape = ind.shape();
  shape.insert(shape.begin() + axis, depth);
  TESSERA_ASSIGN_OR_RETURN(int64_t n, CheckShape(ctx, shape));
  Array out(values.type(), shape);
  for (int64_t k = 0; k < n; ++k) CopyElems(values, 0, out, k, 1);
  int64_t inner = 1;
  for (int64_t d = axis; d < r; ++d) inner *= ind.dim(static_cast<size_t>(d));
  for (int64_t k = 0; k < ind.numel(); ++k) {
    const double v = ind.GetDouble(k);
    if (!std::isfinite(v) || v < -depth_d || v >= depth_d) continue;
    int64_t i = static_cast<int64_t>(v);
    if (i < 0) i += depth;
    if (i < 0 || i >= depth) continue;
    const int64_t outer = k / inner, in = k % inner;
    CopyElems(values, 1, out, (outer * depth + i) * inner + in, 1);
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

Status NonZeroKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() == ElemType::kString) return ctx.Error("input must be numeric");
  std::vector<int64_t> shape = x.shape();
  if (shape.empty()) shape = {1};  // a scalar reads as a 1-element vector (as numpy)
  std::vector<int64_t> hits;
  for (int64_t k = 0; k < x.numel(); ++k) {
    if (x.GetDouble(k) != 0) hits.push_back(k);
  }
  const int64_t r = static_cast<int64_t>(shape.size()), m = static_cast<int64_t>(hits.size());
  Array out(ElemType::kInt64, {r, m});
  int64_t* o = out.data<int64_t>();
  const std::vector<int64_t> strides = Strides(shape);
  for (int64_t j = 0; j < m; ++j) {
    for (int64_t d = 0; d < r; ++d) {
      o[d * m + j] = hits[static_cast<size_t>(j)] / strides[static_cast<size_t>(d)] % shape[static_cast<size_t>(d)];
    }
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

Status CompressKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array cond, ctx.tensor(1));
  if (cond.rank() != 1 || cond.type() == ElemType::kString) {
    return ctx.Error("condition must be a 1-D bool tensor, got {}{}", ElemName(cond.type()), cond.ShapeString());
  }
  if (!ctx.node().Has("axis")) x = x.Reshaped({x.numel()});
  if (x.rank() == 0) return ctx.Error("input must have rank >= 1 when axis is given");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis64, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(x.rank())));
  const size_t axis = static_cast<size_t>(axis64);
  const int64_t dim = x.dim(axis);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (cond.GetDouble(i) == 0) continue;
    if (i >= dim) return ctx.Error("condition selects index {} beyond axis size {}", i, dim);
    keep.push_back(i);
  }
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    if (d > axis) inner *= x.dim(d);
  }
  std::vector<int64_t> shape = x.shape();
  shape[axis] = static_cast<int64_t>(keep.size());
  Array out(x.type(), shape);
  const int64_t m = static_cast<int64_t>(keep.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < m; ++j) {
      CopyElems(x, (o * dim + keep[static_cast<size_t>(j)]) * inner, out, (o * m + j) * inner, inner);
    }
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

Status TriluKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.rank() < 2) return ctx.Error("input must have rank >= 2, got {}", x.ShapeString());
  int64_t k = 0;
  if (ctx.has_input(1)) {
    TESSERA_ASSIGN_OR_RETURN(Array ka, ctx.tensor(1));
    if (ka.numel() != 1 || !IsIntegerType(ka.type())) return ctx.Error("k must be one integer");
    k = ka.GetInt(0);
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t upper, ctx.node().Int("upper", 1));
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  Array out(x.type(), x.shape());  // zeros
  const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        // Keep j - i >= k (upper) or j - i <= k (lower); j - i is small, so no overflow.
        const bool keep = upper != 0 ? j - i >= k : j - i <= k;
        if (keep) {
          const int64_t at = (m * rows + i) * cols + j;
          CopyElems(x, at, out, at, 1);
        }
      }
    }
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace tessera::onnx
