// Parity cases for dropout: several p, seeds and stream offsets, odd sizes
// and a multi-threaded size; the mask is a pure function of (seed, offset +
// i), so optimized and reference must agree exactly on which elements drop.
#include <fmt/format.h>

#include <string>

#include "tessera/ops/dropout/dropout.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

struct Spec {
  Shape shape;
  float p;
  uint64_t seed;
  uint64_t offset;
};

TESSERA_PARITY_CASES {
  const std::vector<Spec> specs = {
      {{4, 33}, 0.1f, 7, 0},     {{1000}, 0.5f, 11, 123}, {{3, 5, 7}, 0.25f, 3, 1ull << 33},
      {{257, 129}, 0.1f, 42, 5}, {{1}, 0.9f, 1, 0},       {{8, 8}, 0.0f, 9, 0}};
  std::vector<ParityCase> all;
  for (const Spec& s : specs) {
    ParityCase c;
    c.op = "dropout";
    c.name = fmt::format("{} p={} seed={} offset={}", ShapeString(s.shape), s.p, s.seed, s.offset);
    c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
    c.random_op = true;
    c.make_inputs = [s](DType dtype, uint64_t seed) { return Tensors{RandomTensor(s.shape, dtype, seed)}; };
    c.forward = [s](const Tensors& in) { return Tensors{Dropout(in[0], s.p, s.seed, s.offset)}; };
    c.backward = [s](const Tensors&, const Tensors&, const Tensors& gout) {
      return Tensors{DropoutBackward(gout[0], s.p, s.seed, s.offset)};
    };
    all.push_back(std::move(c));
  }
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
