#include "tessera/comm/algo/reduce_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

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
void ReduceToManyT(void* const* dsts_v, int num_dsts, const void* const* srcs_v, int num_srcs, size_t count,
                   int avg_divisor, uint64_t stream_mask);

template <typename T, ReduceOp kOp>
void ReduceManyT(void* dst_v, const void* const* srcs_v, int num_srcs, size_t count, int avg_divisor,
                 bool stream_dst) {
  if (count * sizeof(T) <= 64) return ReduceSmallT<T, kOp>(dst_v, srcs_v, num_srcs, count, avg_divisor);
  using A = typename Traits<T>::Acc;
  if constexpr (std::is_same_v<A, T>) {
    // Types computed in their own width: one line at a time in registers
    // (no staging through L1 blocks); its tail (< 64 bytes) comes back here.
    void* const dsts[1] = {dst_v};
    return ReduceToManyT<T, kOp>(dsts, 1, srcs_v, num_srcs, count, avg_divisor, stream_dst ? 1 : 0);
  }
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

// One 64-byte line of elements at a time, in registers: load and combine
// every source, then store to every destination, so reads and (streaming)
// writes interleave and every byte crosses the memory bus once. For element
// types computed in their own width (fp32, fp64, integers): GCC vector
// extensions of one AVX2 register, two per line.
template <typename T, ReduceOp kOp>
size_t ReduceToManyVectors(void* const* dsts_v, int num_dsts, const bool* streamed, const void* const* srcs_v,
                           int num_srcs, size_t count, int avg_divisor) {
  using W = typename Traits<T>::Wrap;
  typedef T VT __attribute__((vector_size(32)));
  typedef W VW __attribute__((vector_size(32)));
  constexpr size_t kHalf = 32 / sizeof(T);
  auto combine = [](VT acc, VT x) -> VT {
    if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
      return reinterpret_cast<VT>(reinterpret_cast<VW>(acc) + reinterpret_cast<VW>(x));
    } else if constexpr (kOp == ReduceOp::kProd) {
      return reinterpret_cast<VT>(reinterpret_cast<VW>(acc) * reinterpret_cast<VW>(x));
    } else if constexpr (kOp == ReduceOp::kMin) {
      return x < acc ? x : acc;
    } else {
      return acc < x ? x : acc;
    }
  };
  size_t i = 0;
  for (; i + 2 * kHalf <= count; i += 2 * kHalf) {
    VT lo, hi;
    std::memcpy(&lo, static_cast<const T*>(srcs_v[0]) + i, 32);
    std::memcpy(&hi, static_cast<const T*>(srcs_v[0]) + i + kHalf, 32);
    for (int k = 1; k < num_srcs; ++k) {
      VT xlo, xhi;
      std::memcpy(&xlo, static_cast<const T*>(srcs_v[k]) + i, 32);
      std::memcpy(&xhi, static_cast<const T*>(srcs_v[k]) + i + kHalf, 32);
      lo = combine(lo, xlo);
      hi = combine(hi, xhi);
    }
    if constexpr (kOp == ReduceOp::kAvg) {
      if (avg_divisor > 0) {  // integers truncate toward zero
        lo = lo / static_cast<T>(avg_divisor);
        hi = hi / static_cast<T>(avg_divisor);
      }
    }
    const __m256i a = reinterpret_cast<__m256i>(lo);
    const __m256i b = reinterpret_cast<__m256i>(hi);
    for (int d = 0; d < num_dsts; ++d) {
      auto* out = reinterpret_cast<__m256i*>(static_cast<T*>(dsts_v[d]) + i);
      if (streamed[d]) {
        _mm256_stream_si256(out, a);
        _mm256_stream_si256(out + 1, b);
      } else {
        _mm256_storeu_si256(out, a);
        _mm256_storeu_si256(out + 1, b);
      }
    }
  }
  return i;
}

// 16-bit floats (accumulated in fp32): small blocks through L1; all of
// `count`.
template <typename T, ReduceOp kOp>
size_t ReduceToManyBlocks(void* const* dsts_v, int num_dsts, const bool* streamed, const void* const* srcs_v,
                          int num_srcs, size_t count, int avg_divisor) {
  using A = typename Traits<T>::Acc;
  constexpr size_t kSmall = 256;
  alignas(64) A acc[kSmall];
  alignas(64) A tmp[kSmall];
  alignas(64) T staged[kSmall];
  for (size_t i = 0; i < count; i += kSmall) {
    const size_t m = std::min(kSmall, count - i);
    Load<T>(acc, static_cast<const T*>(srcs_v[0]) + i, m);
    for (int k = 1; k < num_srcs; ++k) CombineFrom<T, kOp>(acc, tmp, static_cast<const T*>(srcs_v[k]) + i, m);
    if (kOp == ReduceOp::kAvg && avg_divisor > 0) DivideBlock<A>(acc, m, avg_divisor);
    Store<T>(staged, acc, m);
    for (int d = 0; d < num_dsts; ++d) {
      auto* out = reinterpret_cast<uint8_t*>(static_cast<T*>(dsts_v[d]) + i);
      if (streamed[d]) {
        StreamBlock(out, reinterpret_cast<const uint8_t*>(staged), m * sizeof(T));
      } else {
        std::memcpy(out, staged, m * sizeof(T));
      }
    }
  }
  return count;
}

template <typename T, ReduceOp kOp>
void ReduceToManyT(void* const* dsts_v, int num_dsts, const void* const* srcs_v, int num_srcs, size_t count,
                   int avg_divisor, uint64_t stream_mask) {
  using A = typename Traits<T>::Acc;
  constexpr int kMaxDsts = 64;
  TESSERA_CHECK(num_dsts >= 1 && num_dsts <= kMaxDsts, "{} destinations", num_dsts);
  bool streamed[kMaxDsts];
  bool any_streamed = false;
  for (int d = 0; d < num_dsts; ++d) {
    streamed[d] = ((stream_mask >> d) & 1) != 0 && (reinterpret_cast<uintptr_t>(dsts_v[d]) & 31) == 0;
    any_streamed = any_streamed || streamed[d];
  }
  size_t i = 0;
  if constexpr (std::is_same_v<A, T>) {
    i = ReduceToManyVectors<T, kOp>(dsts_v, num_dsts, streamed, srcs_v, num_srcs, count, avg_divisor);
  } else {
    i = ReduceToManyBlocks<T, kOp>(dsts_v, num_dsts, streamed, srcs_v, num_srcs, count, avg_divisor);
  }
  if (i < count) {  // the tail, through ReduceMany into the first destination
    std::vector<const void*> tail(static_cast<size_t>(num_srcs));
    for (int k = 0; k < num_srcs; ++k) tail[k] = static_cast<const T*>(srcs_v[k]) + i;
    ReduceManyT<T, kOp>(static_cast<T*>(dsts_v[0]) + i, tail.data(), num_srcs, count - i, avg_divisor, false);
    for (int d = 1; d < num_dsts; ++d) {
      std::memcpy(static_cast<T*>(dsts_v[d]) + i, static_cast<T*>(dsts_v[0]) + i, (count - i) * sizeof(T));
    }
  }
  if (any_streamed) _mm_sfence();
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

void ReduceToMany(void* const* dsts, int num_dsts, const void* const* srcs, int num_srcs, size_t count,
                  DataType dtype, ReduceOp op, int avg_divisor, uint64_t stream_mask) {
  TESSERA_CHECK(num_srcs >= 1);
  if (count == 0 || num_dsts == 0) return;
  DispatchType(dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case ReduceOp::kSum:
        return ReduceToManyT<T, ReduceOp::kSum>(dsts, num_dsts, srcs, num_srcs, count, 0, stream_mask);
      case ReduceOp::kProd:
        return ReduceToManyT<T, ReduceOp::kProd>(dsts, num_dsts, srcs, num_srcs, count, 0, stream_mask);
      case ReduceOp::kMin:
        return ReduceToManyT<T, ReduceOp::kMin>(dsts, num_dsts, srcs, num_srcs, count, 0, stream_mask);
      case ReduceOp::kMax:
        return ReduceToManyT<T, ReduceOp::kMax>(dsts, num_dsts, srcs, num_srcs, count, 0, stream_mask);
      case ReduceOp::kAvg:
        return ReduceToManyT<T, ReduceOp::kAvg>(dsts, num_dsts, srcs, num_srcs, count, avg_divisor, stream_mask);
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
