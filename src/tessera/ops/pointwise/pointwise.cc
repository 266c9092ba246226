#include "tessera/ops/pointwise/pointwise.h"

#include <cmath>
#include <numbers>

#include "tessera/base/error.h"
#include "tessera/ops/elementwise/kernel_util.h"

namespace tessera::ops {
namespace {

float Forward(PointwiseFn fn, float x, float a, float b) {
  switch (fn) {
    case PointwiseFn::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case PointwiseFn::kTanh: return std::tanh(x);
    case PointwiseFn::kExp: return std::exp(x);
    case PointwiseFn::kLog: return std::log(x);
    case PointwiseFn::kSqrt: return std::sqrt(x);
    case PointwiseFn::kReciprocal: return 1.0f / x;
    case PointwiseFn::kAbs: return std::fabs(x);
    case PointwiseFn::kErf: return std::erf(x);
    case PointwiseFn::kPow: return a == 2.0f ? x * x : std::pow(x, a);  // x^2 (exported norms) without powf
    case PointwiseFn::kLeakyRelu: return x > 0 ? x : a * x;
    case PointwiseFn::kElu: return x > 0 ? x : a * std::expm1(x);
    case PointwiseFn::kSoftplus: return std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)));
    case PointwiseFn::kSoftsign: return x / (1.0f + std::fabs(x));
    case PointwiseFn::kClip: return std::min(std::max(x, a), b);
    case PointwiseFn::kHardSigmoid: return std::max(0.0f, std::min(1.0f, a * x + b));
    case PointwiseFn::kHardSwish: return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f));
  }
  return 0.0f;
}

// d f / d x at x (with y = f(x)).
float Derivative(PointwiseFn fn, float x, float y, float a, float b) {
  switch (fn) {
    case PointwiseFn::kSigmoid: return y * (1.0f - y);
    case PointwiseFn::kTanh: return 1.0f - y * y;
    case PointwiseFn::kExp: return y;
    case PointwiseFn::kLog: return 1.0f / x;
    case PointwiseFn::kSqrt: return 0.5f / y;
    case PointwiseFn::kReciprocal: return -y * y;
    case PointwiseFn::kAbs: return x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f);
    case PointwiseFn::kErf: return static_cast<float>(2.0 / std::sqrt(std::numbers::pi)) * std::exp(-x * x);
    case PointwiseFn::kPow: return a == 2.0f ? 2.0f * x : a * std::pow(x, a - 1.0f);
    case PointwiseFn::kLeakyRelu: return x > 0 ? 1.0f : a;
    case PointwiseFn::kElu: return x > 0 ? 1.0f : y + a;
    case PointwiseFn::kSoftplus: return 1.0f / (1.0f + std::exp(-x));
    case PointwiseFn::kSoftsign: {
      const float d = 1.0f + std::fabs(x);
      return 1.0f / (d * d);
    }
    case PointwiseFn::kClip: return x >= a && x <= b ? 1.0f : 0.0f;
    case PointwiseFn::kHardSigmoid: {
      const float v = a * x + b;
      return v > 0.0f && v < 1.0f ? a : 0.0f;
    }
    case PointwiseFn::kHardSwish: return x < -3.0f ? 0.0f : (x > 3.0f ? 1.0f : x / 3.0f + 0.5f);
  }
  return 0.0f;
}

// Runs body(begin, end) over [0, n) in chunks of kern::kChunk on the OpenMP threads.
template <typename Body>
void Chunked(int64_t n, Body&& body) {
  const int64_t chunks = (n + kern::kChunk - 1) / kern::kChunk;
  kern::ParallelFor(chunks, n * 16, kern::kParallelComputeBound,
                    [&](int64_t c) { body(c * kern::kChunk, std::min(n, (c + 1) * kern::kChunk)); });
}

void CheckFloating(std::string_view op, std::string_view what, const Tensor& t) {
  TESSERA_OP_CHECK(t.defined() && IsFloating(t.dtype()), "{}: {} must be a floating tensor, got {}", op, what,
                   t.defined() ? DTypeName(t.dtype()) : std::string_view("undefined"));
}

}  // namespace

std::string_view PointwiseFnName(PointwiseFn fn) {
  switch (fn) {
    case PointwiseFn::kSigmoid: return "Sigmoid";
    case PointwiseFn::kTanh: return "Tanh";
    case PointwiseFn::kExp: return "Exp";
    case PointwiseFn::kLog: return "Log";
    case PointwiseFn::kSqrt: return "Sqrt";
    case PointwiseFn::kReciprocal: return "Reciprocal";
    case PointwiseFn::kAbs: return "Abs";
    case PointwiseFn::kErf: return "Erf";
    case PointwiseFn::kPow: return "Pow";
    case PointwiseFn::kLeakyRelu: return "LeakyRelu";
    case PointwiseFn::kElu: return "Elu";
    case PointwiseFn::kSoftplus: return "Softplus";
    case PointwiseFn::kSoftsign: return "Softsign";
    case PointwiseFn::kClip: return "Clip";
    case PointwiseFn::kHardSigmoid: return "HardSigmoid";
    case PointwiseFn::kHardSwish: return "HardSwish";
  }
  return "?";
}

Tensor Pointwise(PointwiseFn fn, const Tensor& x_in, float alpha, float beta) {
  CheckFloating(PointwiseFnName(fn), "x", x_in);
  const Tensor x = x_in.Contiguous().To(DType::kF32);
  Tensor y = Tensor::Empty(x.shape(), DType::kF32);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  Chunked(x.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) py[i] = Forward(fn, px[i], alpha, beta);
  });
  return x_in.dtype() == DType::kF32 ? y : y.To(x_in.dtype());
}

Tensor PointwiseBackward(PointwiseFn fn, const Tensor& grad_out, const Tensor& x_in, const Tensor& y_in, float alpha,
                         float beta) {
  const std::string op = fmt::format("{}Backward", PointwiseFnName(fn));
  CheckFloating(op, "grad_out", grad_out);
  CheckFloating(op, "x", x_in);
  CheckFloating(op, "y", y_in);
  TESSERA_OP_CHECK(grad_out.shape() == x_in.shape() && y_in.shape() == x_in.shape(),
                   "{}: grad_out {}, x {} and y {} must have one shape", op, ShapeString(grad_out.shape()),
                   ShapeString(x_in.shape()), ShapeString(y_in.shape()));
  const Tensor g = grad_out.Contiguous().To(DType::kF32), x = x_in.Contiguous().To(DType::kF32),
               y = y_in.Contiguous().To(DType::kF32);
  Tensor dx = Tensor::Empty(x.shape(), DType::kF32);
  const float *pg = g.data<float>(), *px = x.data<float>(), *py = y.data<float>();
  float* pd = dx.data<float>();
  Chunked(x.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) pd[i] = pg[i] * Derivative(fn, px[i], py[i], alpha, beta);
  });
  return x_in.dtype() == DType::kF32 ? dx : dx.To(x_in.dtype());
}

}  // namespace tessera::ops
