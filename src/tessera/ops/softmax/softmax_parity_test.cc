// Parity cases for softmax / log_softmax along the last and inner axes,
// rows of length 1, odd sizes and a multi-threaded size; fp32 / bf16 / fp16.
#include <fmt/format.h>

#include <string>

#include "tessera/ops/softmax/softmax.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

struct Spec {
  Shape shape;
  int axis;
};

TESSERA_PARITY_CASES {
  const std::vector<Spec> specs = {{{4, 33}, -1},  {{1, 1}, -1},    {{3, 1}, -1},   {{7, 5, 3}, 1},
                                   {{7, 5, 3}, 0}, {{64, 129}, -1}, {{2, 1000}, 1}, {{96, 512}, -1}};
  std::vector<ParityCase> all;
  for (bool log : {false, true}) {
    for (const Spec& s : specs) {
      ParityCase c;
      c.op = log ? "log_softmax" : "softmax";
      c.name = fmt::format("{} axis={}", ShapeString(s.shape), s.axis);
      c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
      c.make_inputs = [s](DType dtype, uint64_t seed) {
        return Tensors{RandomTensor(s.shape, dtype, seed, -4.0f, 4.0f)};
      };
      c.forward = [s, log](const Tensors& in) {
        return Tensors{log ? LogSoftmax(in[0], s.axis) : Softmax(in[0], s.axis)};
      };
      c.backward = [s, log](const Tensors&, const Tensors& out, const Tensors& gout) {
        return Tensors{log ? LogSoftmaxBackward(gout[0], out[0], s.axis) : SoftmaxBackward(gout[0], out[0], s.axis)};
      };
      all.push_back(std::move(c));
    }
  }
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
