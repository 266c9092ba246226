// Integer and quantized linear algebra: MatMulInteger, ConvInteger,
// QLinearMatMul and QLinearConv. Products accumulate exactly in int64 after
// subtracting zero points; the QLinear ops requantize with
// round-half-to-even and saturation.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/nn_util.h"
#include "tessera/onnx/ops/quant/kernels.h"
#include "tessera/onnx/ops/quant/quant_util.h"

namespace tessera::onnx::quant {
namespace {

// sum_k (a[i,k] - za[i]) (b[k,j] - zb[j]) over numpy-broadcast batches (int64, exact).
StatusOr<std::vector<int64_t>> IntMatMul(const OpContext& ctx, const Array& a, const Array& b, const QParam& za,
                                         const QParam& zb, nn::MatMulShape& s) {
  TESSERA_ASSIGN_OR_RETURN(s, nn::ReadMatMulShape(ctx, a.shape(), b.shape()));
  if ((za.per_channel && za.a.numel() != s.m) || (zb.per_channel && zb.a.numel() != s.n)) {
    return ctx.Error("per-row / per-column zero points must have M = {} / N = {} entries", s.m, s.n);
  }
  std::vector<int64_t> out(s.a_batch.size() * static_cast<size_t>(s.m * s.n));
  for (size_t bt = 0; bt < s.a_batch.size(); ++bt) {
    const int64_t ao = s.a_batch[bt] * s.m * s.k, bo = s.b_batch[bt] * s.k * s.n;
    for (int64_t i = 0; i < s.m; ++i) {
      const int64_t zai = static_cast<int64_t>(za.At(i));
      for (int64_t j = 0; j < s.n; ++j) {
        const int64_t zbj = static_cast<int64_t>(zb.At(j));
        int64_t acc = 0;
        for (int64_t t = 0; t < s.k; ++t)
          acc += (a.GetInt(ao + i * s.k + t) - zai) * (b.GetInt(bo + t * s.n + j) - zbj);
        out[bt * static_cast<size_t>(s.m * s.n) + static_cast<size_t>(i * s.n + j)] = acc;
      }
    }
  }
  return out;
}

Status MatMulIntegerKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array b, ctx.tensor(1));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, a, "A"));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, b, "B"));
  const int64_t m = a.rank() >= 2 ? a.dim(a.rank() - 2) : 1, n = b.rank() >= 2 ? b.dim(b.rank() - 1) : 1;
  TESSERA_ASSIGN_OR_RETURN(QParam za, ReadQParam(ctx, 2, m, false));
  TESSERA_ASSIGN_OR_RETURN(QParam zb, ReadQParam(ctx, 3, n, false));
  nn::MatMulShape s;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> acc, IntMatMul(ctx, a, b, za, zb, s));
  Array y(ElemType::kInt32, s.out);
  for (size_t i = 0; i < acc.size(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(acc[i]);
  ctx.set_output(0, y);
  return Status::Ok();
}

// Requantizes int64 accumulators: y = saturate(round(acc * scale(ch)) + zp(ch)) into zp's 8-bit type.
Array Requantize(const std::vector<int64_t>& acc, const std::vector<int64_t>& shape, ElemType type,
                 const std::vector<double>& mult, const QParam& zy, int64_t inner, int64_t channels) {
  Array y(type, shape);
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t ch = channels > 1 ? (static_cast<int64_t>(i) / inner) % channels : 0;
    // Scaled in float as the reference; clamped first so the narrowing stays in float's range.
    const double scaled = std::clamp(static_cast<double>(acc[i]) * mult[static_cast<size_t>(ch)], -1e30, 1e30);
    const double v = static_cast<double>(std::nearbyint(static_cast<float>(scaled))) + zy.At(0);
    if (type == ElemType::kUint8) {
      y.data<uint8_t>()[i] = SaturateRound<uint8_t>(v);
    } else {
      y.data<int8_t>()[i] = SaturateRound<int8_t>(v);
    }
  }
  return y;
}

Status QLinearMatMulKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array b, ctx.tensor(3));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, a, "a"));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, b, "b"));
  const int64_t m = a.rank() >= 2 ? a.dim(a.rank() - 2) : 1, n = b.rank() >= 2 ? b.dim(b.rank() - 1) : 1;
  TESSERA_ASSIGN_OR_RETURN(QParam sa, ReadQParam(ctx, 1, m, true));
  TESSERA_ASSIGN_OR_RETURN(QParam za, ReadQParam(ctx, 2, m, false));
  TESSERA_ASSIGN_OR_RETURN(QParam sb, ReadQParam(ctx, 4, n, true));
  TESSERA_ASSIGN_OR_RETURN(QParam zb, ReadQParam(ctx, 5, n, false));
  TESSERA_ASSIGN_OR_RETURN(QParam sy, ReadQParam(ctx, 6, 1, true));
  TESSERA_ASSIGN_OR_RETURN(QParam zy, ReadQParam(ctx, 7, 1, false));
  if (sa.per_channel) return ctx.Error("a_scale must be a scalar");
  const ElemType out_type = zy.a.defined() ? zy.a.type() : ElemType::kUint8;
  if (zy.a.defined()) TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, zy.a, "y_zero_point"));
  nn::MatMulShape s;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> acc, IntMatMul(ctx, a, b, za, zb, s));
  const float ys = static_cast<float>(sy.At(0));
  if (ys == 0) return ctx.Error("y_scale must be nonzero");
  std::vector<double> mult(static_cast<size_t>(sb.per_channel ? n : 1));
  for (size_t j = 0; j < mult.size(); ++j) {
    mult[j] = static_cast<float>(sa.At(0)) * static_cast<float>(sb.At(static_cast<int64_t>(j))) / ys;
  }
  ctx.set_output(0, Requantize(acc, s.out, out_type, mult, zy, 1, sb.per_channel ? n : 1));
  return Status::Ok();
}

// Conv of (x - zx) by (w - zw[m]) in int64, plus optional int32 bias.
StatusOr<std::vector<int64_t>> IntConv(const OpContext& ctx, const Array& x, const Array& w, const QParam& zx,
                                       const QParam& zw, nn::ConvShape& s) {
  TESSERA_ASSIGN_OR_RETURN(s, nn::ReadConvShape(ctx, x.shape(), w.shape()));
  if (zx.per_channel) return ctx.Error("x_zero_point must be a scalar");
  if (zw.per_channel && zw.a.numel() != s.m) return ctx.Error("w_zero_point must have {} entries", s.m);
  const int64_t zxv = static_cast<int64_t>(zx.At(0));
  std::vector<int64_t> acc(static_cast<size_t>(Numel(nn::ConvOutShape(s))));
  nn::ConvLoop<int64_t>(
      s, [&](int64_t i) { return x.GetInt(i) - zxv; },
      [&](int64_t i, int64_t m) { return w.GetInt(i) - static_cast<int64_t>(zw.At(m)); }, acc.data());
  return acc;
}

Status ConvIntegerKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array w, ctx.tensor(1));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, x, "x"));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, w, "w"));
  const int64_t m = w.rank() > 0 ? w.dim(0) : 0;
  TESSERA_ASSIGN_OR_RETURN(QParam zx, ReadQParam(ctx, 2, 1, false));
  TESSERA_ASSIGN_OR_RETURN(QParam zw, ReadQParam(ctx, 3, m, false));
  nn::ConvShape s;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> acc, IntConv(ctx, x, w, zx, zw, s));
  Array y(ElemType::kInt32, nn::ConvOutShape(s));
  for (size_t i = 0; i < acc.size(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(acc[i]);
  ctx.set_output(0, y);
  return Status::Ok();
}

Status QLinearConvKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array w, ctx.tensor(3));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, x, "x"));
  TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, w, "w"));
  const int64_t m = w.rank() > 0 ? w.dim(0) : 0;
  TESSERA_ASSIGN_OR_RETURN(QParam sx, ReadQParam(ctx, 1, 1, true));
  TESSERA_ASSIGN_OR_RETURN(QParam zx, ReadQParam(ctx, 2, 1, false));
  TESSERA_ASSIGN_OR_RETURN(QParam sw, ReadQParam(ctx, 4, m, true));
  TESSERA_ASSIGN_OR_RETURN(QParam zw, ReadQParam(ctx, 5, m, false));
  TESSERA_ASSIGN_OR_RETURN(QParam sy, ReadQParam(ctx, 6, 1, true));
  TESSERA_ASSIGN_OR_RETURN(QParam zy, ReadQParam(ctx, 7, 1, false));
  const ElemType out_type = zy.a.defined() ? zy.a.type() : ElemType::kUint8;
  if (zy.a.defined()) TESSERA_RETURN_IF_ERROR(Check8Bit(ctx, zy.a, "y_zero_point"));
  nn::ConvShape s;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> acc, IntConv(ctx, x, w, zx, zw, s));
  const int64_t per = Numel(s.win.out);
  if (ctx.has_input(8)) {
    TESSERA_ASSIGN_OR_RETURN(Array bias, ctx.tensor(8));
    if (bias.type() != ElemType::kInt32 || bias.numel() != s.m) return ctx.Error("B must be int32 [{}]", s.m);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += bias.GetInt((static_cast<int64_t>(i) / per) % s.m);
  }
  const float ys = static_cast<float>(sy.At(0));
  if (ys == 0) return ctx.Error("y_scale must be nonzero");
  std::vector<double> mult(static_cast<size_t>(s.m));
  for (int64_t j = 0; j < s.m; ++j) {
    mult[static_cast<size_t>(j)] = static_cast<float>(sx.At(0)) * static_cast<float>(sw.At(j)) / ys;
  }
  ctx.set_output(0, Requantize(acc, nn::ConvOutShape(s), out_type, mult, zy, per, s.m));
  return Status::Ok();
}

}  // namespace

void RegisterQLinearKernels(OpRegistry& r) {
  r.Register("MatMulInteger", MatMulIntegerKernel);
  r.Register("ConvInteger", ConvIntegerKernel);
  r.Register("QLinearMatMul", QLinearMatMulKernel);
  r.Register("QLinearConv", QLinearConvKernel);
}

}  // namespace tessera::onnx::quant
