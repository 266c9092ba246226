// Lowerings of shape and indexing operators onto graph:: functions
// (onnx/lower/lower.h). Shapes, axes and slice bounds come from constant
// inputs or attributes; Gather's indices may be computed.
#include <algorithm>
#include <numeric>

#include "tessera/graph/functional.h"
#include "tessera/onnx/lower/lower.h"

namespace tessera::onnx::lower {
namespace {

int64_t Product(const Shape& s, size_t begin, size_t end) {
  return std::accumulate(s.begin() + begin, s.begin() + end, int64_t{1}, std::multiplies<>());
}

// Reshape: 0 copies the input's dimension (unless allowzero), one -1 is inferred.
Status ReshapeLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ints(1));
  TESSERA_ASSIGN_OR_RETURN(int64_t allowzero, ctx.node().Int("allowzero", 0));
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && allowzero == 0) {
      if (i >= static_cast<size_t>(x.dim()))
        return ctx.Error("shape entry {} is 0 but the input has rank {}", i, x.dim());
      shape[i] = x.size(static_cast<int>(i));
    }
    if (shape[i] == -1) {
      if (infer >= 0) return ctx.Error("shape {} has more than one -1", ShapeString(shape));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return ctx.Error("shape {} has a negative entry", ShapeString(shape));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      return ctx.Error("cannot infer the -1 of shape {} for {} elements", ShapeString(shape), x.numel());
    }
    shape[static_cast<size_t>(infer)] = x.numel() / known;
  }
  if (Product(shape, 0, shape.size()) != x.numel()) {
    return ctx.Error("cannot reshape {} to {}", ShapeString(x.shape()), ShapeString(shape));
  }
  ctx.set_output(0, graph::Reshape(x, shape));
  return Status::Ok();
}

Status FlattenLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 1));
  const int rank = x.dim();
  int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (axis < 0 || axis > rank) return ctx.Error("axis {} is out of range for rank {}", axis_attr, rank);
  const Shape& s = x.shape();
  ctx.set_output(0, graph::Reshape(x, {Product(s, 0, static_cast<size_t>(axis)),
                                       Product(s, static_cast<size_t>(axis), s.size())}));
  return Status::Ok();
}

// Squeeze (no axes: every dimension of size 1) and Unsqueeze; axes an input from opset 13.
Status SqueezeLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.ints_attr_or_input("axes", 1, 13, {}));
  std::vector<bool> drop(static_cast<size_t>(x.dim()), false);
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int d, Axis(ctx, a, x.dim()));
    if (x.size(d) != 1) return ctx.Error("cannot squeeze axis {} of size {}", a, x.size(d));
    drop[static_cast<size_t>(d)] = true;
  }
  Shape s;
  for (int d = 0; d < x.dim(); ++d) {
    if (!(axes.empty() ? x.size(d) == 1 : drop[static_cast<size_t>(d)])) s.push_back(x.size(d));
  }
  ctx.set_output(0, graph::Reshape(x, s));
  return Status::Ok();
}

Status UnsqueezeLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.ints_attr_or_input("axes", 1, 13, {}));
  const int out_rank = x.dim() + static_cast<int>(axes.size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int d, Axis(ctx, a, out_rank));
    if (inserted[static_cast<size_t>(d)]) return ctx.Error("axis {} appears twice", a);
    inserted[static_cast<size_t>(d)] = true;
  }
  Shape s;
  int next = 0;
  for (int d = 0; d < out_rank; ++d) s.push_back(inserted[static_cast<size_t>(d)] ? 1 : x.size(next++));
  ctx.set_output(0, graph::Reshape(x, s));
  return Status::Ok();
}

Status TransposeLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.tensor(0));
  std::vector<int64_t> dflt(static_cast<size_t>(x.dim()));
  std::iota(dflt.rbegin(), dflt.rend(), 0);
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.node().Ints("perm", dflt));
  if (perm.size() != static_cast<size_t>(x.dim())) {
    return ctx.Error("perm has {} entries for an input of rank {}", perm.size(), x.dim());
  }
  std::vector<int> order;
  for (int64_t p : perm) {
    TESSERA_ASSIGN_OR_RETURN(int d, Axis(ctx, p, x.dim()));
    order.push_back(d);
  }
  ctx.set_output(0, graph::Permute(x, order));
  return Status::Ok();
}

Status ConcatLowering(LowerContext& ctx) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < ctx.node().inputs.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(i));
    xs.push_back(x);
  }
  if (xs.empty()) return ctx.Error("Concat needs at least one input");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int axis, Axis(ctx, axis_attr, xs[0].dim()));
  ctx.set_output(0, graph::Concat(xs, axis));
  return Status::Ok();
}

// Split: sizes from `split` (attribute before opset 13, input from 13), else
// equal parts, one per output (num_outputs from opset 18).
Status SplitLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int axis, Axis(ctx, axis_attr, x.dim()));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ctx.ints_attr_or_input("split", 1, 13, {}));
  const int64_t parts = static_cast<int64_t>(ctx.num_outputs()), len = x.size(axis);
  if (sizes.empty()) {
    if (parts == 0) return ctx.Error("Split has no outputs");
    const int64_t each = (len + parts - 1) / parts;  // the last part may be smaller (opset 18)
    for (int64_t begin = 0; begin < len || static_cast<int64_t>(sizes.size()) < parts; begin += each) {
      sizes.push_back(std::max<int64_t>(0, std::min(each, len - begin)));
    }
  }
  if (static_cast<int64_t>(sizes.size()) != parts) {
    return ctx.Error("split gives {} parts for {} outputs", sizes.size(), parts);
  }
  std::vector<Tensor> ys = graph::Split(x, sizes, axis);
  for (size_t i = 0; i < ys.size(); ++i) ctx.set_output(i, ys[i]);
  return Status::Ok();
}

// Slice: starts / ends / axes / steps as attributes (opset < 10) or constant
// inputs; bounds clamped as ONNX says. Positive steps only.
Status SliceLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    TESSERA_ASSIGN_OR_RETURN(starts, ctx.node().Ints("starts", {}));
    TESSERA_ASSIGN_OR_RETURN(ends, ctx.node().Ints("ends", {}));
    TESSERA_ASSIGN_OR_RETURN(axes, ctx.node().Ints("axes", {}));
  } else {
    TESSERA_ASSIGN_OR_RETURN(starts, ctx.ints(1));
    TESSERA_ASSIGN_OR_RETURN(ends, ctx.ints(2));
    if (ctx.has_input(3)) {
      TESSERA_ASSIGN_OR_RETURN(axes, ctx.ints(3));
    }
    if (ctx.has_input(4)) {
      TESSERA_ASSIGN_OR_RETURN(steps, ctx.ints(4));
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.Error("starts, ends, axes and steps differ in length");
  }
  Tensor y = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(int axis, Axis(ctx, axes[i], x.dim()));
    if (steps[i] <= 0)
      return ctx.Error("step {} on axis {}: only positive steps are differentiable here", steps[i], axis);
    const int64_t len = x.size(axis);
    auto clamp = [len](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
    const int64_t begin = clamp(starts[i]), end = std::max(begin, clamp(ends[i]));
    y = graph::Slice(y, axis, begin, end, steps[i]);
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Gather along `axis` with indices of any shape: the axis moved to the
// front, the rest flattened, one Embedding lookup, then the result's axes
// put where ONNX has them (data[:axis] + indices + data[axis+1:]).
Status GatherLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Tensor idx, ctx.tensor(1));
  if (IsFloating(idx.dtype())) return ctx.Error("indices must be int32 or int64, got {}", DTypeName(idx.dtype()));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  const int rank = x.dim();
  if (rank == 0) return ctx.Error("data must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int axis, Axis(ctx, axis_attr, rank));
  if (StatusOr<std::vector<int64_t>> fixed = ctx.ints(1); fixed.ok()) {
    // Constant indices: ONNX's negative ones count from the end.
    std::vector<int64_t> v = *fixed;
    for (int64_t& i : v) i += i < 0 ? x.size(axis) : 0;
    idx = Tensor::FromInts(v, idx.shape());
  }
  const Shape& s = x.shape();
  std::vector<int> to_front{axis};
  Shape rest;
  for (int d = 0; d < rank; ++d) {
    if (d != axis) {
      to_front.push_back(d);
      rest.push_back(s[static_cast<size_t>(d)]);
    }
  }
  const Tensor table = graph::Reshape(axis == 0 ? x : graph::Permute(x, to_front),
                                      {s[static_cast<size_t>(axis)], Product(rest, 0, rest.size())});
  Shape out = idx.shape();  // indices' axes, then the other data axes
  out.insert(out.end(), rest.begin(), rest.end());
  Tensor y = graph::Reshape(graph::Embedding(table, idx), out);
  if (axis > 0) {  // move data's leading axes back in front of the indices' axes
    const int q = idx.dim();
    std::vector<int> order;
    for (int d = 0; d < axis; ++d) order.push_back(q + d);
    for (int d = 0; d < q; ++d) order.push_back(d);
    for (int d = q + axis; d < static_cast<int>(out.size()); ++d) order.push_back(d);
    y = graph::Permute(y, order);
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Expand: x broadcast (numpy rules, both ways) to a constant shape, as
// x + zeros(shape), whose backward sums the gradient back to x's shape.
Status ExpandLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ints(1));
  const int64_t xd = x.dim(), sd = static_cast<int64_t>(shape.size()), rank = std::max(xd, sd);
  Shape out(static_cast<size_t>(rank), 1);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t a = i >= rank - xd ? x.size(static_cast<int>(i - (rank - xd))) : 1;
    const int64_t b = i >= rank - sd ? shape[static_cast<size_t>(i - (rank - sd))] : 1;
    if (a != b && a != 1 && b != 1) {
      return ctx.Error("cannot expand {} to {}", ShapeString(x.shape()), ShapeString(shape));
    }
    out[static_cast<size_t>(i)] = a == 1 ? b : a;
  }
  ctx.set_output(0, out == x.shape() ? x : graph::Add(x, Tensor::Zeros(out)));
  return Status::Ok();
}

Status CastLowering(LowerContext& ctx) {  // only float -> float (what a float graph holds)
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(int64_t to, ctx.node().Int("to", 0));
  if (to != static_cast<int64_t>(ElemType::kFloat)) {
    return ctx.Error("Cast to {} is not differentiable here (float32 only)", ElemName(static_cast<ElemType>(to)));
  }
  ctx.set_output(0, x);
  return Status::Ok();
}

}  // namespace

void AddShapeLowerings(LoweringTable& t) {
  t["Reshape"] = ReshapeLowering;
  t["Flatten"] = FlattenLowering;
  t["Squeeze"] = SqueezeLowering;
  t["Unsqueeze"] = UnsqueezeLowering;
  t["Transpose"] = TransposeLowering;
  t["Concat"] = ConcatLowering;
  t["Split"] = SplitLowering;
  t["Slice"] = SliceLowering;
  t["Gather"] = GatherLowering;
  t["Cast"] = CastLowering;
  t["Expand"] = ExpandLowering;
}

}  // namespace tessera::onnx::lower
