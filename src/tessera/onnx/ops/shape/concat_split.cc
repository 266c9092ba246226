// Joining and splitting along an axis: Concat and Split.
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

namespace {

// Product of dims [from, to).
int64_t DimProduct(const std::vector<int64_t>& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= shape[i];
  return p;
}

}  // namespace

Status ConcatKernel(OpContext& ctx) {
  std::vector<Array> xs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
    xs.push_back(a);
  }
  if (xs.empty()) return ctx.Error("needs at least one input");
  if (!ctx.node().Has("axis")) return ctx.Error("attribute 'axis' is required");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  const size_t r = xs[0].rank();
  if (r == 0) return ctx.Error("inputs must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis64, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(r)));
  const size_t axis = static_cast<size_t>(axis64);
  std::vector<int64_t> shape = xs[0].shape();
  shape[axis] = 0;
  for (const Array& a : xs) {
    if (a.type() != xs[0].type()) return ctx.Error("inputs mix {} and {}", ElemName(xs[0].type()), ElemName(a.type()));
    if (a.rank() != r) return ctx.Error("inputs mix shapes {} and {}", xs[0].ShapeString(), a.ShapeString());
    for (size_t d = 0; d < r; ++d) {
      if (d != axis && a.dim(d) != xs[0].dim(d)) {
        return ctx.Error("inputs mix shapes {} and {} (axis {})", xs[0].ShapeString(), a.ShapeString(), axis);
      }
    }
    shape[axis] += a.dim(axis);
  }
  TESSERA_RETURN_IF_ERROR(CheckShape(ctx, shape).status());
  Array out(xs[0].type(), shape);
  const int64_t outer = DimProduct(shape, 0, axis);
  const int64_t out_chunk = DimProduct(shape, axis, r);
  int64_t offset = 0;
  for (const Array& a : xs) {
    const int64_t chunk = DimProduct(a.shape(), axis, r);
    for (int64_t o = 0; o < outer; ++o) CopyElems(a, o * chunk, out, o * out_chunk + offset, chunk);
    offset += chunk;
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

Status SplitKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const size_t r = x.rank();
  if (r == 0) return ctx.Error("input must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis64, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(r)));
  const size_t axis = static_cast<size_t>(axis64);
  const int64_t dim = x.dim(axis);
  bool present = false;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> split, IntsInputOrAttr(ctx, 1, "split", 13, &present));
  const size_t nout = ctx.num_outputs();
  if (nout == 0) return ctx.Error("has no outputs");
  if (present) {
    if (split.size() != nout) return ctx.Error("split has {} entries for {} outputs", split.size(), nout);
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0 || s > dim) return ctx.Error("invalid split size {}", s);
      sum += s;
    }
    if (sum != dim) return ctx.Error("split sizes sum to {}, axis {} has size {}", sum, axis, dim);
  } else {
    TESSERA_ASSIGN_OR_RETURN(int64_t num, ctx.node().Int("num_outputs", static_cast<int64_t>(nout)));
    if (num != static_cast<int64_t>(nout)) return ctx.Error("num_outputs {} but the node has {} outputs", num, nout);
    const int64_t n = static_cast<int64_t>(nout);
    if (dim % n != 0 && !ctx.node().Has("num_outputs")) {
      return ctx.Error("axis {} of size {} does not split evenly into {} parts", axis, dim, n);
    }
    const int64_t part = (dim + n - 1) / n;  // opset 18: the last part may be smaller
    int64_t left = dim;
    for (int64_t i = 0; i < n; ++i) {
      split.push_back(std::min(part, left));
      left -= split.back();
    }
  }
  const int64_t outer = DimProduct(x.shape(), 0, axis);
  const int64_t inner = DimProduct(x.shape(), axis + 1, r);
  int64_t offset = 0;
  for (size_t i = 0; i < nout; ++i) {
    std::vector<int64_t> shape = x.shape();
    shape[axis] = split[i];
    Array out(x.type(), shape);
    const int64_t chunk = split[i] * inner;
    for (int64_t o = 0; o < outer; ++o) CopyElems(x, o * dim * inner + offset, out, o * chunk, chunk);
    offset += chunk;
    ctx.set_output(i, out);
  }
  return Status::Ok();
}

}  // namespace tessera::onnx
