// Differentiable concat/split, views, copies and casts.
#include <numeric>

#include "tessera/graph/functional.h"
#include "tessera/base/error.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/concat/concat.h"

namespace tessera::graph {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Tensor Concat(const std::vector<Tensor>& xs, int axis) {
  Tensor out = ops::Concat(xs, axis);
  if (ShouldRecord(xs)) {
    std::vector<int64_t> sizes;
    sizes.reserve(xs.size());
    for (const Tensor& x : xs) sizes.push_back(x.size(axis));
    Record("Concat", xs, {out}, [sizes, axis](const Grads& g, const Needs&) { return ops::Split(g[0], sizes, axis); });
  }
  return out;
}

std::vector<Tensor> Split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  std::vector<Tensor> outs = ops::Split(x, sizes, axis);
  if (ShouldRecord({x})) {
    Record("Split", {x}, outs, [axis](const Grads& g, const Needs&) { return Grads{ops::Concat(g, axis)}; });
  }
  return outs;
}

Tensor Reshape(const Tensor& x, const Shape& shape) {
  Tensor out = x.Reshape(shape);
  if (ShouldRecord({x})) {
    Shape in_shape = x.shape();
    Record("Reshape", {x}, {out}, [in_shape](const Grads& g, const Needs&) { return Grads{g[0].Reshape(in_shape)}; });
  }
  return out;
}

Tensor View(const Tensor& x, const Shape& shape) {
  TESSERA_OP_CHECK(x.is_contiguous(), "View: tensor of shape {} is not contiguous; use Reshape",
                   ShapeString(x.shape()));
  Tensor out = x.View(shape);
  if (ShouldRecord({x})) {
    Shape in_shape = x.shape();
    Record("View", {x}, {out}, [in_shape](const Grads& g, const Needs&) { return Grads{g[0].Reshape(in_shape)}; });
  }
  return out;
}

Tensor Transpose(const Tensor& x, int a, int b) {
  Tensor out = x.Transpose(a, b);
  if (ShouldRecord({x})) {
    Record("Transpose", {x}, {out}, [a, b](const Grads& g, const Needs&) { return Grads{g[0].Transpose(a, b)}; });
  }
  return out;
}

Tensor Permute(const Tensor& x, const std::vector<int>& order) {
  Tensor out = x.Permute(order);
  if (ShouldRecord({x})) {
    std::vector<int> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) inverse[NormalizeAxis(order[i], x.dim())] = static_cast<int>(i);
    Record("Permute", {x}, {out},
           [inverse](const Grads& g, const Needs&) { return Grads{g[0].Permute(inverse)}; });
  }
  return out;
}

Tensor Slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step) {
  Tensor out = x.Slice(axis, start, end, step);
  if (ShouldRecord({x})) {
    Shape in_shape = x.shape();
    Record("Slice", {x}, {out}, [in_shape, axis, start, end, step](const Grads& g, const Needs&) {
      Tensor full = Tensor::Zeros(in_shape, g[0].dtype());
      Tensor window = full.Slice(axis, start, end, step);
      window.CopyFrom(g[0]);
      return Grads{full};
    });
  }
  return out;
}

Tensor Contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = x.Clone();
  if (ShouldRecord({x})) {
    Record("Contiguous", {x}, {out}, [](const Grads& g, const Needs&) { return Grads{g[0]}; });
  }
  return out;
}

Tensor Cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  TESSERA_OP_CHECK(IsFloating(x.dtype()) && IsFloating(dtype), "Cast: only floating casts are differentiable ({} -> {})",
                   DTypeName(x.dtype()), DTypeName(dtype));
  Tensor out = x.To(dtype);
  if (ShouldRecord({x})) {
    DType in_dtype = x.dtype();
    Record("Cast", {x}, {out}, [in_dtype](const Grads& g, const Needs&) { return Grads{g[0].To(in_dtype)}; });
  }
  return out;
}

Tensor Detach(const Tensor& x) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->shape = x.shape();
  impl->strides = x.strides();
  impl->offset = x.offset();
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

}  // namespace tessera::graph
