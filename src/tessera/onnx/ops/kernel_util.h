// Helpers shared by the ONNX kernels: axis handling, scalar inputs, and
// element-wise loops over broadcast operands.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx {

// Maps a possibly negative axis into [0, rank); errors naming the node.
StatusOr<int64_t> NormalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank);

// The integer contents of input i (int32 / int64 tensor), or `dflt` when absent.
StatusOr<std::vector<int64_t>> IntsInput(const OpContext& ctx, size_t i, const std::vector<int64_t>& dflt = {});

// Input i as one number (a scalar or 1-element tensor of any numeric type).
StatusOr<double> ScalarInput(const OpContext& ctx, size_t i);

// out[k] = f(a[ia[k]], b[ib[k]]) over the broadcast shape of a and b.
// TA/TB/TO are the element types' C++ types.
template <typename TA, typename TB, typename TO, typename F>
StatusOr<Array> BroadcastBinary(const OpContext& ctx, const Array& a, const Array& b, F&& f) {
  auto shape = BroadcastShapes(a.shape(), b.shape());
  if (!shape.ok()) return ctx.Error("{}", shape.status().message());
  Array out(ElemOf<TO>::value, *shape);
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* po = out.data<TO>();
  const int64_t n = out.numel();
  if (a.shape() == *shape && b.shape() == *shape) {
    for (int64_t k = 0; k < n; ++k) po[k] = f(pa[k], pb[k]);
  } else if (b.numel() == 1 && a.shape() == *shape) {
    for (int64_t k = 0; k < n; ++k) po[k] = f(pa[k], pb[0]);
  } else {
    const std::vector<int64_t> ia = BroadcastIndex(a.shape(), *shape), ib = BroadcastIndex(b.shape(), *shape);
    for (int64_t k = 0; k < n; ++k) po[k] = f(pa[ia[k]], pb[ib[k]]);
  }
  return out;
}

}  // namespace tessera::onnx
