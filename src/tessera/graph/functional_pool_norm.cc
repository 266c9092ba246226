// Differentiable pooling and batch normalization (graph/functional_cnn.h):
// each is one Apply (graph/apply.h) of the ops:: forward with a backward
// built from the ops:: backward kernels. MaxPool2d returns its argmax
// indices as a saved extra output for its backward; BatchNorm2d keeps x,
// gamma and the forward's statistics (extra outputs; with fuse_relu also
// its output y: the ReLU mask). Running statistics are inputs without a
// gradient that the training-mode forward updates in place (a side effect).
#include <fmt/format.h>

#include "tessera/graph/apply.h"
#include "tessera/graph/functional_cnn.h"

namespace tessera::graph {
namespace {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;
using Ins = std::vector<Tensor>;

std::string PoolAttrs(const ops::Pool2dOptions& o) {
  return fmt::format("kernel={}x{} stride={}x{} pad={}x{} ceil_mode={} count_include_pad={} layout={}", o.kernel_h,
                     o.kernel_w, o.stride_h, o.stride_w, o.pad_h, o.pad_w, o.ceil_mode, o.count_include_pad,
                     ops::ImageLayoutName(o.layout));
}

}  // namespace

Tensor MaxPool2d(const Tensor& x, const ops::Pool2dOptions& options) {
  Shape shape = x.shape();
  // Outputs: y, then the saved argmax indices.
  return Apply1(
      {"MaxPool2d", OpKind::kReduction, PoolAttrs(options), kSaveNone, SaveBit(1), 1}, {x},
      [options](const Ins& in) {
        ops::MaxPool2dResult r = ops::MaxPool2d(in[0], options);
        return Ins{r.y, r.indices};
      },
      [shape, options](const Grads& g, const Ins&, const Ins& out, const Needs&) {
        return Grads{ops::MaxPool2dBackward(g[0], out[1], shape, options)};
      });
}

Tensor AvgPool2d(const Tensor& x, const ops::Pool2dOptions& options) {
  Shape shape = x.shape();
  return Apply1(
      {"AvgPool2d", OpKind::kReduction, PoolAttrs(options), kSaveNone}, {x},
      [options](const Ins& in) { return Ins{ops::AvgPool2d(in[0], options)}; },
      [shape, options](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{ops::AvgPool2dBackward(g[0], shape, options)};
      });
}

Tensor GlobalAvgPool2d(const Tensor& x, ops::ImageLayout layout) {
  Shape shape = x.shape();
  return Apply1(
      {"GlobalAvgPool2d", OpKind::kReduction, fmt::format("layout={}", ops::ImageLayoutName(layout)), kSaveNone}, {x},
      [layout](const Ins& in) { return Ins{ops::GlobalAvgPool2d(in[0], layout)}; },
      [shape, layout](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{ops::GlobalAvgPool2dBackward(g[0], shape, layout)};
      });
}

Tensor BatchNorm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor running_mean, Tensor running_var,
                   const ops::BatchNormOptions& options) {
  // Outputs: y, then the saved statistics (save_mean, save_rstd). The
  // backward reads x, gamma, the statistics and, with fuse_relu, y.
  // Updating the running statistics in place is a side effect.
  const bool updates_running = options.training && (running_mean.defined() || running_var.defined());
  return Apply1(
      {"BatchNorm2d", OpKind::kReduction,
       fmt::format("training={} momentum={} eps={} fuse_relu={} layout={} unbiased={}", options.training,
                   options.momentum, options.eps, options.fuse_relu, ops::ImageLayoutName(options.layout),
                   options.unbiased_running_var),
       SaveBit(0) | SaveBit(1), (options.fuse_relu ? SaveBit(0) : 0u) | SaveBit(1) | SaveBit(2), 1, updates_running},
      {x, gamma, beta, running_mean, running_var},
      [options](const Ins& in) {
        ops::BatchNormResult r = ops::BatchNorm2d(in[0], in[1], in[2], in[3], in[4], options);
        return Ins{r.y, r.save_mean, r.save_rstd};
      },
      [options](const Grads& g, const Ins& in, const Ins& out, const Needs& needs) {
        // out[0] (y) is defined only with fuse_relu (saved_outputs above).
        ops::BatchNormResult saved{out[0], out[1], out[2]};
        ops::BatchNormGrads gr = ops::BatchNorm2dBackward(g[0], in[0], out[0], in[1], saved, options);
        return Grads{needs[0] ? gr.grad_x : Tensor(), needs[1] ? gr.grad_gamma : Tensor(),
                     needs[2] ? gr.grad_beta : Tensor(), Tensor(), Tensor()};
      });
}

}  // namespace tessera::graph
