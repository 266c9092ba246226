// Dropout with a counter-based (Philox-4x32-10) mask. The reference calls
// UniformAt per element; the optimized kernel evaluates the same Philox
// rounds for a whole chunk of counters at once (the loop vectorizes: 32x32
// -> 64-bit products map to vpmuludq), so both produce bit-identical masks,
// for any chunking and any thread count.
#include "tessera/ops/dropout/dropout.h"

#include <algorithm>
#include <cmath>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops {
namespace {

// Uniform in [0, 1) for stream element `index`: exactly UniformAt(seed, index).
TESSERA_ALWAYS_INLINE float PhiloxUniform(uint64_t seed, uint64_t index) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return static_cast<float>(c0 >> 8) * (1.0f / 16777216.0f);
}

// y[i] = UniformAt(seed, first + i) >= p ? x[i] * scale : 0.
TESSERA_MULTIVERSION void DropoutF32(const float* __restrict x, uint64_t seed, uint64_t first, float p, float scale,
                                     float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float u = PhiloxUniform(seed, first + static_cast<uint64_t>(i));
    y[i] = u >= p ? x[i] * scale : 0.0f;
  }
}

Tensor Apply(const char* op, const Tensor& x_in, float p, uint64_t seed, uint64_t offset) {
  TESSERA_OP_CHECK(x_in.defined() && IsFloating(x_in.dtype()), "{}: input must be a floating tensor, got {}", op,
                   x_in.defined() ? DTypeName(x_in.dtype()) : "undefined");
  TESSERA_OP_CHECK(p >= 0.0f && p <= 1.0f, "{}: p must be in [0, 1], got {} (input {} {})", op, p,
                   DTypeName(x_in.dtype()), ShapeString(x_in.shape()));
  Tensor x = x_in.Contiguous();
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const int64_t n = x.numel();
  Tensor y = Tensor::Empty(x.shape(), x.dtype());
  if (UseReference()) {
    std::vector<float> v = x.ToFloatVector();
    for (int64_t i = 0; i < n; ++i) {
      v[i] = UniformAt(seed, offset + static_cast<uint64_t>(i)) >= p ? v[i] * scale : 0.0f;
    }
    y.CopyFrom(Tensor::FromVector(v, x.shape()));
    return y;
  }
  if (p == 0.0f) {
    y.CopyFrom(x);
    return y;
  }
  const DType dt = x.dtype();
  const void* xp = x.raw_data();
  void* yp = y.raw_data();
  kern::ParallelFor((n + kern::kChunk - 1) / kern::kChunk, n, kern::kParallelComputeBound, [&](int64_t t) {
    const int64_t start = t * kern::kChunk, len = std::min(kern::kChunk, n - start);
    const float* xf = kern::AsF32(dt, kern::ElemPtr(xp, dt, start), len, 0);
    void* dst = kern::ElemPtr(yp, dt, start);
    float* yf = kern::OutF32(dt, dst, len, 1);
    DropoutF32(xf, seed, offset + static_cast<uint64_t>(start), p, scale, yf, len);
    kern::FinishF32(dt, yf, dst, len);
  });
  return y;
}

}  // namespace

Tensor Dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset) {
  return Apply("dropout", x, p, seed, offset);
}

Tensor DropoutBackward(const Tensor& grad_out, float p, uint64_t seed, uint64_t offset) {
  return Apply("dropout backward", grad_out, p, seed, offset);
}

}  // namespace tessera::ops
