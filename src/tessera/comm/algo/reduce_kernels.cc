#include "tessera/comm/algo/reduce_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tessera/base/check.h"
#include "tessera/base/float16.h"

namespace tessera::comm::algo {
namespace {

// Elements per block: the accumulator block stays in L1 (<= 16 KiB).
constexpr size_t kBlock = 2048;

// Arithmetic type per storage type: wrap-around unsigned for integer
// sum/prod (no signed-overflow UB), float for 16-bit floats.
template <typename T, bool kIntegral = std::is_integral_v<T>>
struct WrapOf {
  using type = T;
};
template <typename T>
struct WrapOf<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
struct Traits {
  using Acc = T;
  using Wrap = typename WrapOf<T>::type;
};
template <>
struct Traits<bf16> {
  using Acc = float;
  using Wrap = float;
};
template <>
struct Traits<fp16> {
  using Acc = float;
  using Wrap = float;
};

// Loads n storage elements into the accumulator type.
template <typename T>
inline void Load(typename Traits<T>::Acc* out, const T* in, size_t n) {
  std::memcpy(out, in, n * sizeof(T));
}
template <>
inline void Load<bf16>(float* out, const bf16* in, size_t n) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(in);
  for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(bits[i]) << 16);
}
template <>
inline void Load<fp16>(float* out, const fp16* in, size_t n) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(in);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = fp16::ToFloatBits(bits[i]);
}

template <typename T>
inline void Store(T* out, const typename Traits<T>::Acc* in, size_t n) {
  std::memcpy(out, in, n * sizeof(T));
}
template <>
inline void Store<bf16>(bf16* out, const float* in, size_t n) {
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t x = std::bit_cast<uint32_t>(in[i]);
    const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    o[i] = static_cast<uint16_t>(nan ? ((x >> 16) | 0x40u) : rounded);
  }
}
template <>
inline void Store<fp16>(fp16* out, const float* in, size_t n) {
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), h);
  }
  for (; i < n; ++i) o[i] = fp16::FromFloat(in[i]);
}

// acc[i] = acc[i] op x[i], vectorizable.
template <typename A, typename W, ReduceOp kOp>
inline void Combine(A* __restrict acc, const A* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
      acc[i] = static_cast<A>(static_cast<W>(acc[i]) + static_cast<W>(x[i]));
    } else if constexpr (kOp == ReduceOp::kProd) {
      acc[i] = static_cast<A>(static_cast<W>(acc[i]) * static_cast<W>(x[i]));
    } else if constexpr (kOp == ReduceOp::kMin) {
      acc[i] = x[i] < acc[i] ? x[i] : acc[i];
    } else {
      acc[i] = acc[i] < x[i] ? x[i] : acc[i];
    }
  }
}

// Same as Combine, reading the operand directly from storage when no
// conversion is needed.
template <typename T, ReduceOp kOp>
inline void CombineFrom(typename Traits<T>::Acc* acc, typename Traits<T>::Acc* tmp, const T* src, size_t n) {
  using A = typename Traits<T>::Acc;
  using W = typename Traits<T>::Wrap;
  if constexpr (std::is_same_v<A, T>) {
    (void)tmp;
    Combine<A, W, kOp>(acc, src, n);
  } else {
    Load<T>(tmp, src, n);
    Combine<A, W, kOp>(acc, tmp, n);
  }
}

template <typename A>
inline void DivideBlock(A* acc, size_t n, int divisor) {
  if constexpr (std::is_floating_point_v<A>) {
    const A d = static_cast<A>(divisor);
    for (size_t i = 0; i < n; ++i) acc[i] = acc[i] / d;
  } else {
    const A d = static_cast<A>(divisor);
    for (size_t i = 0; i < n; ++i) acc[i] = static_cast<A>(acc[i] / d);
  }
}

// Streams n bytes from an L1-resident block to dst (non-temporal stores
// where dst is 32-byte aligned).
inline void StreamBlock(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  if ((reinterpret_cast<uintptr_t>(dst) & 31) == 0) {
    for (; i + 32 <= n; i += 32) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    }
  }
  std::memcpy(dst + i, src + i, n - i);
}

// Element by element in registers: for the tiny messages of the latency
// path (no block buffers).
template <typename T, ReduceOp kOp>
void ReduceSmallT(void* dst_v, const void* const* srcs_v, int num_srcs, size_t count, int avg_divisor) {
  using A = typename Traits<T>::Acc;
  using W = typename Traits<T>::Wrap;
  T* dst = static_cast<T*>(dst_v);
  for (size_t i = 0; i < count; ++i) {
    A acc, x;
    Load<T>(&acc, static_cast<const T*>(srcs_v[0]) + i, 1);
    for (int k = 1; k < num_srcs; ++k) {
      Load<T>(&x, static_cast<const T*>(srcs_v[k]) + i, 1);
      Combine<A, W, kOp>(&acc, &x, 1);
    }
    if (kOp == ReduceOp::kAvg && avg_divisor > 0) DivideBlock<A>(&acc, 1, avg_divisor);
    Store<T>(dst + i, &acc, 1);
  }
}

template <typename T, ReduceOp kOp>
void ReduceManyT(void* dst_v, const void* const* srcs_v, int num_srcs, size_t count, int avg_divisor,
                 bool stream_dst) {
  if (count * sizeof(T) <= 64) return ReduceSmallT<T, kOp>(dst_v, srcs_v, num_srcs, count, avg_divisor);
  using A = typename Traits<T>::Acc;
  alignas(64) A acc[kBlock];
  alignas(64) A tmp[kBlock];
  T* dst = static_cast<T*>(dst_v);
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    Load<T>(acc, static_cast<const T*>(srcs_v[0]) + base, n);
    for (int k = 1; k < num_srcs; ++k) CombineFrom<T, kOp>(acc, tmp, static_cast<const T*>(srcs_v[k]) + base, n);
    if (kOp == ReduceOp::kAvg && avg_divisor > 0) DivideBlock<A>(acc, n, avg_divisor);
    if (stream_dst) {
      alignas(64) T staged[kBlock];
      Store<T>(staged, acc, n);
      StreamBlock(reinterpret_cast<uint8_t*>(dst + base), reinterpret_cast<const uint8_t*>(staged), n * sizeof(T));
    } else {
      Store<T>(dst + base, acc, n);
    }
  }
  if (stream_dst) _mm_sfence();
}

template <typename T, ReduceOp kOp>
void ReduceIntoT(void* dst_v, const void* src_v, size_t count) {
  using A = typename Traits<T>::Acc;
  using W = typename Traits<T>::Wrap;
  T* dst = static_cast<T*>(dst_v);
  const T* src = static_cast<const T*>(src_v);
  if constexpr (std::is_same_v<A, T>) {
    Combine<A, W, kOp>(dst, src, count);
  } else {
    alignas(64) A acc[kBlock];
    alignas(64) A tmp[kBlock];
    for (size_t base = 0; base < count; base += kBlock) {
      const size_t n = std::min(kBlock, count - base);
      Load<T>(acc, dst + base, n);
      Load<T>(tmp, src + base, n);
      Combine<A, W, kOp>(acc, tmp, n);
      Store<T>(dst + base, acc, n);
    }
  }
}

template <typename T>
void DivideByT(void* dst_v, size_t count, int divisor) {
  using A = typename Traits<T>::Acc;
  T* dst = static_cast<T*>(dst_v);
  if constexpr (std::is_same_v<A, T>) {
    DivideBlock<A>(dst, count, divisor);
  } else {
    alignas(64) A acc[kBlock];
    for (size_t base = 0; base < count; base += kBlock) {
      const size_t n = std::min(kBlock, count - base);
      Load<T>(acc, dst + base, n);
      DivideBlock<A>(acc, n, divisor);
      Store<T>(dst + base, acc, n);
    }
  }
}

template <typename F>
auto DispatchType(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat32: return f(float{});
    case DataType::kFloat64: return f(double{});
    case DataType::kBFloat16: return f(bf16{});
    case DataType::kFloat16: return f(fp16{});
    case DataType::kInt8: return f(int8_t{});
    case DataType::kUint8: return f(uint8_t{});
    case DataType::kInt32: return f(int32_t{});
    case DataType::kInt64: return f(int64_t{});
  }
  TESSERA_CHECK(false, "bad dtype {}", static_cast<int>(dtype));
  return f(float{});
}

}  // namespace

void ReduceMany(void* dst, const void* const* srcs, int num_srcs, size_t count, DataType dtype, ReduceOp op,
                int avg_divisor, bool stream_dst) {
  TESSERA_CHECK(num_srcs >= 1);
  if (count == 0) return;
  DispatchType(dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case ReduceOp::kSum: return ReduceManyT<T, ReduceOp::kSum>(dst, srcs, num_srcs, count, 0, stream_dst);
      case ReduceOp::kProd: return ReduceManyT<T, ReduceOp::kProd>(dst, srcs, num_srcs, count, 0, stream_dst);
      case ReduceOp::kMin: return ReduceManyT<T, ReduceOp::kMin>(dst, srcs, num_srcs, count, 0, stream_dst);
      case ReduceOp::kMax: return ReduceManyT<T, ReduceOp::kMax>(dst, srcs, num_srcs, count, 0, stream_dst);
      case ReduceOp::kAvg:
        return ReduceManyT<T, ReduceOp::kAvg>(dst, srcs, num_srcs, count, avg_divisor, stream_dst);
    }
  });
}

void ReduceInto(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op) {
  if (count == 0) return;
  DispatchType(dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return ReduceIntoT<T, ReduceOp::kSum>(dst, src, count);
      case ReduceOp::kProd: return ReduceIntoT<T, ReduceOp::kProd>(dst, src, count);
      case ReduceOp::kMin: return ReduceIntoT<T, ReduceOp::kMin>(dst, src, count);
      case ReduceOp::kMax: return ReduceIntoT<T, ReduceOp::kMax>(dst, src, count);
    }
  });
}

void DivideBy(void* dst, size_t count, DataType dtype, int divisor) {
  TESSERA_CHECK(divisor > 0);
  if (count == 0 || divisor == 1) return;
  DispatchType(dtype, [&](auto tag) { DivideByT<decltype(tag)>(dst, count, divisor); });
}

}  // namespace tessera::comm::algo
