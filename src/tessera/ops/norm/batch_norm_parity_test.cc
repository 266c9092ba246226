// Parity cases (optimized vs reference vs finite differences) for
// BatchNorm2d, fp32: both layouts, training and inference, with and without
// the fused ReLU, C = 1 / 5 / 17 / 70, a multi-threaded size. Inputs are x,
// gamma, beta (all differentiated); the running statistics are fresh
// buffers made inside each forward, so repeated forwards see the same ones.
// Finite differences run on the cases without the fused ReLU.
#include <fmt/format.h>

#include <string>

#include "tessera/ops/norm/batch_norm.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

struct Spec {
  Shape shape;  // in the layout's axis order
  ImageLayout layout;
  bool training, fuse_relu;
};

ParityCase MakeCase(const Spec& s) {
  ParityCase c;
  c.op = "batch_norm2d";
  c.name = fmt::format("{} {} {}{}", ImageLayoutName(s.layout), ShapeString(s.shape),
                       s.training ? "training" : "inference", s.fuse_relu ? " relu" : "");
  c.dtypes = {DType::kF32};
  // With the fused ReLU, a finite-difference step moves pre-activations across
  // the kink (beta shifts a whole channel), so FD is off there; the fused
  // gradient is checked against central differences of a double reference at
  // step 1e-6 in batch_norm_test.cc, and optimized vs reference here.
  if (s.fuse_relu) c.fd_samples = 0;
  const int64_t C = s.layout == ImageLayout::kNCHW ? s.shape[1] : s.shape[3];
  c.make_inputs = [s, C](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor(s.shape, dtype, seed, -2.0f, 3.0f), RandomTensor({C}, dtype, seed + 1, 0.5f, 1.5f),
                   RandomTensor({C}, dtype, seed + 2, -0.5f, 0.5f)};
  };
  BatchNormOptions o;
  o.training = s.training;
  o.fuse_relu = s.fuse_relu;
  o.layout = s.layout;
  c.forward = [o, C](const Tensors& in) {
    Tensor rm = Tensor::Full({C}, 0.25), rv = Tensor::Full({C}, 1.5);
    BatchNormResult r = BatchNorm2d(in[0], in[1], in[2], rm, rv, o);
    return Tensors{r.y, r.save_mean, r.save_rstd, rm, rv};
  };
  c.differentiable_outputs = {true, false, false, false, false};
  c.backward = [o](const Tensors& in, const Tensors& out, const Tensors& gout) {
    BatchNormResult fwd{out[0], out[1], out[2]};
    BatchNormGrads g = BatchNorm2dBackward(gout[0], in[0], out[0], in[1], fwd, o);
    return Tensors{g.grad_x, g.grad_gamma, g.grad_beta};
  };
  return c;
}

TESSERA_PARITY_CASES {
  constexpr ImageLayout kNCHW = ImageLayout::kNCHW, kNHWC = ImageLayout::kNHWC;
  std::vector<ParityCase> all;
  for (bool training : {true, false}) {
    for (bool relu : {false, true}) {
      all.push_back(MakeCase({{3, 5, 7, 3}, kNCHW, training, relu}));
      all.push_back(MakeCase({{3, 7, 3, 5}, kNHWC, training, relu}));
      all.push_back(MakeCase({{2, 1, 1, 3}, kNCHW, training, relu}));
      all.push_back(MakeCase({{1, 5, 5, 17}, kNHWC, training, relu}));
      all.push_back(MakeCase({{2, 70, 3, 5}, kNCHW, training, relu}));
      all.push_back(MakeCase({{2, 3, 5, 70}, kNHWC, training, relu}));
    }
  }
  all.push_back(MakeCase({{8, 64, 28, 28}, kNCHW, true, true}));
  all.push_back(MakeCase({{8, 28, 28, 64}, kNHWC, true, true}));
  all.push_back(MakeCase({{1, 3, 1, 1}, kNCHW, false, false}));  // N*H*W = 1 (inference only)
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
