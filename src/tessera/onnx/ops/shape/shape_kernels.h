// Kernel entry points of the shape family (registered in register.cc) and the
// transpose helper that DepthToSpace / SpaceToDepth reuse.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/onnx/op.h"

namespace tessera::onnx {

// reshape.cc
Status ReshapeKernel(OpContext& ctx);
Status ShapeKernel(OpContext& ctx);
Status SizeKernel(OpContext& ctx);
Status FlattenKernel(OpContext& ctx);
Status SqueezeKernel(OpContext& ctx);
Status UnsqueezeKernel(OpContext& ctx);
Status IdentityKernel(OpContext& ctx);
// expand.cc
Status ExpandKernel(OpContext& ctx);
Status ConstantOfShapeKernel(OpContext& ctx);
Status TileKernel(OpContext& ctx);
// transpose.cc
Status TransposeKernel(OpContext& ctx);
Status DepthToSpaceKernel(OpContext& ctx);
Status SpaceToDepthKernel(OpContext& ctx);
// concat_split.cc
Status ConcatKernel(OpContext& ctx);
Status SplitKernel(OpContext& ctx);
// slice.cc
Status SliceKernel(OpContext& ctx);
// pad.cc
Status PadKernel(OpContext& ctx);

// `a` with its axes permuted: out.dim(i) = a.dim(perm[i]); perm must be a valid permutation.
Array TransposeArray(const Array& a, const std::vector<int64_t>& perm);

}  // namespace tessera::onnx
