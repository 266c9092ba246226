// Test helpers: finite-difference gradient checks of graph:: compositions.
// Header-only, used by the graph tests (and usable by models tests).
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/common/impl.h"
#include "tessera/tensor/rng.h"

namespace tessera::graph::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A fp32 leaf with uniform values in [low, high).
inline Tensor Leaf(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Tensor t = Tensor::Empty(shape);
  FillUniform(t, seed, low, high);
  t.set_requires_grad(true);
  return t;
}

// Scalar <out, W> with a fixed random W: gives every output element its
// own gradient weight.
inline Tensor Project(const Tensor& out, uint64_t seed = 99) {
  Tensor w = Tensor::Empty(out.shape());
  FillUniform(w, seed, -1.0f, 1.0f);
  return Sum(Mul(out, w.To(out.dtype())));
}

struct GradCheckOptions {
  double eps = 1e-2;
  double atol = 2e-3;
  double rtol = 2e-2;
  int max_samples = 24;  // checked elements per input
};

// Backpropagates f(inputs) once and compares each leaf's gradient with
// central differences of f evaluated (without recording) by the reference
// kernels. Inputs must be contiguous fp32 leaves.
inline void ExpectGradientsMatch(const std::string& what, const std::vector<Tensor>& inputs, const Fn& f,
                                 GradCheckOptions opt = {}) {
  for (Tensor t : inputs) t.ZeroGrad();
  Tensor loss = f(inputs);
  ASSERT_EQ(loss.numel(), 1) << what;
  Backward(loss);
  ASSERT_EQ(TapeSize(), 0u) << what;
  auto eval = [&]() {
    NoGradGuard no_grad;
    ops::ScopedImpl reference(ops::Impl::kReference);
    return f(inputs).Item();
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.requires_grad()) continue;
    ASSERT_TRUE(x.is_contiguous() && x.dtype() == DType::kF32) << what;
    Tensor grad = x.grad();
    ASSERT_TRUE(grad.defined()) << what << ": input " << k << " got no gradient";
    ASSERT_EQ(grad.shape(), x.shape()) << what;
    std::vector<float> analytic = grad.ToFloatVector();
    const int64_t n = x.numel();
    const int64_t stride = std::max<int64_t>(1, n / opt.max_samples);
    float* data = x.data<float>();
    for (int64_t i = (n > opt.max_samples ? 1 : 0); i < n; i += stride) {
      const float orig = data[i];
      const float up = orig + static_cast<float>(opt.eps), down = orig - static_cast<float>(opt.eps);
      data[i] = up;
      const double plus = eval();
      data[i] = down;
      const double minus = eval();
      data[i] = orig;
      const double fd = (plus - minus) / (static_cast<double>(up) - static_cast<double>(down));
      EXPECT_NEAR(analytic[i], fd, opt.atol + opt.rtol * std::abs(fd))
          << what << ": input " << k << " element " << i;
    }
  }
}

}  // namespace tessera::graph::testing
