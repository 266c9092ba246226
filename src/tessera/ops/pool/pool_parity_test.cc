// Parity cases (optimized vs reference vs finite differences) for max /
// average / global average pooling, fp32 only (the ops' contract), both
// layouts, ResNet's 3x3/2 pad 1 max pool, ceil_mode, count_include_pad both
// ways, a multi-threaded size. Max-pool inputs hold distinct values 0.03
// apart so the finite-difference step (1e-2) never changes an argmax.
#include <fmt/format.h>

#include <string>

#include <gtest/gtest.h>

#include "tessera/ops/pool/pool.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

// A shuffled ramp: distinct values, spacing 0.03.
Tensor DistinctValues(const Shape& shape, uint64_t seed) {
  const int64_t n = NumElements(shape);
  std::vector<float> v(n);
  const int64_t step = 7919 % n == 0 ? 1 : 7919;  // prime: a permutation when n is not a multiple
  for (int64_t i = 0; i < n; ++i) {
    v[i] = 0.03f * static_cast<float>((i * step + static_cast<int64_t>(seed)) % n) - 0.015f * static_cast<float>(n);
  }
  return Tensor::FromVector(v, shape);
}

struct Spec {
  Shape shape;  // in the layout's axis order
  int64_t k, s, p;
  bool ceil_mode, count_include_pad;
  ImageLayout layout;
};

Pool2dOptions Options(const Spec& s) {
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = s.k;
  o.stride_h = o.stride_w = s.s;
  o.pad_h = o.pad_w = s.p;
  o.ceil_mode = s.ceil_mode;
  o.count_include_pad = s.count_include_pad;
  o.layout = s.layout;
  return o;
}

std::string Name(const Spec& s) {
  return fmt::format("{} {} k{} s{} p{}{}{}", ImageLayoutName(s.layout), ShapeString(s.shape), s.k, s.s, s.p,
                     s.ceil_mode ? " ceil" : "", s.count_include_pad ? "" : " exclude_pad");
}

ParityCase MaxCase(const Spec& s) {
  ParityCase c;
  c.op = "max_pool2d";
  c.name = Name(s);
  c.dtypes = {DType::kF32};
  c.make_inputs = [s](DType, uint64_t seed) { return Tensors{DistinctValues(s.shape, seed)}; };
  const Pool2dOptions o = Options(s);
  c.forward = [o](const Tensors& in) {
    MaxPool2dResult r = MaxPool2d(in[0], o);
    return Tensors{r.y, r.indices};
  };
  c.differentiable_outputs = {true, false};
  c.backward = [o](const Tensors& in, const Tensors& out, const Tensors& gout) {
    return Tensors{MaxPool2dBackward(gout[0], out[1], in[0].shape(), o)};
  };
  return c;
}

ParityCase AvgCase(const Spec& s) {
  ParityCase c;
  c.op = "avg_pool2d";
  c.name = Name(s);
  c.dtypes = {DType::kF32};
  c.make_inputs = [s](DType dtype, uint64_t seed) { return Tensors{RandomTensor(s.shape, dtype, seed, -2.0f, 2.0f)}; };
  const Pool2dOptions o = Options(s);
  c.forward = [o](const Tensors& in) { return Tensors{AvgPool2d(in[0], o)}; };
  c.backward = [o](const Tensors& in, const Tensors&, const Tensors& gout) {
    return Tensors{AvgPool2dBackward(gout[0], in[0].shape(), o)};
  };
  return c;
}

ParityCase GlobalCase(const Shape& shape, ImageLayout layout) {
  ParityCase c;
  c.op = "global_avg_pool2d";
  c.name = fmt::format("{} {}", ImageLayoutName(layout), ShapeString(shape));
  c.dtypes = {DType::kF32};
  c.make_inputs = [shape](DType dtype, uint64_t seed) {
    return Tensors{RandomTensor(shape, dtype, seed, -2.0f, 2.0f)};
  };
  c.forward = [layout](const Tensors& in) { return Tensors{GlobalAvgPool2d(in[0], layout)}; };
  c.backward = [layout](const Tensors& in, const Tensors&, const Tensors& gout) {
    return Tensors{GlobalAvgPool2dBackward(gout[0], in[0].shape(), layout)};
  };
  return c;
}

TESSERA_PARITY_CASES {
  constexpr ImageLayout kNCHW = ImageLayout::kNCHW, kNHWC = ImageLayout::kNHWC;
  const std::vector<Spec> specs = {
      {{2, 3, 9, 9}, 3, 2, 1, false, true, kNCHW},    {{2, 9, 9, 3}, 3, 2, 1, false, true, kNHWC},
      {{1, 5, 7, 6}, 2, 2, 1, true, false, kNCHW},    {{1, 7, 6, 5}, 2, 2, 1, true, false, kNHWC},
      {{3, 1, 1, 1}, 3, 2, 1, false, true, kNCHW},    {{1, 1, 1, 17}, 3, 2, 1, true, true, kNHWC},
      {{2, 2, 11, 13}, 3, 3, 0, true, true, kNCHW},   {{1, 13, 11, 67}, 3, 2, 1, true, false, kNHWC},
      {{4, 64, 28, 28}, 3, 2, 1, false, true, kNCHW}, {{4, 28, 28, 64}, 3, 2, 1, false, true, kNHWC},
  };
  std::vector<ParityCase> all;
  for (const Spec& s : specs) {
    all.push_back(MaxCase(s));
    all.push_back(AvgCase(s));
  }
  all.push_back(GlobalCase({3, 5, 7, 7}, kNCHW));
  all.push_back(GlobalCase({3, 7, 7, 5}, kNHWC));
  all.push_back(GlobalCase({1, 70, 1, 1}, kNCHW));
  all.push_back(GlobalCase({8, 7, 7, 256}, kNHWC));
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
