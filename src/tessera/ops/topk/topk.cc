#include "tessera/ops/topk/topk.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {

// Total order used by top-k: NaN above every number, larger values first,
// ties (and NaN vs NaN) broken by the lower index.
struct Before {
  const float* v;
  bool operator()(int64_t a, int64_t b) const {
    bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na != nb) return na;
    if (!na && v[a] != v[b]) return v[a] > v[b];
    return a < b;
  }
};

// Up to this k the optimized path selects by insertion in one pass.
constexpr int64_t kInsertionK = 16;

// The same order as Before packed in one integer (larger = earlier): the
// float's bits made monotone (NaN above +inf) in the high word, the
// complemented index (lower index wins ties) in the low word.
inline uint64_t SortKey(float v, int64_t index) {
  uint32_t u = FloatBits(v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  if (std::isnan(v)) u = 0xffffffffu;
  return (static_cast<uint64_t>(u) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(index));
}
inline int64_t KeyIndex(uint64_t key) { return static_cast<uint32_t>(~static_cast<uint32_t>(key)); }

}  // namespace

TopKResult TopK(const Tensor& x_in, int64_t k) {
  TESSERA_OP_CHECK(x_in.defined() && x_in.dim() >= 1 && IsFloating(x_in.dtype()),
                   "topk: input must be a floating tensor of rank >= 1, got {} {}",
                   x_in.defined() ? DTypeName(x_in.dtype()) : std::string_view("undefined"),
                   x_in.defined() ? ShapeString(x_in.shape()) : std::string("[]"));
  const int64_t n = x_in.size(-1);
  TESSERA_OP_CHECK(k >= 0 && k <= n, "topk: k = {} must be in [0, {}] (last axis of input {})", k, n,
                   ShapeString(x_in.shape()));
  Tensor x = x_in.Contiguous();
  Shape out_shape = x.shape();
  out_shape.back() = k;
  TopKResult r;
  r.values = Tensor::Empty(out_shape, x.dtype());
  r.indices = Tensor::Empty(out_shape, DType::kI64);
  const int64_t rows = n > 0 ? x.numel() / n : NumElements(out_shape) / std::max<int64_t>(k, 1);
  TESSERA_OP_CHECK(n < (int64_t{1} << 32), "topk: last axis of input {} is too long (2^32 elements or more)",
                   ShapeString(x_in.shape()));
  if (k == 0 || rows == 0) return r;
  int64_t* idx = r.indices.data<int64_t>();
  DispatchFloating(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* val = r.values.data<T>();
    if (UseReference()) {
      std::vector<float> row(n);
      std::vector<int64_t> order(n);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < n; ++j) row[j] = ToF32(src[i * n + j]);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), Before{row.data()});
        for (int64_t j = 0; j < k; ++j) {
          idx[i * k + j] = order[j];
          val[i * k + j] = src[i * n + order[j]];
        }
      }
      return;
    }
#pragma omp parallel if (rows * n > detail::kParallelGrain && rows > 1)
    {
      std::vector<float> row(n);
      std::vector<uint64_t> keys(n);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < rows; ++i) {
        detail::LoadF32(src + i * n, row.data(), n);
        for (int64_t j = 0; j < n; ++j) keys[j] = SortKey(row[j], j);
        uint64_t* best = keys.data();  // the k best end up in keys[0..k)
        if (k <= kInsertionK) {
          // One pass keeping the best k in order; most elements lose the
          // comparison with the current k-th and cost one integer compare.
          uint64_t top[kInsertionK];
          int64_t filled = 0;
          for (int64_t j = 0; j < n; ++j) {
            const uint64_t key = keys[j];
            if (filled == k && key <= top[k - 1]) continue;
            int64_t at = filled < k ? filled++ : k - 1;
            while (at > 0 && key > top[at - 1]) {
              top[at] = top[at - 1];
              --at;
            }
            top[at] = key;
          }
          std::copy(top, top + k, best);
        } else if (k < n) {
          std::partial_sort(keys.begin(), keys.begin() + k, keys.end(), std::greater<uint64_t>());
        } else {
          std::sort(keys.begin(), keys.end(), std::greater<uint64_t>());
        }
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = KeyIndex(best[j]);
          idx[i * k + j] = at;
          val[i * k + j] = src[i * n + at];
        }
      }
    }
  });
  return r;
}

Tensor TopKBackward(const Tensor& grad_values_in, const Tensor& indices_in, const Shape& input_shape) {
  TESSERA_OP_CHECK(grad_values_in.defined() && IsFloating(grad_values_in.dtype()) && indices_in.defined() &&
                       detail::IsIndexType(indices_in.dtype()) && grad_values_in.shape() == indices_in.shape(),
                   "topk backward: grad_values (floating) and indices (int64) must share a shape, got {} and {}",
                   grad_values_in.defined() ? ShapeString(grad_values_in.shape()) : std::string("undefined"),
                   indices_in.defined() ? ShapeString(indices_in.shape()) : std::string("undefined"));
  const Shape& gshape = grad_values_in.shape();
  bool same_prefix = !input_shape.empty() && input_shape.size() == gshape.size() &&
                     std::equal(input_shape.begin(), input_shape.end() - 1, gshape.begin());
  TESSERA_OP_CHECK(same_prefix, "topk backward: input shape {} is incompatible with grad_values {}",
                   ShapeString(input_shape), ShapeString(gshape));
  Tensor grad_values = grad_values_in.Contiguous();
  Tensor indices = indices_in.Contiguous();
  std::vector<int64_t> storage;
  const int64_t* idx = detail::IndexData(indices, storage);
  const int64_t n = input_shape.back(), k = gshape.back();
  for (int64_t e = 0; e < indices.numel(); ++e) {
    TESSERA_OP_CHECK(idx[e] >= 0 && idx[e] < n, "topk backward: index {} at flat position {} is outside [0, {})",
                     idx[e], e, n);
  }
  Tensor grad = Tensor::Zeros(input_shape, grad_values.dtype());
  const int64_t rows = k > 0 ? grad_values.numel() / k : 0;
  DispatchFloating(grad.dtype(), [&]<typename T>() {
    const T* g = grad_values.data<T>();
    T* out = grad.data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        T& dst = out[i * n + idx[i * k + j]];
        dst = FromF32<T>(ToF32(dst) + ToF32(g[i * k + j]));
      }
    }
  });
  return grad;
}

}  // namespace tessera::ops
