// Quantization parameter reading shared by the quant kernels.
#include "tessera/onnx/ops/quant/quant_util.h"

namespace tessera::onnx::quant {

StatusOr<QParam> ReadQParam(const OpContext& ctx, size_t i, int64_t channels, bool required) {
  QParam p;
  if (!ctx.has_input(i)) {
    if (required) return ctx.Error("input {} is required", i);
    return p;
  }
  TESSERA_ASSIGN_OR_RETURN(p.a, ctx.tensor(i));
  if (p.a.type() == ElemType::kString) return ctx.Error("input {} must be numeric", i);
  if (p.a.numel() == 1 && p.a.rank() <= 1) return p;
  if (p.a.rank() == 1 && p.a.numel() == channels) {
    p.per_channel = true;
    return p;
  }
  return ctx.Error("input {} has shape {}, expected a scalar or [{}]", i, p.a.ShapeString(), channels);
}

Status Check8Bit(const OpContext& ctx, const Array& a, const char* what) {
  if (a.type() != ElemType::kUint8 && a.type() != ElemType::kInt8) {
    return ctx.Error("{} must be uint8 or int8, got {}", what, ElemName(a.type()));
  }
  return Status::Ok();
}

}  // namespace tessera::onnx::quant
