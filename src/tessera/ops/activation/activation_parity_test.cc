// Parity cases for gelu / silu / relu / swiglu: odd sizes, 3-d inputs and
// multi-threaded sizes; fp32 / bf16 / fp16.
#include <cmath>
#include <string>

#include "tessera/ops/activation/activation.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

const std::vector<Shape> kShapes = {{4, 33}, {1}, {3, 5, 7}, {1000}, {256, 300}};

// Inputs with |x| >= 0.1 (relu's kink at 0 would break finite differences).
Tensor AwayFromZero(const Shape& shape, DType dtype, uint64_t seed) {
  std::vector<float> v = RandomTensor(shape, DType::kF32, seed, -3.0f, 3.0f).ToFloatVector();
  for (float& e : v) e = std::copysign(0.1f + std::fabs(e), e);
  return Tensor::FromVector(v, shape, dtype);
}

TESSERA_PARITY_CASES {
  std::vector<ParityCase> all;
  struct Unary {
    const char* name;
    Tensor (*fwd)(const Tensor&);
    Tensor (*bwd)(const Tensor&, const Tensor&);
  };
  for (Unary u : {Unary{"gelu", &Gelu, &GeluBackward}, Unary{"silu", &Silu, &SiluBackward},
                  Unary{"relu", &Relu, &ReluBackward}}) {
    for (const Shape& s : kShapes) {
      ParityCase c;
      c.op = u.name;
      c.name = ShapeString(s);
      c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
      c.make_inputs = [s](DType dtype, uint64_t seed) { return Tensors{AwayFromZero(s, dtype, seed)}; };
      c.forward = [u](const Tensors& in) { return Tensors{u.fwd(in[0])}; };
      c.backward = [u](const Tensors& in, const Tensors&, const Tensors& gout) {
        return Tensors{u.bwd(gout[0], in[0])};
      };
      all.push_back(std::move(c));
    }
  }
  for (const Shape& s : kShapes) {
    ParityCase c;
    c.op = "swiglu";
    c.name = ShapeString(s);
    c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
    c.make_inputs = [s](DType dtype, uint64_t seed) {
      return Tensors{RandomTensor(s, dtype, seed, -3.0f, 3.0f), RandomTensor(s, dtype, seed + 1, -2.0f, 2.0f)};
    };
    c.forward = [](const Tensors& in) { return Tensors{SwiGlu(in[0], in[1])}; };
    c.backward = [](const Tensors& in, const Tensors&, const Tensors& gout) {
      SwiGluGrads g = SwiGluBackward(gout[0], in[0], in[1]);
      return Tensors{g.grad_gate, g.grad_up};
    };
    all.push_back(std::move(c));
  }
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
