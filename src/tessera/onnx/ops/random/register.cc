// The random family's kernels (see op.h for the list this family covers).
#include "tessera/onnx/ops/random/random_kernels.h"

namespace tessera::onnx {

void RegisterRandomOps(OpRegistry& r) {
  r.Register("RandomUniform", RandomUniformKernel);
  r.Register("RandomNormal", RandomNormalKernel);
  r.Register("RandomUniformLike", RandomUniformLikeKernel);
  r.Register("RandomNormalLike", RandomNormalLikeKernel);
  r.Register("Bernoulli", BernoulliKernel);
  r.Register("Multinomial", MultinomialKernel);
}

}  // namespace tessera::onnx
