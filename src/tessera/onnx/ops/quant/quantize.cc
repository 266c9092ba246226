// QuantizeLinear, DequantizeLinear (per-tensor or per-axis) and
// DynamicQuantizeLinear (uint8). Arithmetic is float32, as the reference.
#include <algorithm>
#include <cmath>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/quant/kernels.h"
#include "tessera/onnx/ops/quant/quant_util.h"

namespace tessera::onnx::quant {
namespace {

// The channel of flat index i along `axis` (0 when the parameters are per-tensor).
struct AxisMap {
  int64_t inner = 1, dim = 1;
  int64_t Channel(int64_t i) const { return (i / inner) % dim; }
};

StatusOr<AxisMap> ReadAxis(const OpContext& ctx, const Array& x) {
  AxisMap m;
  // Per-tensor parameters (one scale) ignore the axis.
  TESSERA_ASSIGN_OR_RETURN(Array scale, ctx.tensor(1));
  if (x.rank() == 0 || (scale.numel() == 1 && scale.rank() <= 1)) return m;
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(x.rank())));
  m.dim = std::max<int64_t>(x.dim(static_cast<size_t>(axis)), 1);
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) m.inner *= x.dim(d);
  m.inner = std::max<int64_t>(m.inner, 1);
  return m;
}

Status QuantizeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type()) && x.type() != ElemType::kInt32) return ctx.Error("x must be float or int32");
  TESSERA_ASSIGN_OR_RETURN(AxisMap am, ReadAxis(ctx, x));
  TESSERA_ASSIGN_OR_RETURN(QParam scale, ReadQParam(ctx, 1, am.dim, true));
  TESSERA_ASSIGN_OR_RETURN(QParam zp, ReadQParam(ctx, 2, am.dim, false));
  if (!IsFloatType(scale.a.type())) return ctx.Error("y_scale must be float");
  const ElemType out_type = zp.a.defined() ? zp.a.type() : ElemType::kUint8;
  Array y(out_type, x.shape());
  if (zp.a.defined()) TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, zp.a, "y_zero_point"));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t ch = am.Channel(i);
    const float s = static_cast<float>(scale.At(ch));
    if (s == 0) return ctx.Error("y_scale must be nonzero");
    const float q = std::nearbyint(static_cast<float>(x.GetDouble(i)) / s);
    const double v = static_cast<double>(q) + zp.At(ch);
    if (out_type == ElemType::kUint8) {
      y.data<uint8_t>()[i] = SaturateRound<uint8_t>(v);
    } else {
      y.data<int8_t>()[i] = SaturateRound<int8_t>(v);
    }
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

Status DequantizeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() != ElemType::kUint8 && x.type() != ElemType::kInt8 && x.type() != ElemType::kInt32) {
    return ctx.Error("x must be uint8, int8 or int32, got {}", ElemName(x.type()));
  }
  TESSERA_ASSIGN_OR_RETURN(AxisMap am, ReadAxis(ctx, x));
  TESSERA_ASSIGN_OR_RETURN(QParam scale, ReadQParam(ctx, 1, am.dim, true));
  TESSERA_ASSIGN_OR_RETURN(QParam zp, ReadQParam(ctx, 2, am.dim, false));
  if (!IsFloatType(scale.a.type())) return ctx.Error("x_scale must be float");
  if (zp.a.defined() && zp.a.type() != x.type()) return ctx.Error("x_zero_point must have x's type");
  Array y(ElemType::kFloat, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t ch = am.Channel(i);
    const float d = static_cast<float>(x.GetInt(i) - static_cast<int64_t>(zp.At(ch)));
    y.data<float>()[i] = d * static_cast<float>(scale.At(ch));
  }
  ctx.set_output(0, y.CastTo(IsFloatType(scale.a.type()) ? scale.a.type() : ElemType::kFloat));
  return Status::Ok();
}

Status DynamicQuantizeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() != ElemType::kFloat) return ctx.Error("x must be float, got {}", ElemName(x.type()));
  const float* px = x.data<float>();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  uint8_t zp = 0;
  Array y(ElemType::kUint8, x.shape());
  if (scale != 0 && std::isfinite(scale)) {
    zp = SaturateRound<uint8_t>(static_cast<double>(std::min(std::max(0.0f - lo / scale, 0.0f), 255.0f)));
    for (int64_t i = 0; i < x.numel(); ++i) {
      y.data<uint8_t>()[i] = SaturateRound<uint8_t>(static_cast<double>(std::nearbyint(px[i] / scale)) + zp);
    }
  }
  ctx.set_output(0, y);
  if (ctx.num_outputs() > 1 && ctx.output_wanted(1)) ctx.set_output(1, Array::Scalar<float>(scale));
  if (ctx.num_outputs() > 2 && ctx.output_wanted(2)) ctx.set_output(2, Array::Scalar<uint8_t>(zp));
  return Status::Ok();
}

}  // namespace

void RegisterQuantizeKernels(OpRegistry& r) {
  r.Register("QuantizeLinear", QuantizeKernel);
  r.Register("DequantizeLinear", DequantizeKernel);
  r.Register("DynamicQuantizeLinear", DynamicQuantizeKernel);
}

}  // namespace tessera::onnx::quant
