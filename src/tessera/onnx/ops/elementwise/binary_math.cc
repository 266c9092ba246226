// Binary arithmetic kernels: Add, Sub, Mul, Div, Pow (mixed base / exponent
// types), Mod (fmod 0 / 1) and BitShift. Integers wrap like numpy; integer
// division or modulus by zero is an error.
#include <cmath>
#include <string>

#include "tessera/onnx/ops/elementwise/elementwise_ops.h"
#include "tessera/onnx/ops/elementwise/elementwise_util.h"

namespace tessera::onnx::elementwise {
namespace {

Status Add(OpContext& ctx) {
  return MapBinary<kNumeric, false>(ctx, [](auto a, auto b) { return WrapAdd(a, b); });
}

Status Sub(OpContext& ctx) {
  return MapBinary<kNumeric, false>(ctx, [](auto a, auto b) { return WrapSub(a, b); });
}

Status Mul(OpContext& ctx) {
  return MapBinary<kNumeric, false>(ctx, [](auto a, auto b) { return WrapMul(a, b); });
}

Status Div(OpContext& ctx) {
  bool by_zero = false;
  const Status st = MapBinary<kNumeric, false>(ctx, [&by_zero](auto a, auto b) {
    using C = decltype(a);
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) {
        by_zero = true;
        return C(0);
      }
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return WrapNeg(a);  // INT_MIN / -1 wraps
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  });
  if (!st.ok()) return st;
  if (by_zero) return ctx.Error("integer division by zero");
  return Status::Ok();
}

Status Mod(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(int64_t fmod, ctx.node().Int("fmod", 0));
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (IsFloatType(x.type()) && fmod == 0) return ctx.Error("fmod must be 1 for float inputs ({})", ElemName(x.type()));
  bool by_zero = false;
  const Status st = MapBinary<kNumeric, false>(ctx, [&by_zero, fmod](auto a, auto b) {
    using C = decltype(a);
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) {
        by_zero = true;
        return C(0);
      }
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return C(0);  // avoids INT_MIN % -1
        C r = static_cast<C>(a % b);
        if (fmod == 0 && r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        return r;
      } else {
        return static_cast<C>(a % b);
      }
    } else {
      return std::fmod(a, b);
    }
  });
  if (!st.ok()) return st;
  if (by_zero) return ctx.Error("integer modulus by zero");
  return Status::Ok();
}

// x^e for an integer base and integer exponent, wrapping on overflow; a
// negative exponent gives the truncated 1 / x^-e.
template <typename T, typename U>
T IntPow(T x, U e) {
  if constexpr (std::is_signed_v<U>) {
    if (e < 0) {
      if (x == 1) return T(1);
      if constexpr (std::is_signed_v<T>) {
        if (x == -1) return (static_cast<uint64_t>(e) & 1u) ? T(-1) : T(1);
      }
      return T(0);
    }
  }
  uint64_t n = static_cast<uint64_t>(e);
  T result = 1, base = x;
  while (n != 0) {
    if (n & 1u) result = WrapMul(result, base);
    n >>= 1;
    if (n != 0) base = WrapMul(base, base);
  }
  return result;
}

template <typename T, typename U>
T PowOne(T x, U e) {
  if constexpr (std::is_integral_v<T> && std::is_integral_v<U>) {
    return IntPow(x, e);
  } else {
    const double d = std::pow(static_cast<double>(Load(x)), static_cast<double>(Load(e)));
    if constexpr (std::is_integral_v<T>) {
      return FloatToInt<T>(d);
    } else {
      return Store<T>(d);
    }
  }
}

Status Pow(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(BinaryInputs in, GetBinaryInputs(ctx));
  if (!TypeInSet(in.a.type(), kNumeric) || !TypeInSet(in.b.type(), kNumeric)) {
    return ctx.Error("base and exponent must be numeric, got {} and {}", ElemName(in.a.type()), ElemName(in.b.type()));
  }
  Array y;
  TESSERA_RETURN_IF_ERROR(VisitNumeric(in.a.type(), "Pow", [&](auto ta) {
    using T = decltype(ta);
    if constexpr (TypeIn<T>(kNumeric)) {
      TESSERA_CHECK_OK(VisitNumeric(in.b.type(), "Pow", [&](auto tb) {
        using U = decltype(tb);
        if constexpr (TypeIn<U>(kNumeric)) {
          if constexpr (std::is_same_v<T, float> && std::is_same_v<U, float>) {
            y = BinaryLoop<T, U, T>(in.a, in.b, in.a.type(), in.out_shape,
                                    [](float x, float e) { return e == 2.0f ? x * x : std::pow(x, e); });
          } else {
            y = BinaryLoop<T, U, T>(in.a, in.b, in.a.type(), in.out_shape, [](T x, U e) { return PowOne(x, e); });
          }
        }
      }));
    }
  }));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

Status BitShift(OpContext& ctx) {
  const StatusOr<std::string> dir = ctx.node().String("direction", "");
  if (!dir.ok()) return dir.status();
  const std::string& direction = *dir;
  if (direction != "LEFT" && direction != "RIGHT") {
    return ctx.Error("direction must be 'LEFT' or 'RIGHT', got '{}'", direction);
  }
  const bool left = direction == "LEFT";
  return MapBinary<kUnsigned, false>(ctx, [left](auto x, auto s) {
    using C = decltype(x);
    if (static_cast<uint64_t>(s) >= sizeof(C) * 8) return C(0);
    const uint64_t wide = static_cast<uint64_t>(x);
    return static_cast<C>(left ? wide << s : wide >> s);
  });
}

}  // namespace

void RegisterBinaryMathOps(OpRegistry& r) {
  r.Register("Add", Add);
  r.Register("Sub", Sub);
  r.Register("Mul", Mul);
  r.Register("Div", Div);
  r.Register("Mod", Mod);
  r.Register("Pow", Pow);
  r.Register("BitShift", BitShift);
}

}  // namespace tessera::onnx::elementwise
