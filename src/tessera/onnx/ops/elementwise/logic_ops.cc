// Logic, bitwise and comparison kernels: And, Or, Xor, BitwiseAnd / Or /
// Xor, Equal (also strings), Greater, Less, GreaterOrEqual, LessOrEqual.
#include <string>

#include "tessera/onnx/ops/elementwise/elementwise_ops.h"
#include "tessera/onnx/ops/elementwise/elementwise_util.h"

namespace tessera::onnx::elementwise {
namespace {

Status And(OpContext& ctx) {
  return MapBinary<kBools, false>(ctx, [](bool a, bool b) { return a && b; });
}
Status Or(OpContext& ctx) {
  return MapBinary<kBools, false>(ctx, [](bool a, bool b) { return a || b; });
}
Status Xor(OpContext& ctx) {
  return MapBinary<kBools, false>(ctx, [](bool a, bool b) { return a != b; });
}

Status BitwiseAnd(OpContext& ctx) {
  return MapBinary<kInts, false>(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a & b); });
}
Status BitwiseOr(OpContext& ctx) {
  return MapBinary<kInts, false>(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a | b); });
}
Status BitwiseXor(OpContext& ctx) {
  return MapBinary<kInts, false>(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a ^ b); });
}

Status Equal(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(0));
  if (a.type() == ElemType::kString) {
    TESSERA_ASSIGN_OR_RETURN(BinaryInputs in, GetBinaryInputs(ctx));
    if (in.b.type() != ElemType::kString) {
      return ctx.Error("inputs must have one element type, got string and {}", ElemName(in.b.type()));
    }
    ctx.set_output(0, BinaryLoop<std::string, std::string, bool>(
                          in.a, in.b, ElemType::kBool, in.out_shape,
                          [](const std::string& x, const std::string& y) { return x == y; }));
    return Status::Ok();
  }
  return MapBinary<kAllButString, true>(ctx, [](auto x, auto y) { return x == y; });
}

Status Greater(OpContext& ctx) {
  return MapBinary<kNumeric, true>(ctx, [](auto a, auto b) { return a > b; });
}
Status Less(OpContext& ctx) {
  return MapBinary<kNumeric, true>(ctx, [](auto a, auto b) { return a < b; });
}
Status GreaterOrEqual(OpContext& ctx) {
  return MapBinary<kNumeric, true>(ctx, [](auto a, auto b) { return a >= b; });
}
Status LessOrEqual(OpContext& ctx) {
  return MapBinary<kNumeric, true>(ctx, [](auto a, auto b) { return a <= b; });
}

}  // namespace

void RegisterLogicOps(OpRegistry& r) {
  r.Register("And", And);
  r.Register("Or", Or);
  r.Register("Xor", Xor);
  r.Register("BitwiseAnd", BitwiseAnd);
  r.Register("BitwiseOr", BitwiseOr);
  r.Register("BitwiseXor", BitwiseXor);
  r.Register("Equal", Equal);
  r.Register("Greater", Greater);
  r.Register("Less", Less);
  r.Register("GreaterOrEqual", GreaterOrEqual);
  r.Register("LessOrEqual", LessOrEqual);
}

}  // namespace tessera::onnx::elementwise
