// Element types of tensors and their sizes/names. Floating types: fp32, bf16,
// fp16 (bf16/fp16 are storage types, computed in fp32); integer: int32, int64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tessera/base/float16.h"
#include "tessera/base/status.h"

namespace tessera {

enum class DType : uint8_t { kF32 = 0, kBF16, kF16, kI32, kI64 };

size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);  // "fp32", "bf16", "fp16", "int32", "int64"
bool IsFloating(DType dtype);
StatusOr<DType> ParseDType(std::string_view name);

template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::kBF16; };
template <> struct DTypeOf<fp16> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };

// Calls f.template operator()<T>() with T the C++ type of a floating dtype.
template <typename F>
decltype(auto) DispatchFloating(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f.template operator()<float>();
    case DType::kBF16: return f.template operator()<bf16>();
    case DType::kF16: return f.template operator()<fp16>();
    default: break;
  }
  return f.template operator()<float>();  // callers check IsFloating first
}

inline float ToF32(float v) { return v; }
inline float ToF32(bf16 v) { return v.ToFloat(); }
inline float ToF32(fp16 v) { return v.ToFloat(); }
template <typename T>
inline T FromF32(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T(v);
  }
}

}  // namespace tessera
