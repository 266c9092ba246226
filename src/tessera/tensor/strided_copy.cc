#include "tessera/tensor/strided_copy.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/base/float16.h"

namespace tessera::internal {

double ReadAsDouble(const void* p, DType dtype) {
  switch (dtype) {
    case DType::kF32: return *static_cast<const float*>(p);
    case DType::kBF16: return static_cast<const bf16*>(p)->ToFloat();
    case DType::kF16: return static_cast<const fp16*>(p)->ToFloat();
    case DType::kI32: return *static_cast<const int32_t*>(p);
    case DType::kI64: return static_cast<double>(*static_cast<const int64_t*>(p));
  }
  return 0;
}

void WriteFromDouble(void* p, DType dtype, double v) {
  switch (dtype) {
    case DType::kF32: *static_cast<float*>(p) = static_cast<float>(v); break;
    case DType::kBF16: *static_cast<bf16*>(p) = bf16(static_cast<float>(v)); break;
    case DType::kF16: *static_cast<fp16*>(p) = fp16(static_cast<float>(v)); break;
    case DType::kI32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::kI64: *static_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
  }
}

namespace {

// The iteration space after merging: dims[0] outermost, the last one the row.
struct Plan {
  std::vector<int64_t> size, dst_stride, src_stride;
};

Plan Coalesce(const int64_t* shape, int rank, const int64_t* ds, const int64_t* ss) {
  Plan p;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1) continue;  // contributes no offset
    if (!p.size.empty()) {
      const int64_t n = shape[d];
      // The previous (outer) dim continues this one in both layouts: merge.
      if (p.dst_stride.back() == ds[d] * n && p.src_stride.back() == ss[d] * n) {
        p.size.back() *= n;
        p.dst_stride.back() = ds[d];
        p.src_stride.back() = ss[d];
        continue;
      }
    }
    p.size.push_back(shape[d]);
    p.dst_stride.push_back(ds[d]);
    p.src_stride.push_back(ss[d]);
  }
  if (p.size.empty()) {  // a single element
    p.size = {1};
    p.dst_stride = {1};
    p.src_stride = {1};
  }
  return p;
}

inline uint16_t RoundToBf16(float f) {  // branch-free form of bf16::FromFloat
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Copies one row of n elements (strides in elements).
void CopyRow(const StridedBuffer& dst, int64_t od, int64_t dstep, const StridedBuffer& src, int64_t os, int64_t sstep,
             int64_t n) {
  const size_t des = DTypeSize(dst.dtype), ses = DTypeSize(src.dtype);
  char* d = dst.base + od * static_cast<int64_t>(des);
  const char* s = src.base + os * static_cast<int64_t>(ses);
  if (dst.dtype == src.dtype) {
    if (dstep == 1 && sstep == 1) {
      std::memcpy(d, s, static_cast<size_t>(n) * des);
      return;
    }
    auto strided = [&](auto tag) {
      using T = decltype(tag);
      T* dt = reinterpret_cast<T*>(d);
      const T* st = reinterpret_cast<const T*>(s);
      for (int64_t i = 0; i < n; ++i) dt[i * dstep] = st[i * sstep];
    };
    switch (des) {
      case 2: strided(uint16_t{}); return;
      case 4: strided(uint32_t{}); return;
      case 8: strided(uint64_t{}); return;
      default: break;
    }
  }
  if (dst.dtype == DType::kBF16 && src.dtype == DType::kF32) {
    uint16_t* dt = reinterpret_cast<uint16_t*>(d);
    const float* st = reinterpret_cast<const float*>(s);
    if (dstep == 1 && sstep == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dt[i] = RoundToBf16(st[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) dt[i * dstep] = RoundToBf16(st[i * sstep]);
    }
    return;
  }
  if (dst.dtype == DType::kF32 && src.dtype == DType::kBF16) {
    float* dt = reinterpret_cast<float*>(d);
    const uint16_t* st = reinterpret_cast<const uint16_t*>(s);
    if (dstep == 1 && sstep == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dt[i] = Bf16ToFloat(st[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) dt[i * dstep] = Bf16ToFloat(st[i * sstep]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    WriteFromDouble(d + i * dstep * static_cast<int64_t>(des), dst.dtype,
                    ReadAsDouble(s + i * sstep * static_cast<int64_t>(ses), src.dtype));
  }
}

// Copies rows [first, last) of the plan (a row = the last dim).
void CopyRows(const Plan& p, const StridedBuffer& dst, const StridedBuffer& src, int64_t first, int64_t last) {
  const int outer = static_cast<int>(p.size.size()) - 1;
  const int64_t n = p.size[outer];
  std::vector<int64_t> idx(outer, 0);
  int64_t od = dst.offset, os = src.offset;
  {  // the multi-index of row `first`
    int64_t r = first;
    for (int d = outer - 1; d >= 0; --d) {
      idx[d] = r % p.size[d];
      r /= p.size[d];
      od += idx[d] * p.dst_stride[d];
      os += idx[d] * p.src_stride[d];
    }
  }
  for (int64_t row = first; row < last; ++row) {
    CopyRow(dst, od, p.dst_stride[outer], src, os, p.src_stride[outer], n);
    for (int d = outer - 1; d >= 0; --d) {
      od += p.dst_stride[d];
      os += p.src_stride[d];
      if (++idx[d] < p.size[d]) break;
      od -= idx[d] * p.dst_stride[d];
      os -= idx[d] * p.src_stride[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void CopyStrided(const int64_t* shape, int rank, const StridedBuffer& dst, const StridedBuffer& src) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  if (total == 0) return;
  const Plan p = Coalesce(shape, rank, dst.strides, src.strides);
  const int outer = static_cast<int>(p.size.size()) - 1;
  const int64_t row_len = p.size[outer];
  const int64_t rows = total / row_len;
  const int threads = (total >= kParallelCopyElements && !omp_in_parallel()) ? omp_get_max_threads() : 1;
  if (threads <= 1) {
    CopyRows(p, dst, src, 0, rows);
    return;
  }
  if (rows >= threads) {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      CopyRows(p, dst, src, rows * t / nt, rows * (t + 1) / nt);
    }
    return;
  }
  // Few long rows: split each row into per-thread ranges.
  for (int64_t r = 0; r < rows; ++r) {
    int64_t od = dst.offset, os = src.offset;
    for (int64_t rr = r, d = outer - 1; d >= 0; --d) {
      od += (rr % p.size[d]) * p.dst_stride[d];
      os += (rr % p.size[d]) * p.src_stride[d];
      rr /= p.size[d];
    }
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t b = row_len * t / nt, e = row_len * (t + 1) / nt;
      b -= b % 64;  // cache-line-friendly split points
      if (t + 1 < nt) e -= e % 64;
      if (e > b) {
        CopyRow(dst, od + b * p.dst_stride[outer], p.dst_stride[outer], src, os + b * p.src_stride[outer],
                p.src_stride[outer], e - b);
      }
    }
  }
}

}  // namespace tessera::internal
