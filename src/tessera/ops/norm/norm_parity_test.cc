// Parity cases for layernorm / rmsnorm: odd widths, one-element rows, 3-d
// inputs, a multi-threaded size, and mixed precision (bf16/fp16 x with
// fp32 gamma/beta); gradients of x, gamma and beta.
#include <fmt/format.h>

#include <string>

#include "tessera/ops/norm/norm.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

struct Spec {
  Shape shape;
  bool fp32_params;  // gamma/beta stay fp32 whatever x's dtype
};

ParityCase MakeCase(bool rms, const Spec& s) {
  ParityCase c;
  c.op = rms ? "rmsnorm" : "layernorm";
  c.name = fmt::format("x {}{}", ShapeString(s.shape), s.fp32_params ? " fp32 params" : "");
  c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  const int64_t D = s.shape.back();
  c.make_inputs = [s, D, rms](DType dtype, uint64_t seed) {
    DType pdt = s.fp32_params ? DType::kF32 : dtype;
    Tensors in{RandomTensor(s.shape, dtype, seed, -2.0f, 3.0f), RandomTensor({D}, pdt, seed + 1, 0.5f, 1.5f)};
    if (!rms) in.push_back(RandomTensor({D}, pdt, seed + 2, -0.5f, 0.5f));
    return in;
  };
  c.differentiable_outputs = {true, false, false};
  if (rms) {
    c.forward = [](const Tensors& in) {
      NormResult r = RmsNorm(in[0], in[1]);
      return Tensors{r.y, r.mean, r.rstd};
    };
    c.differentiable_outputs = {true, false, false};
    c.backward = [](const Tensors& in, const Tensors& out, const Tensors& gout) {
      NormResult fwd{out[0], out[1], out[2]};
      NormGrads g = RmsNormBackward(gout[0], in[0], in[1], fwd);
      return Tensors{g.grad_x, g.grad_gamma};
    };
  } else {
    c.forward = [](const Tensors& in) {
      NormResult r = LayerNorm(in[0], in[1], in[2]);
      return Tensors{r.y, r.mean, r.rstd};
    };
    c.backward = [](const Tensors& in, const Tensors& out, const Tensors& gout) {
      NormResult fwd{out[0], out[1], out[2]};
      NormGrads g = LayerNormBackward(gout[0], in[0], in[1], fwd);
      return Tensors{g.grad_x, g.grad_gamma, g.grad_beta};
    };
  }
  return c;
}

TESSERA_PARITY_CASES {
  const std::vector<Spec> specs = {{{4, 33}, false},   {{1, 7}, false}, {{5, 1}, false},   {{3, 5, 16}, false},
                                   {{64, 256}, false}, {{6, 96}, true}, {{200, 384}, true}};
  std::vector<ParityCase> all;
  for (bool rms : {false, true}) {
    for (const Spec& s : specs) all.push_back(MakeCase(rms, s));
  }
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
