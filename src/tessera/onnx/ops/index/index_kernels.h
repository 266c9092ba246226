// Kernel entry points of the index family (registered in register.cc) and
// the index checks they share.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/onnx/op.h"

namespace tessera::onnx {

// gather.cc
Status GatherKernel(OpContext& ctx);
Status GatherElementsKernel(OpContext& ctx);
Status GatherNDKernel(OpContext& ctx);
// scatter.cc
Status ScatterElementsKernel(OpContext& ctx);  // also Scatter (opset 9-10)
Status ScatterNDKernel(OpContext& ctx);
// select.cc
Status OneHotKernel(OpContext& ctx);
Status NonZeroKernel(OpContext& ctx);
Status CompressKernel(OpContext& ctx);
Status TriluKernel(OpContext& ctx);
// unique.cc
Status UniqueKernel(OpContext& ctx);
// generate.cc
Status RangeKernel(OpContext& ctx);
Status EyeLikeKernel(OpContext& ctx);
Status ReverseSequenceKernel(OpContext& ctx);

// An index into an axis of size `dim` (negative counts from the end); errors when out of range.
StatusOr<int64_t> CheckIndex(const OpContext& ctx, int64_t i, int64_t dim);

// GatherElements / ScatterElements: for each element of `ind` (same rank as
// `data`, no larger off `axis`), the flat offset into `data` that its index
// selects along `axis` (the node's "axis" attribute); `axis` is set to it.
StatusOr<std::vector<int64_t>> ElementOffsets(const OpContext& ctx, const Array& data, const Array& ind, size_t* axis);

}  // namespace tessera::onnx
