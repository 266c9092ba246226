// Axis permutations: Transpose, and DepthToSpace / SpaceToDepth (a reshape,
// a transpose and a reshape).
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

Array TransposeArray(const Array& a, const std::vector<int64_t>& perm) {
  const size_t r = a.rank();
  std::vector<int64_t> shape(r), src_strides(r);
  const std::vector<int64_t> strides = Strides(a.shape());
  for (size_t i = 0; i < r; ++i) {
    shape[i] = a.dim(static_cast<size_t>(perm[i]));
    src_strides[i] = strides[static_cast<size_t>(perm[i])];
  }
  const int64_t n = a.numel();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  if (n > 0) {
    // Walk the output in order; the last output axis is the inner loop.
    std::vector<int64_t> pos(r, 0);
    int64_t src = 0;
    const int64_t inner = r == 0 ? 1 : shape[r - 1];
    const int64_t inner_stride = r == 0 ? 0 : src_strides[r - 1];
    for (int64_t k = 0; k < n; k += inner) {
      for (int64_t j = 0; j < inner; ++j) idx[static_cast<size_t>(k + j)] = src + j * inner_stride;
      // Advance every axis but the last.
      for (size_t d = r == 0 ? 0 : r - 1; d-- > 0;) {
        src += src_strides[d];
        if (++pos[d] < shape[d]) break;
        src -= src_strides[d] * shape[d];
        pos[d] = 0;
      }
    }
  }
  return GatherFlat(a, shape, idx);
}

Status TransposeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const int64_t r = static_cast<int64_t>(x.rank());
  std::vector<int64_t> dflt(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) dflt[static_cast<size_t>(i)] = r - 1 - i;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.node().Ints("perm", dflt));
  if (static_cast<int64_t>(perm.size()) != r) return ctx.Error("perm has {} entries for rank {}", perm.size(), r);
  TESSERA_ASSIGN_OR_RETURN(perm, NormalizeAxes(ctx, perm, r));
  ctx.set_output(0, TransposeArray(x, perm));
  return Status::Ok();
}

namespace {

StatusOr<int64_t> BlockSize(const OpContext& ctx, const Array& x) {
  if (x.rank() != 4) return ctx.Error("input must be 4-D, got {}", x.ShapeString());
  TESSERA_ASSIGN_OR_RETURN(int64_t b, ctx.node().Int("blocksize", 0));
  if (b <= 0 || b > (int64_t{1} << 20)) return ctx.Error("blocksize {} must be positive", b);
  return b;
}

}  // namespace

Status DepthToSpaceKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(int64_t b, BlockSize(ctx, x));
  TESSERA_ASSIGN_OR_RETURN(std::string mode, ctx.node().String("mode", "DCR"));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (c % (b * b) != 0) return ctx.Error("channels {} are not a multiple of blocksize^2 = {}", c, b * b);
  const int64_t oc = c / (b * b);
  Array t;
  if (mode == "DCR") {
    t = TransposeArray(x.Reshaped({n, b, b, oc, h, w}), {0, 3, 4, 1, 5, 2});
  } else if (mode == "CRD") {
    t = TransposeArray(x.Reshaped({n, oc, b, b, h, w}), {0, 1, 4, 2, 5, 3});
  } else {
    return ctx.Error("unknown mode '{}'", mode);
  }
  ctx.set_output(0, t.Reshaped({n, oc, h * b, w * b}));
  return Status::Ok();
}

Status SpaceToDepthKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(int64_t b, BlockSize(ctx, x));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h % b != 0 || w % b != 0) return ctx.Error("spatial dims {}x{} are not multiples of blocksize {}", h, w, b);
  Array t = TransposeArray(x.Reshaped({n, c, h / b, b, w / b, b}), {0, 3, 5, 1, 2, 4});
  ctx.set_output(0, t.Reshaped({n, c * b * b, h / b, w / b}));
  return Status::Ok();
}

}  // namespace tessera::onnx
