// Parity cases for add / sub / mul / div: same-shape, row and column
// broadcasts, both-sides broadcasts, scalars, and a tensor large enough for
// the multi-threaded path; forward and backward, fp32 / bf16 / fp16.
#include <string>

#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

struct ShapePair {
  Shape a, b;
};

std::vector<ParityCase> MakeBinaryCases(const std::string& op_name, BinaryOp op) {
  const std::vector<ShapePair> shapes = {
      {{4, 33}, {4, 33}},     {{5, 7}, {7}}, {{6, 3}, {6, 1}}, {{3, 1, 5}, {4, 1}}, {{1}, {6, 3}},
      {{2, 3, 4}, {2, 1, 4}}, {{1, 1}, {1}}, {{7}, {2, 5, 7}}, {{130, 600}, {600}}, {{257, 257}, {257, 257}},
      {{96, 1}, {96, 800}},
  };
  std::vector<ParityCase> cases;
  for (const ShapePair& s : shapes) {
    ParityCase c;
    c.op = op_name;
    c.name = ShapeString(s.a) + " " + op_name + " " + ShapeString(s.b);
    c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
    const bool div = op == BinaryOp::kDiv;
    c.make_inputs = [s, div](DType dtype, uint64_t seed) {
      // Denominators stay in [0.5, 2] so div is well conditioned.
      Tensor b = div ? RandomTensor(s.b, dtype, seed + 1, 0.5f, 2.0f) : RandomTensor(s.b, dtype, seed + 1);
      return Tensors{RandomTensor(s.a, dtype, seed), b};
    };
    c.forward = [op](const Tensors& in) { return Tensors{Binary(op, in[0], in[1])}; };
    c.backward = [op](const Tensors& in, const Tensors&, const Tensors& gout) {
      BinaryGrads g = BinaryBackward(op, gout[0], in[0], in[1]);
      return Tensors{g.grad_a, g.grad_b};
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

TESSERA_PARITY_CASES {
  std::vector<ParityCase> all;
  for (auto [name, op] : {std::pair{"add", BinaryOp::kAdd}, std::pair{"sub", BinaryOp::kSub},
                          std::pair{"mul", BinaryOp::kMul}, std::pair{"div", BinaryOp::kDiv}}) {
    for (ParityCase& c : MakeBinaryCases(name, op)) all.push_back(std::move(c));
  }
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
