#include "tessera/onnx/ops/kernel_util.h"

namespace tessera::onnx {

StatusOr<int64_t> NormalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1)) return ctx.Error("axis {} is out of range for rank {}", axis, rank);
  return a;
}

StatusOr<std::vector<int64_t>> IntsInput(const OpContext& ctx, size_t i, const std::vector<int64_t>& dflt) {
  if (!ctx.has_input(i)) return dflt;
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
  if (!IsIntegerType(a.type())) return ctx.Error("input {} must be an integer tensor, got {}", i, ElemName(a.type()));
  return a.ToInts();
}

StatusOr<double> ScalarInput(const OpContext& ctx, size_t i) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
  if (a.numel() != 1) return ctx.Error("input {} must hold one value, has shape {}", i, a.ShapeString());
  if (a.type() == ElemType::kString) return ctx.Error("input {} must be numeric", i);
  return a.GetDouble(0);
}

}  // namespace tessera::onnx
