// Non-template parts of the elementwise helpers: type sets, multi-input
// broadcast shapes, and binary-op input preparation (incl. legacy broadcast).
#include "tessera/onnx/ops/elementwise/elementwise_util.h"

#include <fmt/format.h>

namespace tessera::onnx::elementwise {

bool TypeInSet(ElemType t, unsigned set) {
  switch (t) {
    case ElemType::kFloat:
    case ElemType::kDouble:
    case ElemType::kFloat16:
    case ElemType::kBFloat16: return (set & kFloats) != 0;
    case ElemType::kInt8:
    case ElemType::kInt16:
    case ElemType::kInt32:
    case ElemType::kInt64: return (set & kSigned) != 0;
    case ElemType::kUint8:
    case ElemType::kUint16:
    case ElemType::kUint32:
    case ElemType::kUint64: return (set & kUnsigned) != 0;
    case ElemType::kBool: return (set & kBools) != 0;
    default: return false;
  }
}

const char* TypeSetName(unsigned set) {
  switch (set) {
    case kFloats: return "float tensor";
    case kSigned: return "signed integer tensor";
    case kUnsigned: return "unsigned integer tensor";
    case kBools: return "bool tensor";
    case kInts: return "integer tensor";
    case kNumeric: return "numeric tensor";
    case kFloats | kSigned: return "float or signed integer tensor";
    case kAllButString: return "numeric or bool tensor";
    default: return "tensor of a supported type";
  }
}

StatusOr<std::vector<int64_t>> BroadcastAll(const OpContext& ctx, const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> out;
  for (const std::vector<int64_t>& s : shapes) {
    auto b = BroadcastShapes(out, s);
    if (!b.ok()) return ctx.Error("{}", b.status().message());
    out = std::move(*b);
  }
  return out;
}

StatusOr<BinaryInputs> GetBinaryInputs(const OpContext& ctx, bool legacy_broadcast_before_7) {
  BinaryInputs in;
  TESSERA_ASSIGN_OR_RETURN(in.a, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(in.b, ctx.tensor(1));
  if (legacy_broadcast_before_7 && ctx.opset() < 7) {
    TESSERA_ASSIGN_OR_RETURN(int64_t broadcast, ctx.node().Int("broadcast", 0));
    const std::vector<int64_t>& sa = in.a.shape();
    const std::vector<int64_t>& sb = in.b.shape();
    if (broadcast == 0) {
      if (sa != sb) {
        return ctx.Error("shapes {} and {} differ and broadcast is 0", in.a.ShapeString(), in.b.ShapeString());
      }
      in.out_shape = sa;
      return in;
    }
    const int64_t ra = static_cast<int64_t>(sa.size()), rb = static_cast<int64_t>(sb.size());
    if (rb > ra) return ctx.Error("B {} has more dims than A {}", in.b.ShapeString(), in.a.ShapeString());
    TESSERA_ASSIGN_OR_RETURN(int64_t axis, ctx.node().Int("axis", ra - rb));
    if (axis < 0) axis += ra;
    if (axis < 0 || axis + rb > ra) return ctx.Error("axis {} does not place B (rank {}) in A (rank {})", axis, rb, ra);
    // B's dims placed at [axis, axis + rb) of A's rank.
    std::vector<int64_t> nb(static_cast<size_t>(ra), 1);
    for (int64_t i = 0; i < rb; ++i) {
      const int64_t d = sb[static_cast<size_t>(i)];
      if (d != 1 && d != sa[static_cast<size_t>(axis + i)]) {
        return ctx.Error("B {} does not broadcast to A {} at axis {}", in.b.ShapeString(), in.a.ShapeString(), axis);
      }
      nb[static_cast<size_t>(axis + i)] = d;
    }
    in.b = in.b.Reshaped(std::move(nb));
    in.out_shape = sa;
    return in;
  }
  TESSERA_ASSIGN_OR_RETURN(in.out_shape, BroadcastAll(ctx, {in.a.shape(), in.b.shape()}));
  return in;
}

}  // namespace tessera::onnx::elementwise
