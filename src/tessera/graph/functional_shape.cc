// Differentiable concat/split, views, copies and casts.
#include <numeric>

#include "tessera/graph/functional.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/base/error.h"
#include "tessera/graph/apply.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/concat/concat.h"

namespace tessera::graph {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

using Ins = std::vector<Tensor>;

Tensor Concat(const std::vector<Tensor>& xs, int axis) {
  std::vector<int64_t> sizes;
  sizes.reserve(xs.size());
  for (const Tensor& x : xs) sizes.push_back(x.size(axis));
  return Apply1(
      {"Concat", OpKind::kInjective, fmt::format("axis={}", axis), kSaveNone}, xs,
      [axis](const Ins& in) { return Ins{ops::Concat(in, axis)}; },
      [sizes, axis](const Grads& g, const Ins&, const Ins&, const Needs&) { return ops::Split(g[0], sizes, axis); });
}

std::vector<Tensor> Split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  return Apply(
      {"Split", OpKind::kInjective, fmt::format("sizes=[{}] axis={}", fmt::join(sizes, ","), axis), kSaveNone}, {x},
      [sizes, axis](const Ins& in) { return ops::Split(in[0], sizes, axis); },
      [axis](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{ops::Concat(g, axis)}; });
}

Tensor Reshape(const Tensor& x, const Shape& shape) {
  Shape in_shape = x.shape();
  return Apply1(
      {"Reshape", OpKind::kInjective, fmt::format("shape={}", ShapeString(shape)), kSaveNone}, {x},
      [shape](const Ins& in) { return Ins{in[0].Reshape(shape)}; },
      [in_shape](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{g[0].Reshape(in_shape)}; });
}

Tensor View(const Tensor& x, const Shape& shape) {
  TESSERA_OP_CHECK(x.is_contiguous(), "View: tensor of shape {} is not contiguous; use Reshape",
                   ShapeString(x.shape()));
  Shape in_shape = x.shape();
  return Apply1(
      {"View", OpKind::kInjective, fmt::format("shape={}", ShapeString(shape)), kSaveNone}, {x},
      [shape](const Ins& in) { return Ins{in[0].View(shape)}; },
      [in_shape](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{g[0].Reshape(in_shape)}; });
}

Tensor Transpose(const Tensor& x, int a, int b) {
  return Apply1(
      {"Transpose", OpKind::kInjective, fmt::format("a={} b={}", a, b), kSaveNone}, {x},
      [a, b](const Ins& in) { return Ins{in[0].Transpose(a, b)}; },
      [a, b](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{g[0].Transpose(a, b)}; });
}

Tensor Permute(const Tensor& x, const std::vector<int>& order) {
  std::vector<int> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[NormalizeAxis(order[i], x.dim())] = static_cast<int>(i);
  return Apply1(
      {"Permute", OpKind::kInjective, fmt::format("order=[{}]", fmt::join(order, ",")), kSaveNone}, {x},
      [order](const Ins& in) { return Ins{in[0].Permute(order)}; },
      [inverse](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{g[0].Permute(inverse)}; });
}

Tensor Slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step) {
  Shape in_shape = x.shape();
  return Apply1(
      {"Slice", OpKind::kInjective, fmt::format("axis={} start={} end={} step={}", axis, start, end, step), kSaveNone},
      {x}, [axis, start, end, step](const Ins& in) { return Ins{in[0].Slice(axis, start, end, step)}; },
      [in_shape, axis, start, end, step](const Grads& g, const Ins&, const Ins&, const Needs&) {
        Tensor full = Tensor::Zeros(in_shape, g[0].dtype());
        Tensor window = full.Slice(axis, start, end, step);
        window.CopyFrom(g[0]);
        return Grads{full};
      });
}

Tensor Contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return Apply1(
      {"Contiguous", OpKind::kInjective, "", kSaveNone}, {x}, [](const Ins& in) { return Ins{in[0].Clone()}; },
      [](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{g[0]}; });
}

Tensor Cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  TESSERA_OP_CHECK(IsFloating(x.dtype()) && IsFloating(dtype),
                   "Cast: only floating casts are differentiable ({} -> {})", DTypeName(x.dtype()), DTypeName(dtype));
  DType in_dtype = x.dtype();
  return Apply1(
      {"Cast", OpKind::kElementwise, fmt::format("to={}", DTypeName(dtype)), kSaveNone}, {x},
      [dtype](const Ins& in) { return Ins{in[0].To(dtype)}; },
      [in_dtype](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{g[0].To(in_dtype)}; });
}

Tensor Detach(const Tensor& x) {
  return Apply1(
      {"Detach", OpKind::kInjective, "", kSaveNone}, {x}, [](const Ins& in) { return Ins{AliasOf(in[0])}; }, nullptr);
}

}  // namespace tessera::graph
