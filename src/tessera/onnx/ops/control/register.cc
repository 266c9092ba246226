// The control family's kernels: If, Loop, Scan, Constant, sequences and
// optionals (Identity belongs to the shape family).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/control/control_util.h"

namespace tessera::onnx {

void RegisterControlOps(OpRegistry& r) {
  r.Register("Constant", control::ConstantKernel);
  r.Register("If", control::IfKernel);
  r.Register("Loop", control::LoopKernel);
  r.Register("Scan", control::ScanKernel);
  r.Register("SequenceEmpty", control::SequenceEmptyKernel);
  r.Register("SequenceConstruct", control::SequenceConstructKernel);
  r.Register("SequenceInsert", control::SequenceInsertKernel);
  r.Register("SequenceAt", control::SequenceAtKernel);
  r.Register("SequenceErase", control::SequenceEraseKernel);
  r.Register("SequenceLength", control::SequenceLengthKernel);
  r.Register("SplitToSequence", control::SplitToSequenceKernel);
  r.Register("ConcatFromSequence", control::ConcatFromSequenceKernel);
  r.Register("SequenceMap", control::SequenceMapKernel);
  r.Register("Optional", control::OptionalKernel);
  r.Register("OptionalHasElement", control::OptionalHasElementKernel);
  r.Register("OptionalGetElement", control::OptionalGetElementKernel);
}

}  // namespace tessera::onnx
