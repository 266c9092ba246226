// Parity cases for conv2d (fp32 only: the operator takes fp32): each
// algorithm that applies, forced, against the direct reference loops, and
// the reference backward against finite differences; odd shapes, both
// layouts, stride / padding / dilation, groups and depthwise.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "tessera/ops/conv/conv.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

struct Spec {
  int64_t N, C, H, W, K, R, S, stride, pad, dilation, groups;
};

ParityCase MakeCase(const Spec& s, ImageLayout layout, Conv2dAlgo algo) {
  ParityCase c;
  c.op = "conv2d";
  c.name = fmt::format("x [{}, {}, {}, {}] {} w [{}, {}, {}, {}] s{} p{} d{} g{} {}", s.N, s.C, s.H, s.W,
                       ImageLayoutName(layout), s.K, s.C / s.groups, s.R, s.S, s.stride, s.pad, s.dilation, s.groups,
                       Conv2dAlgoName(algo));
  c.dtypes = {DType::kF32};
  Conv2dOptions o;
  o.stride_h = o.stride_w = s.stride;
  o.pad_h = o.pad_w = s.pad;
  o.dilation_h = o.dilation_w = s.dilation;
  o.groups = s.groups;
  o.layout = layout;
  o.algo = algo;
  const Shape xs = layout == ImageLayout::kNCHW ? Shape{s.N, s.C, s.H, s.W} : Shape{s.N, s.H, s.W, s.C};
  const Shape ws{s.K, s.C / s.groups, s.R, s.S};
  c.make_inputs = [xs, ws, s](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor(xs, dtype, seed), RandomTensor(ws, dtype, seed + 1),
                   RandomTensor({s.K}, dtype, seed + 2)};
  };
  c.forward = [o](const Tensors& in) { return Tensors{Conv2d(in[0], in[1], in[2], o)}; };
  c.backward = [o](const Tensors& in, const Tensors&, const Tensors& gout) {
    Conv2dGrads g = Conv2dBackward(gout[0], in[0], in[1], o, true, true, true);
    return Tensors{g.grad_x, g.grad_w, g.grad_bias};
  };
  return c;
}

TESSERA_PARITY_CASES {
  const std::vector<Spec> specs = {
      {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1},   {3, 3, 7, 5, 5, 3, 3, 1, 1, 1, 1},  {2, 5, 11, 9, 7, 3, 3, 2, 1, 1, 1},
      {1, 4, 10, 9, 6, 3, 3, 1, 2, 2, 2},  {2, 3, 13, 11, 4, 7, 7, 2, 3, 1, 1}, {3, 7, 5, 6, 11, 1, 1, 1, 0, 1, 1},
      {2, 6, 6, 5, 9, 1, 1, 2, 0, 1, 3},   {2, 6, 9, 8, 12, 3, 3, 1, 1, 1, 6},  {1, 5, 8, 7, 5, 5, 5, 2, 2, 1, 5},
  };
  std::vector<ParityCase> all;
  for (const Spec& s : specs) {
    std::vector<Conv2dAlgo> algos = {Conv2dAlgo::kIm2col};
    if (s.R == 1 && s.S == 1 && s.stride == 1 && s.pad == 0) algos.push_back(Conv2dAlgo::kGemm1x1);
    if (s.groups == s.C && s.groups > 1) algos.push_back(Conv2dAlgo::kDepthwise);
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      for (Conv2dAlgo algo : algos) all.push_back(MakeCase(s, layout, algo));
    }
  }
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
