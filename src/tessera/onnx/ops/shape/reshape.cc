// Kernels that only change a tensor's shape (or read it): Reshape, Shape,
// Size, Flatten, Squeeze, Unsqueeze, and Identity (which also passes
// sequences and optionals through).
#include <algorithm>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

Status ReshapeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  std::vector<int64_t> spec;
  if (ctx.opset() >= 5) {
    TESSERA_ASSIGN_OR_RETURN(Array s, ctx.tensor(1));
    if (s.type() != ElemType::kInt64 || s.rank() != 1) {
      return ctx.Error("shape must be a 1-D int64 tensor, got {}{}", ElemName(s.type()), s.ShapeString());
    }
    spec = s.ToInts();
  } else {
    TESSERA_ASSIGN_OR_RETURN(spec, ctx.node().Ints("shape", {}));
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t allowzero, ctx.node().Int("allowzero", 0));
  std::vector<int64_t> shape(spec.size());
  int64_t infer = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    const int64_t d = spec[i];
    if (d == -1) {
      if (infer >= 0) return ctx.Error("shape {} has more than one -1", fmt::join(spec, ","));
      infer = static_cast<int64_t>(i);
      shape[i] = 1;
    } else if (d == 0 && allowzero == 0) {
      if (i >= x.rank()) return ctx.Error("shape entry {} is 0 but the input has rank {}", i, x.rank());
      shape[i] = x.dim(i);
    } else if (d < 0) {
      return ctx.Error("invalid shape entry {}", d);
    } else {
      shape[i] = d;
    }
  }
  if (infer >= 0) {
    TESSERA_ASSIGN_OR_RETURN(int64_t known, CheckShape(ctx, shape));
    if (known == 0 || x.numel() % known != 0) {
      return ctx.Error("cannot reshape {} to [{}]", x.ShapeString(), fmt::join(spec, ","));
    }
    shape[static_cast<size_t>(infer)] = x.numel() / known;
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t n, CheckShape(ctx, shape));
  if (n != x.numel()) return ctx.Error("cannot reshape {} to [{}]", x.ShapeString(), fmt::join(spec, ","));
  ctx.set_output(0, x.Reshaped(shape));
  return Status::Ok();
}

Status ShapeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const int64_t r = static_cast<int64_t>(x.rank());
  TESSERA_ASSIGN_OR_RETURN(int64_t start, ctx.node().Int("start", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t end, ctx.node().Int("end", r));
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x.dim(static_cast<size_t>(i)));
  ctx.set_output(0, Array::Vector(dims));
  return Status::Ok();
}

Status SizeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  ctx.set_output(0, Array::Scalar<int64_t>(x.numel()));
  return Status::Ok();
}

Status FlattenKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const int64_t r = static_cast<int64_t>(x.rank());
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, ctx.node().Int("axis", 1));
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return ctx.Error("axis {} is out of range for rank {}", axis, r);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? outer : inner) *= x.dim(static_cast<size_t>(i));
  ctx.set_output(0, x.Reshaped({outer, inner}));
  return Status::Ok();
}

Status SqueezeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const int64_t r = static_cast<int64_t>(x.rank());
  bool present = false;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntsInputOrAttr(ctx, 1, "axes", 13, &present));
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (present) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(ctx, axes, r));
    for (int64_t a : norm) {
      if (x.dim(static_cast<size_t>(a)) != 1) {
        return ctx.Error("cannot squeeze axis {} of size {} (shape {})", a, x.dim(static_cast<size_t>(a)),
                         x.ShapeString());
      }
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    for (int64_t i = 0; i < r; ++i) drop[static_cast<size_t>(i)] = x.dim(static_cast<size_t>(i)) == 1;
  }
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < r; ++i) {
    if (!drop[static_cast<size_t>(i)]) shape.push_back(x.dim(static_cast<size_t>(i)));
  }
  ctx.set_output(0, x.Reshaped(shape));
  return Status::Ok();
}

Status UnsqueezeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  bool present = false;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntsInputOrAttr(ctx, 1, "axes", 13, &present));
  if (!present) return ctx.Error("axes are required");
  const int64_t out_rank = static_cast<int64_t>(x.rank() + axes.size());
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(ctx, axes, out_rank));
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : norm) inserted[static_cast<size_t>(a)] = true;
  std::vector<int64_t> shape;
  size_t k = 0;
  for (int64_t i = 0; i < out_rank; ++i) shape.push_back(inserted[static_cast<size_t>(i)] ? 1 : x.dim(k++));
  ctx.set_output(0, x.Reshaped(shape));
  return Status::Ok();
}

Status IdentityKernel(OpContext& ctx) {
  if (!ctx.has_input(0)) return ctx.Error("input is missing");
  ctx.set_value(0, ctx.input(0));
  return Status::Ok();
}

}  // namespace tessera::onnx
