// Helpers shared by the control family's kernels (If / Loop / Scan,
// sequences, optionals): slicing a tensor along an axis, stacking and
// concatenating tensors, and copying runs of elements of any element type.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx::control {

// Copies n elements (flat indices) from src[src_off..] to dst[dst_off..]; the
// types must match (strings included).
void CopyElems(const Array& src, int64_t src_off, Array& dst, int64_t dst_off, int64_t n);

// The sub-tensor of `a` at `index` along `axis` (that axis removed).
// The caller checks 0 <= axis < rank and 0 <= index < dim(axis).
Array SliceAxis(const Array& a, int64_t axis, int64_t index);

// Stacks equally shaped, equally typed tensors along a new axis `axis`
// (0 <= axis <= rank of the items). `what` names the items in errors.
StatusOr<Array> Stack(const OpContext& ctx, const std::vector<Array>& items, int64_t axis, const char* what);

// Concatenates tensors along existing axis `axis` (0 <= axis < rank).
StatusOr<Array> ConcatAxis(const OpContext& ctx, const std::vector<Array>& items, int64_t axis, const char* what);

// A tensor with zero entries along a new leading axis, shaped after a graph
// output's declared type (unknown dims read as 0, unknown type as float).
Array EmptyStacked(const ValueInfo& info);

// Input i as a boolean condition (a one-element bool or numeric tensor).
StatusOr<bool> CondInput(const OpContext& ctx, size_t i);

// Kernels (one per op type), registered in register.cc.
Status ConstantKernel(OpContext& ctx);
Status IfKernel(OpContext& ctx);
Status LoopKernel(OpContext& ctx);
Status ScanKernel(OpContext& ctx);
Status SequenceEmptyKernel(OpContext& ctx);
Status SequenceConstructKernel(OpContext& ctx);
Status SequenceInsertKernel(OpContext& ctx);
Status SequenceAtKernel(OpContext& ctx);
Status SequenceEraseKernel(OpContext& ctx);
Status SequenceLengthKernel(OpContext& ctx);
Status SplitToSequenceKernel(OpContext& ctx);
Status ConcatFromSequenceKernel(OpContext& ctx);
Status SequenceMapKernel(OpContext& ctx);
Status OptionalKernel(OpContext& ctx);
Status OptionalHasElementKernel(OpContext& ctx);
Status OptionalGetElementKernel(OpContext& ctx);

}  // namespace tessera::onnx::control
