#include "tessera/ops/concat/concat.h"

#include <omp.h>

#include <cstring>

#include "tessera/base/error.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {

int CheckAxis(const char* op, int axis, int rank) {
  TESSERA_OP_CHECK(rank >= 1 && axis >= -rank && axis < rank, "{}: axis {} is out of range for rank {}", op, axis,
                   rank);
  return axis < 0 ? axis + rank : axis;
}

// Copies `rows` blocks of `a_bytes` from a (stride a_stride) into b (stride
// b_stride); the optimized path spreads large copies over threads.
void CopyBlocks(const char* a, int64_t a_stride, char* b, int64_t b_stride, int64_t rows, int64_t bytes) {
  if (rows == 0 || bytes == 0) return;
  if (UseReference()) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < bytes; ++i) b[r * b_stride + i] = a[r * a_stride + i];
    }
    return;
  }
  const int64_t total = rows * bytes;
  if (rows == 1) {
    // One long block: split it in byte ranges.
    const int64_t chunk = 1 << 16;
    const int64_t chunks = (bytes + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (total > 32 * detail::kParallelGrain)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t lo = c * chunk, len = std::min(chunk, bytes - lo);
      std::memcpy(b + lo, a + lo, len);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (total > 32 * detail::kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(b + r * b_stride, a + r * a_stride, bytes);
}

}  // namespace

Tensor Concat(const std::vector<Tensor>& xs_in, int axis) {
  TESSERA_OP_CHECK(!xs_in.empty(), "concat: needs at least one input");
  for (size_t i = 0; i < xs_in.size(); ++i) {
    TESSERA_OP_CHECK(xs_in[i].defined(), "concat: input {} is undefined", i);
  }
  const Tensor& first = xs_in[0];
  axis = CheckAxis("concat", axis, first.dim());
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (size_t i = 0; i < xs_in.size(); ++i) {
    const Tensor& x = xs_in[i];
    TESSERA_OP_CHECK(x.dtype() == first.dtype(), "concat: input {} is {} but input 0 is {}", i, DTypeName(x.dtype()),
                     DTypeName(first.dtype()));
    bool ok = x.dim() == first.dim();
    for (int d = 0; ok && d < x.dim(); ++d) ok = d == axis || x.size(d) == first.size(d);
    TESSERA_OP_CHECK(ok, "concat: input {} has shape {}, incompatible with input 0 {} along axis {}", i,
                     ShapeString(x.shape()), ShapeString(first.shape()), axis);
    out_shape[axis] += x.size(axis);
  }
  Tensor out = Tensor::Empty(out_shape, first.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out_shape[d];
  for (int d = axis + 1; d < first.dim(); ++d) inner *= out_shape[d];
  const int64_t es = static_cast<int64_t>(DTypeSize(first.dtype()));
  const int64_t out_row = out_shape[axis] * inner * es;
  char* dst = static_cast<char*>(out.raw_data());
  int64_t at = 0;
  for (const Tensor& x_in : xs_in) {
    Tensor x = x_in.Contiguous();
    const int64_t bytes = x.size(axis) * inner * es;
    CopyBlocks(static_cast<const char*>(x.raw_data()), bytes, dst + at, out_row, outer, bytes);
    at += bytes;
  }
  return out;
}

std::vector<Tensor> Split(const Tensor& x_in, const std::vector<int64_t>& sizes, int axis) {
  TESSERA_OP_CHECK(x_in.defined(), "split: input is undefined");
  axis = CheckAxis("split", axis, x_in.dim());
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    TESSERA_OP_CHECK(sizes[i] >= 0, "split: size {} at position {} is negative", sizes[i], i);
    total += sizes[i];
  }
  TESSERA_OP_CHECK(total == x_in.size(axis), "split: sizes sum to {} but axis {} of input {} has {}", total, axis,
                   ShapeString(x_in.shape()), x_in.size(axis));
  Tensor x = x_in.Contiguous();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.size(d);
  for (int d = axis + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t es = static_cast<int64_t>(DTypeSize(x.dtype()));
  const int64_t in_row = x.size(axis) * inner * es;
  const char* src = static_cast<const char*>(x.raw_data());
  std::vector<Tensor> outs;
  outs.reserve(sizes.size());
  int64_t at = 0;
  for (int64_t s : sizes) {
    Shape shape = x.shape();
    shape[axis] = s;
    Tensor out = Tensor::Empty(shape, x.dtype());
    const int64_t bytes = s * inner * es;
    CopyBlocks(src + at, in_row, static_cast<char*>(out.raw_data()), bytes, outer, bytes);
    at += bytes;
    outs.push_back(std::move(out));
  }
  return outs;
}

}  // namespace tessera::ops
