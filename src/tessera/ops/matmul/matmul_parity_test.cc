// Parity cases for "matmul" (b 2-D, a's leading axes folded into M) and
// "batched_matmul" (b with a's leading axes): odd and blocked sizes, all four
// transpose combinations, transposed-view inputs, fp32/bf16 (and fp16 on a
// few), forward and backward.
#include <fmt/format.h>

#include "tessera/ops/matmul/matmul.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

struct Spec {
  Shape batch;  // a's leading axes
  int64_t m, k, n;
  bool trans_a, trans_b;
  bool batched_b;
  bool views = false;  // feed transposed views of the opposite layout
  int fd_samples = 8;
  bool with_f16 = false;
};

Shape Stored(const Shape& lead, int64_t rows, int64_t cols, bool trans) {
  Shape s = lead;
  s.push_back(trans ? cols : rows);
  s.push_back(trans ? rows : cols);
  return s;
}

Tensor MaybeView(const Tensor& t, bool views) { return views ? t.Transpose(-1, -2) : t; }

ParityCase MakeCase(const Spec& s) {
  ParityCase c;
  c.op = s.batched_b ? "batched_matmul" : "matmul";
  c.name = fmt::format("{}{}x{}x{} ta={} tb={}{}", s.batch.empty() ? "" : ShapeString(s.batch), s.m, s.k, s.n,
                       s.trans_a, s.trans_b, s.views ? " (views)" : "");
  // With views, inputs are stored in the opposite layout and transposed back by a view.
  Shape a_shape = Stored(s.batch, s.m, s.k, s.trans_a != s.views);
  Shape b_shape = Stored(s.batched_b ? s.batch : Shape{}, s.k, s.n, s.trans_b != s.views);
  c.make_inputs = [a_shape, b_shape](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor(a_shape, dtype, seed), RandomTensor(b_shape, dtype, seed + 1)};
  };
  c.forward = [s](const Tensors& in) {
    return Tensors{MatMul(MaybeView(in[0], s.views), MaybeView(in[1], s.views), s.trans_a, s.trans_b)};
  };
  c.backward = [s](const Tensors& in, const Tensors&, const Tensors& gout) {
    MatMulGrads g = MatMulBackward(gout[0], MaybeView(in[0], s.views), MaybeView(in[1], s.views), s.trans_a,
                                   s.trans_b);
    return Tensors{MaybeView(g.grad_a, s.views), MaybeView(g.grad_b, s.views)};
  };
  c.fd_samples = s.fd_samples;
  if (s.with_f16) c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

TESSERA_PARITY_CASES {
  std::vector<ParityCase> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // 2-D b, plain 2-D a: odd sizes, edge tiles, blocking and threading.
      for (auto [m, k, n] : {std::tuple{1, 1, 1}, {7, 5, 3}, {33, 17, 9}, {130, 64, 33}, {13, 129, 67}}) {
        cases.push_back(MakeCase({{}, m, k, n, ta, tb, false}));
      }
      cases.push_back(MakeCase({{}, 256, 300, 200, ta, tb, false, false, 3, ta == tb}));
      // K beyond one K block (several blocks accumulate in fp32 before rounding).
      cases.push_back(MakeCase({{}, 20, 600, 40, ta, tb, false, false, 4, !ta}));
      // Leading axes folded into M (or looped over when a is transposed).
      cases.push_back(MakeCase({{2, 3}, 11, 17, 9, ta, tb, false}));
      cases.push_back(MakeCase({{4}, 64, 48, 40, ta, tb, false, ta != tb}));
      // Batched b.
      cases.push_back(MakeCase({{3}, 7, 5, 3, ta, tb, true}));
      cases.push_back(MakeCase({{2, 3}, 33, 17, 9, ta, tb, true, ta}));
      cases.push_back(MakeCase({{16}, 64, 64, 64, ta, tb, true, false, 4, ta && tb}));
    }
  }
  return cases;
}

}  // namespace
}  // namespace tessera::ops::testing
