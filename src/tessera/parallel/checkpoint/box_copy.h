// N-d boxes of row-major arrays: intersection and copy. A checkpoint stores
// each global tensor as slices (boxes); reading any other box (resharding)
// copies the intersection of every overlapping stored slice. Pure functions,
// thread-safe; callers guarantee the boxes lie inside their arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tessera::parallel::checkpoint {

// The box [offset, offset + shape) of an n-d index space.
struct Box {
  std::vector<int64_t> offset;
  std::vector<int64_t> shape;
};

// The common part of two boxes of the same rank, or nullopt when it holds no
// element. Two 0-d boxes (scalars) intersect in the 0-d box.
std::optional<Box> IntersectBoxes(const Box& a, const Box& b);

// Whether `inner` lies inside the array [0, shape) (offsets >= 0, ends <= shape).
bool BoxInside(const Box& inner, std::span<const int64_t> shape);

// Copies the `extent` elements at `src_start` of a row-major `src` array of
// `src_shape` to `dst_start` of a row-major `dst` array of `dst_shape`.
// Innermost dims that both arrays hold whole are copied as one run.
void CopyBox(const std::byte* src, std::span<const int64_t> src_shape, std::span<const int64_t> src_start,
             std::byte* dst, std::span<const int64_t> dst_shape, std::span<const int64_t> dst_start,
             std::span<const int64_t> extent, size_t element_size);

}  // namespace tessera::parallel::checkpoint
