// Differentiable pooling and batch normalization (graph/functional_cnn.h):
// the ops:: forward, and when ShouldRecord a backward closure built from
// the ops:: backward kernels. MaxPool2d keeps the argmax indices for its
// backward; BatchNorm2d keeps x, gamma and the forward's saved statistics
// (and, with fuse_relu, its output y: the ReLU mask). Running statistics
// are buffers updated in place by the forward, never tape inputs.
#include "tessera/graph/functional_cnn.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Tensor MaxPool2d(const Tensor& x, const ops::Pool2dOptions& options) {
  ops::MaxPool2dResult r = ops::MaxPool2d(x, options);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Tensor indices = r.indices;
    Record("MaxPool2d", {x}, {r.y}, [indices, shape, options](const Grads& g, const Needs&) {
      return Grads{ops::MaxPool2dBackward(g[0], indices, shape, options)};
    });
  }
  return r.y;
}

Tensor AvgPool2d(const Tensor& x, const ops::Pool2dOptions& options) {
  Tensor y = ops::AvgPool2d(x, options);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Record("AvgPool2d", {x}, {y}, [shape, options](const Grads& g, const Needs&) {
      return Grads{ops::AvgPool2dBackward(g[0], shape, options)};
    });
  }
  return y;
}

Tensor GlobalAvgPool2d(const Tensor& x, ops::ImageLayout layout) {
  Tensor y = ops::GlobalAvgPool2d(x, layout);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Record("GlobalAvgPool2d", {x}, {y}, [shape, layout](const Grads& g, const Needs&) {
      return Grads{ops::GlobalAvgPool2dBackward(g[0], shape, layout)};
    });
  }
  return y;
}

Tensor BatchNorm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor running_mean, Tensor running_var,
                   const ops::BatchNormOptions& options) {
  ops::BatchNormResult r = ops::BatchNorm2d(x, gamma, beta, running_mean, running_var, options);
  if (ShouldRecord({x, gamma, beta})) {
    // Only the statistics are kept from r (not r.y, unless the ReLU mask needs it).
    ops::BatchNormResult saved{options.fuse_relu ? r.y : Tensor(), r.save_mean, r.save_rstd};
    Record("BatchNorm2d", {x, gamma, beta}, {r.y}, [x, gamma, saved, options](const Grads& g, const Needs& needs) {
      ops::BatchNormGrads gr = ops::BatchNorm2dBackward(g[0], x, saved.y, gamma, saved, options);
      return Grads{needs[0] ? gr.grad_x : Tensor(), needs[1] ? gr.grad_gamma : Tensor(),
                   needs[2] ? gr.grad_beta : Tensor()};
    });
  }
  return r.y;
}

}  // namespace tessera::graph
