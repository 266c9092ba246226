// Parity cases for sum / mean (axis sets, keepdim) and max (one axis, no
// ties), forward and backward, fp32 / bf16 / fp16.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "tessera/ops/reduce/reduce.h"
#include "tessera/ops/testing/parity.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops::testing {
namespace {

struct AxesCase {
  Shape shape;
  std::vector<int> axes;
  bool keepdim;
};

std::vector<ParityCase> SumMeanCases(const std::string& op, bool mean) {
  const std::vector<AxesCase> specs = {
      {{4, 33}, {}, false},
      {{4, 33}, {1}, false},
      {{4, 33}, {0}, true},
      {{3, 5, 7}, {0, 2}, false},
      {{3, 5, 7}, {-1}, true},
      {{3, 5, 7}, {1}, false},
      {{2, 1, 9}, {1}, false},
      {{1, 1}, {}, true},
      {{300, 257}, {0}, false},
      {{300, 257}, {1}, true},
      {{2, 40, 3, 50}, {1, 3}, false},
      {{100000}, {}, false},
  };
  std::vector<ParityCase> cases;
  for (const AxesCase& s : specs) {
    ParityCase c;
    c.op = op;
    c.name = fmt::format("{} axes=[{}] keepdim={}", ShapeString(s.shape), fmt::join(s.axes, ","), s.keepdim);
    c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
    c.make_inputs = [s](DType dtype, uint64_t seed) { return Tensors{RandomTensor(s.shape, dtype, seed)}; };
    c.forward = [s, mean](const Tensors& in) {
      return Tensors{mean ? Mean(in[0], s.axes, s.keepdim) : Sum(in[0], s.axes, s.keepdim)};
    };
    c.backward = [s, mean](const Tensors& in, const Tensors&, const Tensors& gout) {
      return Tensors{mean ? MeanBackward(gout[0], in[0].shape(), s.axes, s.keepdim)
                          : SumBackward(gout[0], in[0].shape(), s.axes, s.keepdim)};
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

// Distinct values (a permutation of multiples of 1/4, exact in bf16/fp16
// for these sizes), so the maximum is unique and stable under +-fd_eps.
Tensor DistinctTensor(const Shape& shape, DType dtype, uint64_t seed) {
  int64_t n = NumElements(shape);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<float> keys(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = UniformAt(seed, i);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return keys[x] < keys[y]; });
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[order[i]] = 0.25f * static_cast<float>(i - n / 2);
  return Tensor::FromVector(v, shape, dtype);
}

struct MaxCase {
  Shape shape;
  int axis;
  bool keepdim;
};

TESSERA_PARITY_CASES {
  std::vector<ParityCase> all = SumMeanCases("sum", false);
  for (ParityCase& c : SumMeanCases("mean", true)) all.push_back(std::move(c));
  // At most 512 elements per case in bf16 (multiples of 1/4 up to 64 are
  // exact); the two large cases run in fp32 only (threaded path).
  const std::vector<MaxCase> specs = {{{4, 33}, -1, false},   {{4, 33}, 0, true},   {{3, 5, 7}, 1, false},
                                      {{3, 5, 7}, 2, true},   {{6, 1}, 1, false},   {{1, 9}, 0, false},
                                      {{80, 1000}, 1, false}, {{2000, 40}, 0, true}};
  for (const MaxCase& s : specs) {
    ParityCase c;
    c.op = "max";
    c.name = fmt::format("{} axis={} keepdim={}", ShapeString(s.shape), s.axis, s.keepdim);
    if (NumElements(s.shape) <= 512) {
      c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
    } else {
      c.dtypes = {DType::kF32};
    }
    c.make_inputs = [s](DType dtype, uint64_t seed) { return Tensors{DistinctTensor(s.shape, dtype, seed)}; };
    c.forward = [s](const Tensors& in) {
      MaxResult r = Max(in[0], s.axis, s.keepdim);
      return Tensors{r.values, r.indices};
    };
    c.backward = [s](const Tensors& in, const Tensors& out, const Tensors& gout) {
      return Tensors{MaxBackward(gout[0], out[1], in[0].shape(), s.axis, s.keepdim)};
    };
    all.push_back(std::move(c));
  }
  return all;
}

}  // namespace
}  // namespace tessera::ops::testing
