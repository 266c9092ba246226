// Kernels that grow a tensor by repetition: Expand (broadcast to a shape),
// Tile (repeat along each axis), and ConstantOfShape (fill a new tensor).
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

namespace {

// The 1-D int64 tensor input i (a shape or repeats vector).
StatusOr<std::vector<int64_t>> Int64Vector(const OpContext& ctx, size_t i, const char* what) {
  TESSERA_ASSIGN_OR_RETURN(Array s, ctx.tensor(i));
  if (s.type() != ElemType::kInt64 || s.rank() != 1) {
    return ctx.Error("{} must be a 1-D int64 tensor, got {}{}", what, ElemName(s.type()), s.ShapeString());
  }
  return s.ToInts();
}

}  // namespace

Status ExpandKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Int64Vector(ctx, 1, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("negative dimension {} in shape", d);
  }
  auto out_shape = BroadcastShapes(x.shape(), shape);
  if (!out_shape.ok()) return ctx.Error("{}", out_shape.status().message());
  TESSERA_RETURN_IF_ERROR(CheckShape(ctx, *out_shape).status());
  ctx.set_output(0, GatherFlat(x, *out_shape, BroadcastIndex(x.shape(), *out_shape)));
  return Status::Ok();
}

Status TileKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> reps, Int64Vector(ctx, 1, "repeats"));
  if (reps.size() != x.rank()) return ctx.Error("repeats has {} entries for rank {}", reps.size(), x.rank());
  std::vector<int64_t> shape(x.rank());
  for (size_t i = 0; i < x.rank(); ++i) {
    if (reps[i] < 0) return ctx.Error("negative repeat {}", reps[i]);
    if (x.dim(i) != 0 && reps[i] > (int64_t{1} << 40) / x.dim(i)) return ctx.Error("repeat {} is too large", reps[i]);
    shape[i] = x.dim(i) * reps[i];
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t n, CheckShape(ctx, shape));
  std::vector<int64_t> idx(static_cast<size_t>(n));
  const std::vector<int64_t> strides = Strides(x.shape());
  std::vector<int64_t> pos(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d) src += (pos[d] % x.dim(d)) * strides[d];
    idx[static_cast<size_t>(k)] = src;
    NextIndex(pos, shape);
  }
  ctx.set_output(0, GatherFlat(x, shape, idx));
  return Status::Ok();
}

Status ConstantOfShapeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Int64Vector(ctx, 0, "input"));
  TESSERA_ASSIGN_OR_RETURN(int64_t n, CheckShape(ctx, shape));
  Array value = Array::Scalar<float>(0.0f);
  if (const Array* v = ctx.node().Tensor("value")) {
    if (v->numel() != 1) return ctx.Error("value must hold one element, has shape {}", v->ShapeString());
    value = *v;
  }
  Array out(value.type(), shape);
  for (int64_t k = 0; k < n; ++k) CopyElems(value, 0, out, k, 1);
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace tessera::onnx
