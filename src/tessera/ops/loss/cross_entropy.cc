#include "tessera/ops/loss/cross_entropy.h"

#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {

using detail::LoadF32;
using detail::StoreF32;

// Rows are streamed in blocks that stay in L1 while being reduced.
constexpr int64_t kBlock = 2048;

struct Problem {
  int64_t n = 0;
  int64_t v = 0;
  const int64_t* targets = nullptr;
  std::vector<int64_t> target_storage;
};

void Validate(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options, Problem& p) {
  TESSERA_OP_CHECK(logits.defined() && targets.defined(), "cross_entropy: logits and targets must be defined");
  TESSERA_OP_CHECK(logits.dim() == 2 && IsFloating(logits.dtype()),
                   "cross_entropy: logits must be a floating [N, V] tensor, got {} {}", DTypeName(logits.dtype()),
                   ShapeString(logits.shape()));
  TESSERA_OP_CHECK(logits.size(1) > 0, "cross_entropy: logits {} have no classes", ShapeString(logits.shape()));
  TESSERA_OP_CHECK(targets.dim() == 1 && detail::IsIndexType(targets.dtype()) && targets.size(0) == logits.size(0),
                   "cross_entropy: targets must be int64/int32 [N] with N = {} (logits {}), got {} {}",
                   logits.size(0), ShapeString(logits.shape()), DTypeName(targets.dtype()),
                   ShapeString(targets.shape()));
  TESSERA_OP_CHECK(options.label_smoothing >= 0.0f && options.label_smoothing <= 1.0f,
                   "cross_entropy: label_smoothing must be in [0, 1], got {}", options.label_smoothing);
  p.n = logits.size(0);
  p.v = logits.size(1);
  p.targets = detail::IndexData(targets, p.target_storage);
  for (int64_t i = 0; i < p.n; ++i) {
    int64_t t = p.targets[i];
    TESSERA_OP_CHECK(t == options.ignore_index || (t >= 0 && t < p.v),
                     "cross_entropy: target {} at position {} is outside [0, {}) and is not the ignore_index {} "
                     "(logits {})",
                     t, i, p.v, options.ignore_index, ShapeString(logits.shape()));
  }
}

// ----------------------------------------------------------------------------
// Reference: scalar loops, double accumulators.

template <typename T>
CrossEntropyResult ForwardReference(const T* x, const Problem& p, const CrossEntropyOptions& o) {
  CrossEntropyResult r;
  r.lse = Tensor::Empty({p.n}, DType::kF32);
  float* lse = r.lse.data<float>();
  double total = 0;
  const double eps = o.label_smoothing;
  for (int64_t i = 0; i < p.n; ++i) {
    const T* row = x + i * p.v;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < p.v; ++j) m = std::max(m, static_cast<double>(ToF32(row[j])));
    double s = 0, sx = 0;
    for (int64_t j = 0; j < p.v; ++j) {
      double xj = ToF32(row[j]);
      s += std::exp(xj - m);
      sx += xj;
    }
    double l = m + std::log(s);
    lse[i] = static_cast<float>(l);
    int64_t t = p.targets[i];
    if (t == o.ignore_index) continue;
    ++r.count;
    total += l - (1.0 - eps) * ToF32(row[t]) - eps / static_cast<double>(p.v) * sx;
  }
  r.loss = Tensor::Scalar(r.count > 0 ? total / static_cast<double>(r.count) : 0.0);
  return r;
}

template <typename T>
void BackwardReference(const T* x, const float* lse, const Problem& p, const CrossEntropyOptions& o, double scale,
                       T* gx) {
  const double eps = o.label_smoothing;
  for (int64_t i = 0; i < p.n; ++i) {
    const T* row = x + i * p.v;
    T* grow = gx + i * p.v;
    int64_t t = p.targets[i];
    for (int64_t j = 0; j < p.v; ++j) {
      double g = 0;
      if (t != o.ignore_index) {
        double target = eps / static_cast<double>(p.v) + (j == t ? 1.0 - eps : 0.0);
        g = (std::exp(static_cast<double>(ToF32(row[j])) - lse[i]) - target) * scale;
      }
      grow[j] = FromF32<T>(static_cast<float>(g));
    }
  }
}

// ----------------------------------------------------------------------------
// Optimized: one pass over each row with a running (max, sum) rescaled per
// block, vectorized with AVX2 or AVX-512, rows spread over threads.

struct BlockStats {
  float max;
  float sum_exp;  // Σ exp(x - max)
  float sum_x;
};

float BlockMaxAvx2(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m2 = m;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    m = _mm256_max_ps(m, _mm256_loadu_ps(x + j));
    m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + j + 8));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m, m2));
  float r = lanes[0];
  for (int l = 1; l < 8; ++l) r = std::max(r, lanes[l]);
  for (; j < n; ++j) r = std::max(r, x[j]);
  return r;
}

// Returns (Σ exp(x - m), Σ x).
std::pair<float, float> BlockExpSumAvx2(const float* x, int64_t n, float m) {
  __m256 vm = _mm256_set1_ps(m);
  __m256 s = _mm256_setzero_ps(), sx = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    s = _mm256_add_ps(s, detail::Exp256(_mm256_sub_ps(v, vm)));
    sx = _mm256_add_ps(sx, v);
  }
  alignas(32) float a[8], b[8];
  _mm256_store_ps(a, s);
  _mm256_store_ps(b, sx);
  float rs = 0, rx = 0;
  for (int l = 0; l < 8; ++l) {
    rs += a[l];
    rx += b[l];
  }
  for (; j < n; ++j) {
    rs += std::exp(x[j] - m);
    rx += x[j];
  }
  return {rs, rx};
}

// out[j] = (exp(x[j] - lse) - bias) * scale. With `stream`, 32/64-byte
// aligned vectors go out as non-temporal stores (no read-for-ownership of
// an output far bigger than the caches); the caller fences.
void ExpScaleAvx2(const float* x, int64_t n, float lse, float bias, float scale, float* out, bool stream) {
  __m256 vl = _mm256_set1_ps(lse), vb = _mm256_set1_ps(bias), vs = _mm256_set1_ps(scale);
  int64_t j = 0;
  if (stream) {
    for (; j < n && (reinterpret_cast<uintptr_t>(out + j) & 31) != 0; ++j) out[j] = (std::exp(x[j] - lse) - bias) * scale;
  }
  for (; j + 8 <= n; j += 8) {
    __m256 e = detail::Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), vl));
    __m256 r = _mm256_mul_ps(_mm256_sub_ps(e, vb), vs);
    if (stream) {
      _mm256_stream_ps(out + j, r);
    } else {
      _mm256_storeu_ps(out + j, r);
    }
  }
  for (; j < n; ++j) out[j] = (std::exp(x[j] - lse) - bias) * scale;
}

TESSERA_AVX512_TARGET float BlockMaxAvx512(const float* x, int64_t n) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m2 = m;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + j + 16));
  }
  for (; j < n; j += 16) {
    __mmask16 k = n - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - j)) - 1);
    m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + j));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(m, m2));
}

TESSERA_AVX512_TARGET std::pair<float, float> BlockExpSumAvx512(const float* x, int64_t n, float m) {
  __m512 vm = _mm512_set1_ps(m);
  __m512 s = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), sx = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m512 v = _mm512_loadu_ps(x + j), w = _mm512_loadu_ps(x + j + 16);
    s = _mm512_add_ps(s, detail::Exp512(_mm512_sub_ps(v, vm)));
    s2 = _mm512_add_ps(s2, detail::Exp512(_mm512_sub_ps(w, vm)));
    sx = _mm512_add_ps(sx, _mm512_add_ps(v, w));
  }
  for (; j < n; j += 16) {
    __mmask16 k = n - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(k, x + j);
    s = _mm512_add_ps(s, _mm512_maskz_mov_ps(k, detail::Exp512(_mm512_sub_ps(v, vm))));
    sx = _mm512_add_ps(sx, v);
  }
  return {_mm512_reduce_add_ps(_mm512_add_ps(s, s2)), _mm512_reduce_add_ps(sx)};
}

TESSERA_AVX512_TARGET void ExpScaleAvx512(const float* x, int64_t n, float lse, float bias, float scale, float* out,
                                          bool stream) {
  __m512 vl = _mm512_set1_ps(lse), vb = _mm512_set1_ps(bias), vs = _mm512_set1_ps(scale);
  int64_t j = 0;
  if (stream) {
    for (; j < n && (reinterpret_cast<uintptr_t>(out + j) & 63) != 0; ++j) out[j] = (std::exp(x[j] - lse) - bias) * scale;
    for (; j + 16 <= n; j += 16) {
      __m512 e = detail::Exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), vl));
      _mm512_stream_ps(out + j, _mm512_mul_ps(_mm512_sub_ps(e, vb), vs));
    }
  }
  for (; j < n; j += 16) {
    __mmask16 k = n - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 e = detail::Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vl));
    _mm512_mask_storeu_ps(out + j, k, _mm512_mul_ps(_mm512_sub_ps(e, vb), vs));
  }
}

struct Kernels {
  float (*block_max)(const float*, int64_t);
  std::pair<float, float> (*block_exp_sum)(const float*, int64_t, float);
  void (*exp_scale)(const float*, int64_t, float, float, float, float*, bool);
};

const Kernels& GetKernels() {
  static const Kernels avx512{&BlockMaxAvx512, &BlockExpSumAvx512, &ExpScaleAvx512};
  static const Kernels avx2{&BlockMaxAvx2, &BlockExpSumAvx2, &ExpScaleAvx2};
  return detail::UseAvx512() ? avx512 : avx2;
}

template <typename T>
CrossEntropyResult ForwardOptimized(const T* x, const Problem& p, const CrossEntropyOptions& o) {
  CrossEntropyResult r;
  r.lse = Tensor::Empty({p.n}, DType::kF32);
  float* lse = r.lse.data<float>();
  std::vector<double> row_loss(p.n, 0.0);
  const Kernels& k = GetKernels();
  const float eps = o.label_smoothing;
  const float inv_v = 1.0f / static_cast<float>(p.v);
#pragma omp parallel if (p.n * p.v > detail::kParallelGrain && p.n > 1)
  {
    alignas(64) float buf[kBlock];
#pragma omp for schedule(static)
    for (int64_t i = 0; i < p.n; ++i) {
      const T* row = x + i * p.v;
      float m = -std::numeric_limits<float>::infinity();
      double s = 0, sx = 0;
      for (int64_t j0 = 0; j0 < p.v; j0 += kBlock) {
        int64_t len = std::min(kBlock, p.v - j0);
        const float* blk;
        if constexpr (std::is_same_v<T, float>) {
          blk = row + j0;
        } else {
          LoadF32(row + j0, buf, len);
          blk = buf;
        }
        float bm = k.block_max(blk, len);
        if (bm > m) {
          s *= std::exp(static_cast<double>(m) - bm);
          m = bm;
        }
        auto [bs, bx] = k.block_exp_sum(blk, len, m);
        s += bs;
        sx += bx;
      }
      double l = m + std::log(s);
      lse[i] = static_cast<float>(l);
      int64_t t = p.targets[i];
      if (t != o.ignore_index) {
        row_loss[i] = l - (1.0 - eps) * ToF32(row[t]) - static_cast<double>(eps) * inv_v * sx;
      }
    }
  }
  double total = 0;
  for (int64_t i = 0; i < p.n; ++i) {
    if (p.targets[i] == o.ignore_index) continue;
    ++r.count;
    total += row_loss[i];
  }
  r.loss = Tensor::Scalar(r.count > 0 ? total / static_cast<double>(r.count) : 0.0);
  return r;
}

template <typename T>
void BackwardOptimized(const T* x, const float* lse, const Problem& p, const CrossEntropyOptions& o, double scale,
                       T* gx) {
  const Kernels& k = GetKernels();
  const float eps = o.label_smoothing;
  const float bias = eps / static_cast<float>(p.v);
  const float fscale = static_cast<float>(scale);
  // Stream fp32 gradients that are much bigger than the last-level cache.
  const bool stream = std::is_same_v<T, float> && p.n * p.v * sizeof(float) > (32u << 20);
#pragma omp parallel if (p.n * p.v > detail::kParallelGrain && p.n > 1)
  {
    alignas(64) float in[kBlock];
    alignas(64) float out[kBlock];
#pragma omp for schedule(static)
    for (int64_t i = 0; i < p.n; ++i) {
      const T* row = x + i * p.v;
      T* grow = gx + i * p.v;
      int64_t t = p.targets[i];
      if (t == o.ignore_index) {
        std::memset(static_cast<void*>(grow), 0, sizeof(T) * p.v);
        continue;
      }
      for (int64_t j0 = 0; j0 < p.v; j0 += kBlock) {
        int64_t len = std::min(kBlock, p.v - j0);
        const float* src;
        if constexpr (std::is_same_v<T, float>) {
          src = row + j0;
        } else {
          LoadF32(row + j0, in, len);
          src = in;
        }
        float* dst = std::is_same_v<T, float> ? reinterpret_cast<float*>(grow + j0) : out;
        k.exp_scale(src, len, lse[i], bias, fscale, dst, stream);
        if (stream) _mm_sfence();
        if (t >= j0 && t < j0 + len) dst[t - j0] -= (1.0f - eps) * fscale;
        if constexpr (!std::is_same_v<T, float>) StoreF32(out, grow + j0, len);
      }
    }
  }
}

}  // namespace

CrossEntropyResult CrossEntropy(const Tensor& logits_in, const Tensor& targets_in, const CrossEntropyOptions& options) {
  Problem p;
  Tensor logits = logits_in.defined() ? logits_in.Contiguous() : logits_in;
  Tensor targets = targets_in.defined() ? targets_in.Contiguous() : targets_in;
  Validate(logits, targets, options, p);
  return DispatchFloating(logits.dtype(), [&]<typename T>() {
    const T* x = logits.data<T>();
    return UseReference() ? ForwardReference(x, p, options) : ForwardOptimized(x, p, options);
  });
}

Tensor CrossEntropyBackward(const Tensor& grad_loss, const Tensor& logits_in, const Tensor& targets_in,
                            const CrossEntropyResult& fwd, const CrossEntropyOptions& options) {
  Problem p;
  Tensor logits = logits_in.defined() ? logits_in.Contiguous() : logits_in;
  Tensor targets = targets_in.defined() ? targets_in.Contiguous() : targets_in;
  Validate(logits, targets, options, p);
  TESSERA_OP_CHECK(grad_loss.defined() && grad_loss.numel() == 1 && IsFloating(grad_loss.dtype()),
                   "cross_entropy backward: grad_loss must be a floating scalar, got {}",
                   grad_loss.defined() ? ShapeString(grad_loss.shape()) : std::string("undefined"));
  TESSERA_OP_CHECK(fwd.lse.defined() && fwd.lse.dtype() == DType::kF32 && fwd.lse.shape() == Shape{p.n},
                   "cross_entropy backward: forward lse must be fp32 [{}], got {}", p.n,
                   fwd.lse.defined() ? ShapeString(fwd.lse.shape()) : std::string("undefined"));
  int64_t count = 0;
  for (int64_t i = 0; i < p.n; ++i) count += p.targets[i] != options.ignore_index;
  Tensor grad = Tensor::Empty(logits.shape(), logits.dtype());
  Tensor lse_t = fwd.lse.Contiguous();
  const float* lse = lse_t.data<float>();
  const double scale = count > 0 ? grad_loss.Item() / static_cast<double>(count) : 0.0;
  DispatchFloating(logits.dtype(), [&]<typename T>() {
    const T* x = logits.data<T>();
    T* gx = grad.data<T>();
    if (UseReference()) {
      BackwardReference(x, lse, p, options, scale, gx);
    } else {
      BackwardOptimized(x, lse, p, options, scale, gx);
    }
  });
  return grad;
}

}  // namespace tessera::ops
