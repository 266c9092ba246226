// Helpers shared by the elementwise kernels: element-type sets, wrapping
// integer arithmetic, safe float -> integer conversion, unary maps, and
// numpy-broadcast loops over 1..3 inputs (a contiguous inner loop per output
// row, no per-element indirection or std::function).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx::elementwise {

// ---- Element-type sets (template arguments of the map helpers).
enum TypeSet : unsigned {
  kFloats = 1,    // float, double, float16, bfloat16
  kSigned = 2,    // int8..int64
  kUnsigned = 4,  // uint8..uint64
  kBools = 8,
  kInts = kSigned | kUnsigned,
  kNumeric = kFloats | kInts,
  kAllButString = kNumeric | kBools,
};

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, fp16> || std::is_same_v<T, bf16>;

template <typename T>
constexpr bool TypeIn(unsigned set) {
  if constexpr (std::is_same_v<T, bool>) {
    return (set & kBools) != 0;
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return (set & kSigned) != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return (set & kUnsigned) != 0;
  } else {
    return (set & kFloats) != 0;
  }
}

bool TypeInSet(ElemType t, unsigned set);
// "float tensor", "integer tensor", ... for error messages.
const char* TypeSetName(unsigned set);

// The type a kernel computes in: float for the 16-bit floats, else T.
template <typename T>
using Compute = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T>
inline Compute<T> Load(T v) {
  if constexpr (kIsHalf<T>) {
    return v.ToFloat();
  } else {
    return v;
  }
}
template <typename T, typename V>
inline T Store(V v) {
  if constexpr (kIsHalf<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// ---- Integer arithmetic that wraps (numpy semantics) without signed overflow.
template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
inline T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
  } else {
    return a + b;
  }
}
template <typename T>
inline T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b));
  } else {
    return a - b;
  }
}
template <typename T>
inline T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  } else {
    return a * b;
  }
}
template <typename T>
inline T WrapNeg(T a) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(Wide<T>{0} - static_cast<Wide<T>>(a));
  } else {
    return -a;
  }
}

// Float -> integer: truncates toward zero; NaN gives 0; values outside the
// int64 / uint64 range saturate; then wraps modulo 2^bits into T (numpy's
// float -> int64 -> narrower int).
template <typename T>
T FloatToInt(double d) {
  static_assert(std::is_integral_v<T>);
  if constexpr (std::is_same_v<T, bool>) {
    return d != 0;
  } else {
    if (std::isnan(d)) return T{0};
    d = std::trunc(d);
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
      return static_cast<T>(static_cast<int64_t>(d));
    }
    if (d >= 0 && d < 18446744073709551616.0) return static_cast<T>(static_cast<uint64_t>(d));
    if (d < 0) return std::numeric_limits<T>::min();
    return std::numeric_limits<T>::max();
  }
}

// ---- Broadcast loops.

// Numpy broadcast of `shapes`; an error naming the node when incompatible.
StatusOr<std::vector<int64_t>> BroadcastAll(const OpContext& ctx, const std::vector<std::vector<int64_t>>& shapes);

// Calls row(out_offset, len, offsets, steps) for each run of `len`
// consecutive output elements; input j's element for output out_offset + t is
// at offsets[j] + t * steps[j] (steps are 0 or 1).
template <size_t N, typename F>
void ForEachRow(const std::array<const std::vector<int64_t>*, N>& in_shapes, const std::vector<int64_t>& out_shape,
                F&& row) {
  const int64_t total = Numel(out_shape);
  if (total == 0) return;
  std::array<int64_t, N> offs{};
  std::array<int64_t, N> steps{};
  // Fast path: every input has the output's shape or one element.
  bool simple = true;
  for (size_t j = 0; j < N; ++j) {
    steps[j] = *in_shapes[j] == out_shape ? 1 : 0;
    simple = simple && (steps[j] == 1 || Numel(*in_shapes[j]) == 1);
  }
  if (simple || out_shape.empty()) {
    row(int64_t{0}, total, offs, steps);
    return;
  }
  const size_t r = out_shape.size();
  // Strides of each input aligned to the output's rank (0 where broadcast).
  std::array<std::vector<int64_t>, N> strides;
  for (size_t j = 0; j < N; ++j) {
    const std::vector<int64_t>& s = *in_shapes[j];
    const std::vector<int64_t> own = Strides(s);
    strides[j].assign(r, 0);
    const size_t off = r - s.size();
    for (size_t i = 0; i < s.size(); ++i) strides[j][off + i] = s[i] == 1 ? 0 : own[i];
    steps[j] = strides[j][r - 1];
  }
  const int64_t inner = out_shape[r - 1];
  std::vector<int64_t> coord(r, 0);
  for (int64_t o = 0; o < total; o += inner) {
    row(o, inner, offs, steps);
    // Advance the outer coordinates (all but the last dim).
    for (size_t d = r - 1; d-- > 0;) {
      if (++coord[d] < out_shape[d]) {
        for (size_t j = 0; j < N; ++j) offs[j] += strides[j][d];
        break;
      }
      for (size_t j = 0; j < N; ++j) offs[j] -= strides[j][d] * (out_shape[d] - 1);
      coord[d] = 0;
    }
  }
}

// out[k] = f(a[.], b[.]) over the broadcast shape `out_shape` (already
// computed); TA/TB/TO are storage types, f gets and returns storage types.
template <typename TA, typename TB, typename TO, typename F>
Array BinaryLoop(const Array& a, const Array& b, ElemType out_type, const std::vector<int64_t>& out_shape, F&& f) {
  Array out(out_type, out_shape);
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* po = out.data<TO>();
  ForEachRow<2>({&a.shape(), &b.shape()}, out_shape,
                [&](int64_t o, int64_t n, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st) {
                  const TA* xa = pa + off[0];
                  const TB* xb = pb + off[1];
                  TO* y = po + o;
                  if (st[0] == 1 && st[1] == 1) {
                    for (int64_t t = 0; t < n; ++t) y[t] = f(xa[t], xb[t]);
                  } else if (st[0] == 1) {
                    const TB vb = xb[0];
                    for (int64_t t = 0; t < n; ++t) y[t] = f(xa[t], vb);
                  } else if (st[1] == 1) {
                    const TA va = xa[0];
                    for (int64_t t = 0; t < n; ++t) y[t] = f(va, xb[t]);
                  } else {
                    const TO v = f(xa[0], xb[0]);
                    for (int64_t t = 0; t < n; ++t) y[t] = v;
                  }
                });
  return out;
}

// The inputs A, B of a binary op and their output shape: numpy broadcasting,
// or for opset < 7 the legacy `broadcast` / `axis` attributes (B broadcast
// unidirectionally into A, aligned at `axis`). B may be reshaped.
struct BinaryInputs {
  Array a, b;
  std::vector<int64_t> out_shape;
};
StatusOr<BinaryInputs> GetBinaryInputs(const OpContext& ctx, bool legacy_broadcast_before_7 = true);

// ---- Maps whose output has the input's type.

// y = op(x) for x of any type in kTypes; 16-bit floats are computed in float.
template <unsigned kTypes, typename Op>
Status MapUnary(OpContext& ctx, Op op) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!TypeInSet(x.type(), kTypes)) {
    return ctx.Error("input must be a {}, got {}", TypeSetName(kTypes), ElemName(x.type()));
  }
  Array y(x.type(), x.shape());
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), ctx.node().op_type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (TypeIn<T>(kTypes)) {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      const int64_t n = x.numel();
      for (int64_t i = 0; i < n; ++i) py[i] = Store<T>(op(Load(px[i])));
    }
  }));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// y = pred(x) as bool for x of any type in kTypes.
template <unsigned kTypes, typename Pred>
Status MapPredicate(OpContext& ctx, Pred pred) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!TypeInSet(x.type(), kTypes)) {
    return ctx.Error("input must be a {}, got {}", TypeSetName(kTypes), ElemName(x.type()));
  }
  Array y(ElemType::kBool, x.shape());
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), ctx.node().op_type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (TypeIn<T>(kTypes)) {
      const T* px = x.data<T>();
      bool* py = y.data<bool>();
      const int64_t n = x.numel();
      for (int64_t i = 0; i < n; ++i) py[i] = pred(Load(px[i]));
    }
  }));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Binary op on two inputs of one type in kTypes; op gets compute-type values
// (float for 16-bit floats). kToBool: the output is bool (comparisons), else
// the inputs' type.
template <unsigned kTypes, bool kToBool, typename Op>
Status MapBinary(OpContext& ctx, Op op) {
  TESSERA_ASSIGN_OR_RETURN(BinaryInputs in, GetBinaryInputs(ctx));
  if (in.a.type() != in.b.type()) {
    return ctx.Error("inputs must have one element type, got {} and {}", ElemName(in.a.type()), ElemName(in.b.type()));
  }
  if (!TypeInSet(in.a.type(), kTypes)) {
    return ctx.Error("inputs must be a {}, got {}", TypeSetName(kTypes), ElemName(in.a.type()));
  }
  Array y;
  TESSERA_RETURN_IF_ERROR(VisitNumeric(in.a.type(), ctx.node().op_type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (TypeIn<T>(kTypes)) {
      if constexpr (kToBool) {
        y = BinaryLoop<T, T, bool>(in.a, in.b, ElemType::kBool, in.out_shape,
                                   [&](T u, T v) -> bool { return op(Load(u), Load(v)); });
      } else {
        y = BinaryLoop<T, T, T>(in.a, in.b, in.a.type(), in.out_shape,
                                [&](T u, T v) -> T { return Store<T>(op(Load(u), Load(v))); });
      }
    }
  }));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace tessera::onnx::elementwise
