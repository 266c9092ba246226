// Unary math kernels: Abs, Neg, Reciprocal, Sqrt, Exp, Log, Ceil, Floor,
// Round, Sign, Erf, the trigonometric and hyperbolic functions, IsInf,
// IsNaN, Not and BitwiseNot.
#include <cmath>

#include "tessera/onnx/ops/elementwise/elementwise_ops.h"
#include "tessera/onnx/ops/elementwise/elementwise_util.h"

namespace tessera::onnx::elementwise {
namespace {

Status Abs(OpContext& ctx) {
  return MapUnary<kNumeric>(ctx, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
      return v < 0 ? WrapNeg(v) : v;
    } else if constexpr (std::is_integral_v<C>) {
      return v;
    } else {
      return std::fabs(v);
    }
  });
}

Status Neg(OpContext& ctx) {
  return MapUnary<kFloats | kSigned>(ctx, [](auto v) { return WrapNeg(v); });
}

Status Sign(OpContext& ctx) {
  return MapUnary<kNumeric>(ctx, [](auto v) {
    using C = decltype(v);
    if (v > C(0)) return C(1);
    if constexpr (std::is_signed_v<C> || std::is_floating_point_v<C>) {
      if (v < C(0)) return C(-1);
    }
    return v;  // 0 (and NaN stays NaN)
  });
}

// Kernels of float-only functions f(v) (f called with float or double).
#define TESSERA_FLOAT_UNARY(Name, expr)                         \
  Status Name(OpContext& ctx) {                                 \
    return MapUnary<kFloats>(ctx, [](auto v) { return expr; }); \
  }

TESSERA_FLOAT_UNARY(Reciprocal, decltype(v)(1) / v)
TESSERA_FLOAT_UNARY(Sqrt, std::sqrt(v))
TESSERA_FLOAT_UNARY(Exp, std::exp(v))
TESSERA_FLOAT_UNARY(Log, std::log(v))
TESSERA_FLOAT_UNARY(Ceil, std::ceil(v))
TESSERA_FLOAT_UNARY(Floor, std::floor(v))
TESSERA_FLOAT_UNARY(Round, std::nearbyint(v))  // the default rounding mode: halves to even
TESSERA_FLOAT_UNARY(Erf, std::erf(v))
TESSERA_FLOAT_UNARY(Sin, std::sin(v))
TESSERA_FLOAT_UNARY(Cos, std::cos(v))
TESSERA_FLOAT_UNARY(Tan, std::tan(v))
TESSERA_FLOAT_UNARY(Asin, std::asin(v))
TESSERA_FLOAT_UNARY(Acos, std::acos(v))
TESSERA_FLOAT_UNARY(Atan, std::atan(v))
TESSERA_FLOAT_UNARY(Sinh, std::sinh(v))
TESSERA_FLOAT_UNARY(Cosh, std::cosh(v))
TESSERA_FLOAT_UNARY(Tanh, std::tanh(v))
TESSERA_FLOAT_UNARY(Asinh, std::asinh(v))
TESSERA_FLOAT_UNARY(Acosh, std::acosh(v))
TESSERA_FLOAT_UNARY(Atanh, std::atanh(v))

#undef TESSERA_FLOAT_UNARY

Status IsInf(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(int64_t pos, ctx.node().Int("detect_positive", 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t neg, ctx.node().Int("detect_negative", 1));
  return MapPredicate<kFloats>(
      ctx, [pos, neg](auto v) { return std::isinf(v) && ((v > 0 && pos != 0) || (v < 0 && neg != 0)); });
}

Status IsNaN(OpContext& ctx) {
  return MapPredicate<kFloats>(ctx, [](auto v) { return std::isnan(v); });
}

Status Not(OpContext& ctx) {
  return MapUnary<kBools>(ctx, [](bool v) { return !v; });
}

Status BitwiseNot(OpContext& ctx) {
  return MapUnary<kInts>(ctx, [](auto v) { return static_cast<decltype(v)>(~v); });
}

}  // namespace

void RegisterUnaryMathOps(OpRegistry& r) {
  r.Register("Abs", Abs);
  r.Register("Neg", Neg);
  r.Register("Sign", Sign);
  r.Register("Reciprocal", Reciprocal);
  r.Register("Sqrt", Sqrt);
  r.Register("Exp", Exp);
  r.Register("Log", Log);
  r.Register("Ceil", Ceil);
  r.Register("Floor", Floor);
  r.Register("Round", Round);
  r.Register("Erf", Erf);
  r.Register("Sin", Sin);
  r.Register("Cos", Cos);
  r.Register("Tan", Tan);
  r.Register("Asin", Asin);
  r.Register("Acos", Acos);
  r.Register("Atan", Atan);
  r.Register("Sinh", Sinh);
  r.Register("Cosh", Cosh);
  r.Register("Tanh", Tanh);
  r.Register("Asinh", Asinh);
  r.Register("Acosh", Acosh);
  r.Register("Atanh", Atanh);
  r.Register("IsInf", IsInf);
  r.Register("IsNaN", IsNaN);
  r.Register("Not", Not);
  r.Register("BitwiseNot", BitwiseNot);
}

}  // namespace tessera::onnx::elementwise
