#include "tessera/ops/rope/rope.h"

#include <omp.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {

// cos/sin of p·base^(-2i/dh) for positions [start, start + positions) and
// i < dh/2, computed in double and stored as fp32, row-major [position][i].
struct RopeTable {
  int64_t start = 0;
  int64_t positions = 0;
  std::vector<float> cos, sin;
};

// Tables cover positions from 0 up to this bound; farther positions (long
// decoding offsets) get a table of their own range, not cached.
constexpr int64_t kMaxCachedPositions = 1 << 16;

double InvFreq(double base, int64_t i, int64_t dh) {
  return std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dh));
}

std::shared_ptr<const RopeTable> BuildTable(float base, int64_t dh, int64_t start, int64_t positions) {
  auto table = std::make_shared<RopeTable>();
  table->start = start;
  table->positions = positions;
  const int64_t half = dh / 2;
  table->cos.resize(positions * half);
  table->sin.resize(positions * half);
  for (int64_t i = 0; i < half; ++i) {
    double f = InvFreq(base, i, dh);
    for (int64_t p = 0; p < positions; ++p) {
      double a = static_cast<double>(start + p) * f;
      table->cos[p * half + i] = static_cast<float>(std::cos(a));
      table->sin[p * half + i] = static_cast<float>(std::sin(a));
    }
  }
  return table;
}

// A table covering [offset, offset + count). Process-wide cache keyed by
// (base, dh) for positions below kMaxCachedPositions; grows (doubling) when
// a longer sequence needs more. Callers keep the shared_ptr they got, so a
// concurrent regrow never frees a table in use.
std::shared_ptr<const RopeTable> GetTable(float base, int64_t dh, int64_t offset, int64_t count) {
  if (offset + count > kMaxCachedPositions) return BuildTable(base, dh, offset, count);
  static std::mutex mu;
  static std::map<std::pair<float, int64_t>, std::shared_ptr<const RopeTable>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{base, dh}];
  const int64_t need = offset + count;
  if (slot && slot->positions >= need) return slot;
  const int64_t grown = std::min(kMaxCachedPositions, std::max<int64_t>(need, slot ? 2 * slot->positions : 256));
  slot = BuildTable(base, dh, 0, grown);
  return slot;
}

// Rotates every [Dh] row of x by +angle (sign = 1) or -angle (sign = -1).
Tensor Rotate(const Tensor& x_in, float base, int64_t offset, double sign, const char* op) {
  TESSERA_OP_CHECK(x_in.defined() && x_in.dim() == 4 && IsFloating(x_in.dtype()),
                   "{}: input must be a floating [B, H, T, Dh] tensor, got {} {}", op,
                   x_in.defined() ? DTypeName(x_in.dtype()) : std::string_view("undefined"),
                   x_in.defined() ? ShapeString(x_in.shape()) : std::string("[]"));
  TESSERA_OP_CHECK(x_in.size(3) % 2 == 0, "{}: head dim Dh must be even, got {} (input {})", op, x_in.size(3),
                   ShapeString(x_in.shape()));
  TESSERA_OP_CHECK(offset >= 0, "{}: position_offset must be >= 0, got {}", op, offset);
  TESSERA_OP_CHECK(base > 0.0f, "{}: base must be > 0, got {}", op, base);
  Tensor x = x_in.Contiguous();
  Tensor out = Tensor::Empty(x.shape(), x.dtype());
  const int64_t t_len = x.size(2), dh = x.size(3), half = dh / 2;
  const int64_t rows = x.size(0) * x.size(1) * t_len;
  DispatchFloating(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    if (UseReference()) {
      for (int64_t r = 0; r < rows; ++r) {
        double pos = static_cast<double>(offset + r % t_len);
        const T* a = src + r * dh;
        T* o = dst + r * dh;
        for (int64_t i = 0; i < half; ++i) {
          double ang = pos * InvFreq(base, i, dh);
          double c = static_cast<float>(std::cos(ang)), s = sign * static_cast<float>(std::sin(ang));
          double x0 = ToF32(a[i]), x1 = ToF32(a[i + half]);
          o[i] = FromF32<T>(static_cast<float>(x0 * c - x1 * s));
          o[i + half] = FromF32<T>(static_cast<float>(x1 * c + x0 * s));
        }
      }
      return;
    }
    std::shared_ptr<const RopeTable> table = GetTable(base, dh, offset, t_len);
    const float fsign = static_cast<float>(sign);
#pragma omp parallel if (rows * dh > 4 * detail::kParallelGrain)
    {
      std::vector<float> in(dh), res(dh);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t pos = offset + r % t_len - table->start;
        const float* c = table->cos.data() + pos * half;
        const float* s = table->sin.data() + pos * half;
        const float* a;
        float* o;
        if constexpr (std::is_same_v<T, float>) {
          a = src + r * dh;
          o = dst + r * dh;
        } else {
          detail::LoadF32(src + r * dh, in.data(), dh);
          a = in.data();
          o = res.data();
        }
        for (int64_t i = 0; i < half; ++i) {
          float si = fsign * s[i];
          o[i] = a[i] * c[i] - a[i + half] * si;
          o[i + half] = a[i + half] * c[i] + a[i] * si;
        }
        if constexpr (!std::is_same_v<T, float>) detail::StoreF32(res.data(), dst + r * dh, dh);
      }
    }
  });
  return out;
}

}  // namespace

Tensor Rope(const Tensor& x, float base, int64_t position_offset) {
  return Rotate(x, base, position_offset, 1.0, "rope");
}

Tensor RopeBackward(const Tensor& grad_out, float base, int64_t position_offset) {
  return Rotate(grad_out, base, position_offset, -1.0, "rope backward");
}

}  // namespace tessera::ops
