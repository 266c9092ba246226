// Differentiable 2-d convolution (graph::Conv2d of functional_cnn.h): one
// Apply (graph/apply.h) of ops::Conv2d whose backward asks
// ops::Conv2dBackward only for the gradients of inputs that require one
// (x, w, bias); it keeps x and w.
#include <fmt/format.h>

#include "tessera/graph/apply.h"
#include "tessera/graph/functional_cnn.h"

namespace tessera::graph {

Tensor Conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::Conv2dOptions& options) {
  using Ins = std::vector<Tensor>;
  const std::string attrs =
      fmt::format("stride={}x{} pad={}x{} dilation={}x{} groups={} layout={} algo={}", options.stride_h,
                  options.stride_w, options.pad_h, options.pad_w, options.dilation_h, options.dilation_w,
                  options.groups, ops::ImageLayoutName(options.layout), ops::Conv2dAlgoName(options.algo));
  return Apply1(
      {"Conv2d", OpKind::kOutFusable, attrs, SaveBit(0) | SaveBit(1)}, {x, w, bias},
      [options](const Ins& in) { return Ins{ops::Conv2d(in[0], in[1], in[2], options)}; },
      [options](const Ins& g, const Ins& in, const Ins&, const std::vector<bool>& needs) {
        ops::Conv2dGrads gr = ops::Conv2dBackward(g[0], in[0], in[1], options, needs[0], needs[1], needs[2]);
        return Ins{gr.grad_x, gr.grad_w, gr.grad_bias};
      });
}

}  // namespace tessera::graph
