// Helpers of the quant kernels: quantization parameters that are per-tensor
// (one value) or per-channel along an axis, and saturating rounding casts.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx::quant {

// A scale or zero point: one value, or one per index of an axis.
struct QParam {
  Array a;  // undefined: absent (reads as 0)
  bool per_channel = false;
  double At(int64_t channel) const {
    if (!a.defined()) return 0;
    return a.GetDouble(per_channel ? channel : 0);
  }
};

// Input i as a QParam for `channels` channels; absent optional inputs read as 0.
StatusOr<QParam> ReadQParam(const OpContext& ctx, size_t i, int64_t channels, bool required);

// Rounds half to even and saturates into T's range (NaN reads as 0).
template <typename T>
T SaturateRound(double v) {
  if (std::isnan(v)) return 0;
  v = std::nearbyint(v);
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  return static_cast<T>(std::min(std::max(v, lo), hi));
}

// Quantized 8-bit types (uint8 / int8); errors naming `what` otherwise.
Status Check8Bit(const OpContext& ctx, const Array& a, const char* what);

// x[i] as int64 for 8-bit / 32-bit integer arrays.
inline int64_t IntAt(const Array& a, int64_t i) { return a.GetInt(i); }

}  // namespace tessera::onnx::quant
