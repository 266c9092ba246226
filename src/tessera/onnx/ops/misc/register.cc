// The misc family's kernels (see op.h for the list this family covers).
#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {

void RegisterMiscOps(OpRegistry& r) {
  r.Register("Einsum", EinsumKernel);
  r.Register("Det", DetKernel);
  r.Register("DFT", DftKernel);
  r.Register("STFT", StftKernel);
  r.Register("BlackmanWindow", BlackmanWindowKernel);
  r.Register("HammingWindow", HammingWindowKernel);
  r.Register("HannWindow", HannWindowKernel);
  r.Register("MelWeightMatrix", MelWeightMatrixKernel);
  r.Register("NonMaxSuppression", NonMaxSuppressionKernel);
  r.Register("StringNormalizer", StringNormalizerKernel);
  r.Register("TfIdfVectorizer", TfIdfVectorizerKernel);
  const std::string training = "ai.onnx.preview.training";
  r.Register("Adagrad", AdagradKernel, training);
  r.Register("Adam", AdamKernel, training);
  r.Register("Momentum", MomentumKernel, training);
}

}  // namespace tessera::onnx
