// Helpers shared by the shape and index families: type-agnostic element
// copies (numeric bytes or strings), gathers through flat index maps, and
// integer-list inputs read from either an attribute or an input (by opset).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx {

// Copies n elements src[si..si+n) to dst[di..di+n); both arrays have the same element type.
void CopyElems(const Array& src, int64_t si, Array& dst, int64_t di, int64_t n);

// An array of `shape` (src's element type) with out[k] = src[idx[k]]; idx has Numel(shape) entries, all in range.
Array GatherFlat(const Array& src, const std::vector<int64_t>& shape, const std::vector<int64_t>& idx);

// Integer list from input `i` when present (opset >= input_since), else from attribute `attr`.
// `present` reports whether either was given.
StatusOr<std::vector<int64_t>> IntsInputOrAttr(const OpContext& ctx, size_t i, const std::string& attr,
                                               int64_t input_since, bool* present = nullptr);

// Normalizes each axis of `axes` against `rank` and rejects duplicates.
StatusOr<std::vector<int64_t>> NormalizeAxes(const OpContext& ctx, const std::vector<int64_t>& axes, int64_t rank);

// Checks that every dim is >= 0 and the element count fits memory limits (returns the count).
StatusOr<int64_t> CheckShape(const OpContext& ctx, const std::vector<int64_t>& shape);

// Row-major multi-index increment over `shape`; returns false after the last index.
inline bool NextIndex(std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

}  // namespace tessera::onnx
