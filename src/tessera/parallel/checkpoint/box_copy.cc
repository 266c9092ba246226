#include "tessera/parallel/checkpoint/box_copy.h"

#include <algorithm>
#include <cstring>

#include "tessera/base/check.h"

namespace tessera::parallel::checkpoint {

std::optional<Box> IntersectBoxes(const Box& a, const Box& b) {
  TESSERA_CHECK(a.offset.size() == b.offset.size(), "boxes of rank {} and {}", a.offset.size(), b.offset.size());
  Box common;
  for (size_t d = 0; d < a.offset.size(); ++d) {
    const int64_t lo = std::max(a.offset[d], b.offset[d]);
    const int64_t hi = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    if (hi <= lo) return std::nullopt;
    common.offset.push_back(lo);
    common.shape.push_back(hi - lo);
  }
  return common;
}

bool BoxInside(const Box& inner, std::span<const int64_t> shape) {
  if (inner.offset.size() != shape.size() || inner.shape.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (inner.offset[d] < 0 || inner.shape[d] < 0 || inner.offset[d] > shape[d] ||
        inner.shape[d] > shape[d] - inner.offset[d]) {
      return false;
    }
  }
  return true;
}

void CopyBox(const std::byte* src, std::span<const int64_t> src_shape, std::span<const int64_t> src_start,
             std::byte* dst, std::span<const int64_t> dst_shape, std::span<const int64_t> dst_start,
             std::span<const int64_t> extent, size_t element_size) {
  const size_t rank = extent.size();
  TESSERA_DCHECK(src_shape.size() == rank && src_start.size() == rank && dst_shape.size() == rank &&
                 dst_start.size() == rank);
  if (std::any_of(extent.begin(), extent.end(), [](int64_t e) { return e == 0; })) return;
  if (rank == 0) {
    std::memcpy(dst, src, element_size);
    return;
  }
  // Dims [inner, rank) form one contiguous run in both arrays.
  size_t inner = rank - 1;
  while (inner > 0 && extent[inner] == src_shape[inner] && extent[inner] == dst_shape[inner]) --inner;
  int64_t run = 1;
  for (size_t d = inner; d < rank; ++d) run *= extent[d];
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * src_shape[d];
    dst_stride[d - 1] = dst_stride[d] * dst_shape[d];
  }
  const size_t run_bytes = static_cast<size_t>(run) * element_size;
  std::vector<int64_t> index(inner, 0);  // odometer over the outer dims [0, inner)
  while (true) {
    int64_t s = src_start[inner] * src_stride[inner], t = dst_start[inner] * dst_stride[inner];
    for (size_t d = 0; d < inner; ++d) {
      s += (src_start[d] + index[d]) * src_stride[d];
      t += (dst_start[d] + index[d]) * dst_stride[d];
    }
    std::memcpy(dst + static_cast<size_t>(t) * element_size, src + static_cast<size_t>(s) * element_size, run_bytes);
    size_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < extent[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

}  // namespace tessera::parallel::checkpoint
