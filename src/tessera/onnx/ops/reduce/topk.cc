// TopK: the k largest (or smallest) elements along an axis and their
// indices, in sorted order; equal values keep the lower index first and NaN
// counts as larger than every number. K is an input from opset 10, the
// attribute `k` before.
#include <algorithm>
#include <numeric>
#include <vector>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/reduce/kernels.h"
#include "tessera/onnx/ops/reduce/reduce_util.h"

namespace tessera::onnx {
namespace {

// a before b in the output order: the larger (smaller) first, NaN as the largest.
template <typename K>
bool Before(K a, K b, bool largest) {
  const bool a_nan = IsNaNKey(a), b_nan = IsNaNKey(b);
  if (a_nan || b_nan) return largest ? (a_nan && !b_nan) : (b_nan && !a_nan);
  return largest ? a > b : a < b;
}

}  // namespace

Status TopKKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() == ElemType::kBool || x.type() == ElemType::kString) {
    return ctx.Error("element type {} is not supported", ElemName(x.type()));
  }
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.Error("input must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", -1));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank));
  TESSERA_ASSIGN_OR_RETURN(bool largest, BoolAttr(ctx, "largest", true));
  int64_t k = 0;
  if (ctx.opset() >= 10) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> ks, IntsInput(ctx, 1));
    if (!ctx.has_input(1) || ks.size() != 1) return ctx.Error("input K must hold one integer");
    k = ks[0];
  } else {
    TESSERA_ASSIGN_OR_RETURN(k, ctx.node().Int("k", -1));
  }
  const AxisGeometry g = GeometryAt(x.shape(), axis);
  if (k < 0 || k > g.n) return ctx.Error("K = {} is out of range for axis {} of size {}", k, axis, g.n);

  std::vector<int64_t> out_shape = x.shape();
  out_shape[static_cast<size_t>(axis)] = k;
  Array values(x.type(), out_shape);
  Array indices(ElemType::kInt64, out_shape);
  int64_t* pi = indices.data<int64_t>();
  std::vector<int64_t> order(static_cast<size_t>(g.n));
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), "TopK", [&](auto t) {
    using T = decltype(t);
    const T* in = x.data<T>();
    T* pv = values.data<T>();
    for (int64_t o = 0; o < g.outer; ++o) {
      for (int64_t i = 0; i < g.inner; ++i) {
        const T* src = in + o * g.n * g.inner + i;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
          const auto ka = OrderKey(src[a * g.inner]), kb = OrderKey(src[b * g.inner]);
          if (Before(ka, kb, largest)) return true;
          if (Before(kb, ka, largest)) return false;
          return a < b;
        });
        const int64_t dst = o * k * g.inner + i;
        for (int64_t j = 0; j < k; ++j) {
          pv[dst + j * g.inner] = src[order[static_cast<size_t>(j)] * g.inner];
          pi[dst + j * g.inner] = order[static_cast<size_t>(j)];
        }
      }
    }
  }));
  ctx.set_output(0, std::move(values));
  if (ctx.num_outputs() > 1) ctx.set_output(1, std::move(indices));
  return Status::Ok();
}

}  // namespace tessera::onnx
