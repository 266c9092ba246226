// Pad: constant / reflect / edge / wrap padding, with negative pads cropping
// (Pad-2 reads pads and value attributes, Pad-11+ inputs, Pad-18 axes).
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

namespace {

// The source index for output position `o` along an axis of size `dim` padded by `before`,
// or -1 for the constant value.
int64_t SourceIndex(int64_t o, int64_t before, int64_t dim, const std::string& mode) {
  int64_t i = o - before;
  if (i >= 0 && i < dim) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : dim - 1;
  if (mode == "wrap") return ((i % dim) + dim) % dim;
  // reflect (without repeating the edge element)
  if (dim == 1) return 0;
  const int64_t period = 2 * (dim - 1);
  i = ((i % period) + period) % period;
  return i < dim ? i : period - i;
}

}  // namespace

Status PadKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const int64_t r = static_cast<int64_t>(x.rank());
  TESSERA_ASSIGN_OR_RETURN(std::string mode, ctx.node().String("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return ctx.Error("unknown mode '{}'", mode);
  }
  std::vector<int64_t> pads, axes;
  Array value;
  if (ctx.opset() >= 11) {
    TESSERA_ASSIGN_OR_RETURN(pads, IntsInput(ctx, 1));
    if (ctx.has_input(2)) {
      TESSERA_ASSIGN_OR_RETURN(value, ctx.tensor(2));
      if (value.numel() != 1) return ctx.Error("constant_value must hold one value, has {}", value.ShapeString());
      if (value.type() != x.type()) {
        return ctx.Error("constant_value is {}, data is {}", ElemName(value.type()), ElemName(x.type()));
      }
    }
    TESSERA_ASSIGN_OR_RETURN(axes, IntsInput(ctx, 3));
  } else {
    const std::string name = ctx.opset() >= 2 ? "pads" : "paddings";
    TESSERA_ASSIGN_OR_RETURN(pads, ctx.node().Ints(name, {}));
    TESSERA_ASSIGN_OR_RETURN(float v, ctx.node().Float("value", 0.0f));
    if (x.type() != ElemType::kString) {
      value = Array(x.type(), {});
      value.SetDouble(0, v);
    }
  }
  if (!value.defined()) value = Array(x.type(), {});  // zero / empty string
  if (ctx.has_input(3) && ctx.opset() >= 18) {
    TESSERA_ASSIGN_OR_RETURN(axes, NormalizeAxes(ctx, axes, r));
  } else {
    axes.clear();
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const size_t na = axes.size();
  if (pads.size() != 2 * na) return ctx.Error("pads has {} entries, expected {}", pads.size(), 2 * na);
  std::vector<int64_t> before(static_cast<size_t>(r), 0), shape = x.shape();
  for (size_t i = 0; i < na; ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const int64_t lim = int64_t{1} << 40;
    if (pads[i] < -lim || pads[i] > lim || pads[i + na] < -lim || pads[i + na] > lim) {
      return ctx.Error("pad {} / {} is out of range", pads[i], pads[i + na]);
    }
    before[a] = pads[i];
    shape[a] = x.dim(a) + pads[i] + pads[i + na];
    if (shape[a] < 0)
      return ctx.Error("pads {} / {} crop axis {} of size {} below zero", pads[i], pads[i + na], a, x.dim(a));
    if (mode != "constant" && x.dim(a) == 0 && shape[a] > 0) {
      return ctx.Error("cannot {}-pad axis {} of size 0", mode, a);
    }
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t n, CheckShape(ctx, shape));
  // Per axis, the source index of each output position (-1: constant).
  std::vector<std::vector<int64_t>> src(static_cast<size_t>(r));
  for (size_t d = 0; d < static_cast<size_t>(r) && n > 0; ++d) {
    for (int64_t o = 0; o < shape[d]; ++o) src[d].push_back(SourceIndex(o, before[d], x.dim(d), mode));
  }
  const std::vector<int64_t> strides = Strides(x.shape());
  Array out(x.type(), shape);
  std::vector<int64_t> pos(static_cast<size_t>(r), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t s = 0;
    for (size_t d = 0; d < static_cast<size_t>(r) && s >= 0; ++d) {
      const int64_t i = src[d][static_cast<size_t>(pos[d])];
      s = i < 0 ? -1 : s + i * strides[d];
    }
    if (s >= 0) {
      CopyElems(x, s, out, k, 1);
    } else {
      CopyElems(value, 0, out, k, 1);
    }
    NextIndex(pos, shape);
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace tessera::onnx
