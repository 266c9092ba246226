// The index family's kernels (see op.h for the list this family covers).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/index/index_kernels.h"

namespace tessera::onnx {

void RegisterIndexOps(OpRegistry& r) {
  r.Register("Gather", GatherKernel);
  r.Register("GatherElements", GatherElementsKernel);
  r.Register("GatherND", GatherNDKernel);
  r.Register("Scatter", ScatterElementsKernel);
  r.Register("ScatterElements", ScatterElementsKernel);
  r.Register("ScatterND", ScatterNDKernel);
  r.Register("OneHot", OneHotKernel);
  r.Register("NonZero", NonZeroKernel);
  r.Register("Compress", CompressKernel);
  r.Register("Trilu", TriluKernel);
  r.Register("Unique", UniqueKernel);
  r.Register("Range", RangeKernel);
  r.Register("EyeLike", EyeLikeKernel);
  r.Register("ReverseSequence", ReverseSequenceKernel);
}

}  // namespace tessera::onnx
