// Helpers shared by the reduce family's kernels: the plan of a multi-axis
// reduction (Reduce*), the outer / axis / inner geometry of a single-axis
// operation (ArgMax, CumSum, Softmax, TopK), ordering keys and saturating
// conversions from double.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx {

template <typename T>
inline constexpr bool kIsFloatLike = std::is_floating_point_v<T> || std::is_same_v<T, fp16> || std::is_same_v<T, bf16>;

// A value ordered like T: float for fp16 / bf16, the value itself otherwise
// (integers keep their exact order, which a double would lose past 2^53).
template <typename T>
inline auto OrderKey(T v) {
  if constexpr (std::is_same_v<T, fp16> || std::is_same_v<T, bf16>) {
    return v.ToFloat();
  } else {
    return v;
  }
}

template <typename K>
inline bool IsNaNKey(K k) {
  if constexpr (std::is_floating_point_v<K>) {
    return std::isnan(k);
  } else {
    (void)k;
    return false;
  }
}

// double -> T without undefined behaviour: integers saturate at the type's
// range and NaN becomes 0; floating types convert as usual.
template <typename T>
inline T SaturatingFromDouble(double v) {
  if constexpr (kIsFloatLike<T>) {
    return FromDouble<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (std::isnan(v)) return T{0};
    // Both bounds are exactly representable as doubles (powers of two, or 0).
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi_excl = std::ldexp(1.0, std::numeric_limits<T>::digits);  // max + 1
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi_excl) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// A reduction of some axes of an input of `in_shape`.
struct ReducePlan {
  bool noop = false;               // noop_with_empty_axes and no axes: the output is the input
  std::vector<int64_t> out_shape;  // keepdims applied
  int64_t out_numel = 1;
  int64_t group = 1;               // input elements folded into each output element
  std::vector<int64_t> out_index;  // for each input element (flat), its output element (flat)
};

// Reads `axes` (input 1 when `axes_from_input`, else the attribute),
// `keepdims` and `noop_with_empty_axes`, checks the axes against x's rank,
// and plans the reduction.
StatusOr<ReducePlan> MakeReducePlan(const OpContext& ctx, const Array& x, bool axes_from_input);

// The geometry of an operation along one axis of a row-major tensor: the
// element (o, j, i) is at flat index (o * n + j) * inner + i.
struct AxisGeometry {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};
// `axis` must already be in [0, rank) (or 0 for a scalar, giving n = 1).
AxisGeometry GeometryAt(const std::vector<int64_t>& shape, int64_t axis);

// Reads an int attribute used as a flag (non-zero = true).
StatusOr<bool> BoolAttr(const OpContext& ctx, const std::string& name, bool dflt);

}  // namespace tessera::onnx
