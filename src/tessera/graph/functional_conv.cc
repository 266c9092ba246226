// Differentiable 2-d convolution (graph::Conv2d of functional_cnn.h): runs
// ops::Conv2d and records a backward that asks ops::Conv2dBackward only for
// the gradients of inputs that require one (x, w, bias).
#include "tessera/graph/functional_cnn.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {

Tensor Conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::Conv2dOptions& options) {
  Tensor y = ops::Conv2d(x, w, bias, options);
  if (ShouldRecord({x, w, bias})) {
    Record("Conv2d", {x, w, bias}, {y},
           [x, w, options](const std::vector<Tensor>& g, const std::vector<bool>& needs) {
             ops::Conv2dGrads gr = ops::Conv2dBackward(g[0], x, w, options, needs[0], needs[1], needs[2]);
             return std::vector<Tensor>{gr.grad_x, gr.grad_w, gr.grad_bias};
           });
  }
  return y;
}

}  // namespace tessera::graph
