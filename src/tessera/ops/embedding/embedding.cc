#include "tessera/ops/embedding/embedding.h"

#include <omp.h>

#include <cstring>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {

const int64_t* CheckIds(const Tensor& ids, int64_t v, std::string_view op, std::vector<int64_t>& storage) {
  TESSERA_OP_CHECK(ids.defined() && detail::IsIndexType(ids.dtype()), "{}: ids must be int64 or int32, got {}", op,
                   ids.defined() ? DTypeName(ids.dtype()) : std::string_view("undefined"));
  const int64_t* p = detail::IndexData(ids, storage);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    TESSERA_OP_CHECK(p[i] >= 0 && p[i] < v, "{}: id {} at flat position {} of ids {} is outside [0, {})", op, p[i], i,
                     ShapeString(ids.shape()), v);
  }
  return p;
}

// Stable counting sort of positions by id: positions of id r are
// order[start[r] .. start[r + 1]) in increasing position order.
void BucketById(const int64_t* ids, int64_t n, int64_t v, std::vector<int64_t>& start, std::vector<int64_t>& order) {
  start.assign(v + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++start[ids[i] + 1];
  for (int64_t r = 0; r < v; ++r) start[r + 1] += start[r];
  order.resize(n);
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[fill[ids[i]]++] = i;
}

// Zeroes `bytes` at p, with streaming stores for the aligned middle part.
void ZeroRow(void* p, size_t bytes, bool stream) {
  char* c = static_cast<char*>(p);
  if (!stream) {
    std::memset(c, 0, bytes);
    return;
  }
  size_t head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(c) % 32) % 32);
  std::memset(c, 0, head);
  size_t i = head;
  const __m256i zero = _mm256_setzero_si256();
  for (; i + 32 <= bytes; i += 32) _mm256_stream_si256(reinterpret_cast<__m256i*>(c + i), zero);
  std::memset(c + i, 0, bytes - i);
}

}  // namespace

Tensor Embedding(const Tensor& weight_in, const Tensor& ids_in) {
  TESSERA_OP_CHECK(weight_in.defined() && weight_in.dim() == 2,
                   "embedding: weight must be a [V, D] tensor, got {}",
                   weight_in.defined() ? ShapeString(weight_in.shape()) : std::string("undefined"));
  Tensor weight = weight_in.Contiguous();
  Tensor ids = ids_in.defined() ? ids_in.Contiguous() : ids_in;
  const int64_t v = weight.size(0), d = weight.size(1);
  std::vector<int64_t> storage;
  const int64_t* id = CheckIds(ids, v, "embedding", storage);
  Shape out_shape = ids.shape();
  out_shape.push_back(d);
  Tensor out = Tensor::Empty(out_shape, weight.dtype());
  const int64_t n = ids.numel();
  const size_t row_bytes = static_cast<size_t>(d) * DTypeSize(weight.dtype());
  const char* w = static_cast<const char*>(weight.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  if (UseReference()) {
    for (int64_t i = 0; i < n; ++i) {
      for (size_t b = 0; b < row_bytes; ++b) o[i * row_bytes + b] = w[id[i] * row_bytes + b];
    }
    return out;
  }
#pragma omp parallel for schedule(static) if (n * d > 4 * detail::kParallelGrain)
  for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * row_bytes, w + id[i] * row_bytes, row_bytes);
  return out;
}

Tensor EmbeddingBackward(const Tensor& grad_out_in, const Tensor& ids_in, const Shape& weight_shape,
                         DType weight_dtype) {
  TESSERA_OP_CHECK(weight_shape.size() == 2 && IsFloating(weight_dtype),
                   "embedding backward: weight must be a floating [V, D] tensor, got {} {}", DTypeName(weight_dtype),
                   ShapeString(weight_shape));
  const int64_t v = weight_shape[0], d = weight_shape[1];
  Tensor ids = ids_in.defined() ? ids_in.Contiguous() : ids_in;
  std::vector<int64_t> storage;
  const int64_t* id = CheckIds(ids, v, "embedding backward", storage);
  Shape expect = ids.shape();
  expect.push_back(d);
  TESSERA_OP_CHECK(grad_out_in.defined() && IsFloating(grad_out_in.dtype()) && grad_out_in.shape() == expect,
                   "embedding backward: grad_out must be floating {} (ids {} x D {}), got {}", ShapeString(expect),
                   ShapeString(ids.shape()), d,
                   grad_out_in.defined() ? ShapeString(grad_out_in.shape()) : std::string("undefined"));
  Tensor grad_out = grad_out_in.Contiguous();
  const int64_t n = ids.numel();
  Tensor grad = Tensor::Empty(weight_shape, weight_dtype);
  DispatchFloating(grad_out.dtype(), [&]<typename G>() {
    const G* g = grad_out.data<G>();
    DispatchFloating(weight_dtype, [&]<typename W>() {
      W* out = grad.data<W>();
      if (UseReference()) {
        // fp32 accumulator, rows added in position order.
        std::vector<float> acc(static_cast<size_t>(v * d), 0.0f);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t c = 0; c < d; ++c) acc[id[i] * d + c] += ToF32(g[i * d + c]);
        }
        for (int64_t e = 0; e < v * d; ++e) out[e] = FromF32<W>(acc[e]);
        return;
      }
      // Each output row sums its positions in increasing order (same order as
      // the reference, so results are bitwise independent of threads).
      std::vector<int64_t> start, order;
      BucketById(id, n, v, start, order);
      // Most rows of a big vocabulary are untouched: write their zeros with
      // non-temporal stores once the gradient is past the last-level cache.
      const bool stream = static_cast<size_t>(v * d) * sizeof(W) > (32u << 20);
#pragma omp parallel if ((v + n) * d > 4 * detail::kParallelGrain)
      {
        std::vector<float> acc(d), row(d);
#pragma omp for schedule(dynamic, 64) nowait
        for (int64_t r = 0; r < v; ++r) {
          W* dst = out + r * d;
          if (start[r] == start[r + 1]) {
            ZeroRow(dst, d * sizeof(W), stream);
            continue;
          }
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t q = start[r]; q < start[r + 1]; ++q) {
            const G* src = g + order[q] * d;
            if constexpr (std::is_same_v<G, float>) {
              for (int64_t c = 0; c < d; ++c) acc[c] += src[c];
            } else {
              detail::LoadF32(src, row.data(), d);
              for (int64_t c = 0; c < d; ++c) acc[c] += row[c];
            }
          }
          detail::StoreF32(acc.data(), dst, d);
        }
        if (stream) _mm_sfence();  // before the region's closing barrier publishes the rows
      }
    });
  });
  return grad;
}

}  // namespace tessera::ops
