// The shape family's kernels (see op.h for the list this family covers).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"

namespace tessera::onnx {

void RegisterShapeOps(OpRegistry& r) {
  r.Register("Reshape", ReshapeKernel);
  r.Register("Shape", ShapeKernel);
  r.Register("Size", SizeKernel);
  r.Register("Flatten", FlattenKernel);
  r.Register("Squeeze", SqueezeKernel);
  r.Register("Unsqueeze", UnsqueezeKernel);
  r.Register("Identity", IdentityKernel);
  r.Register("Expand", ExpandKernel);
  r.Register("ConstantOfShape", ConstantOfShapeKernel);
  r.Register("Tile", TileKernel);
  r.Register("Transpose", TransposeKernel);
  r.Register("DepthToSpace", DepthToSpaceKernel);
  r.Register("SpaceToDepth", SpaceToDepthKernel);
  r.Register("Concat", ConcatKernel);
  r.Register("Split", SplitKernel);
  r.Register("Slice", SliceKernel);
  r.Register("Pad", PadKernel);
}

}  // namespace tessera::onnx
