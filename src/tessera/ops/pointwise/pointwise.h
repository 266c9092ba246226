// Unary math functions with their derivatives, for the models imported
// from other frameworks (ONNX's Sigmoid, Tanh, Exp, Log, Sqrt, ...; the
// GPT's own activations live in ops/activation):
//   y = f(x; alpha) element-wise, any shape, fp32 / bf16 / fp16 (computed in
//   fp32, rounded once); the backward takes the forward's input and output
//   (each function reads whichever its derivative needs) and returns
//   grad_out · f'(x) in x's dtype. Non-contiguous inputs are copied first.
// Domain edges follow C's <cmath>: Log of a negative is NaN, Sqrt's
// derivative at 0 is +inf, Pow(0, a < 1)'s derivative is inf.
// Reference kernels: scalar <cmath> loops, chunked over OpenMP threads;
// results do not depend on the thread count. Thread-safe.
#pragma once

#include <string_view>

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

enum class PointwiseFn {
  kSigmoid,      // 1 / (1 + e^-x)
  kTanh,         //
  kExp,          //
  kLog,          //
  kSqrt,         //
  kReciprocal,   // 1 / x
  kAbs,          // derivative sign(x) (0 at 0)
  kErf,          //
  kPow,          // x^alpha (alpha a constant)
  kLeakyRelu,    // x > 0 ? x : alpha·x
  kElu,          // x > 0 ? x : alpha·(e^x − 1)
  kSoftplus,     // log(1 + e^x), computed without overflow
  kSoftsign,     // x / (1 + |x|)
  kClip,         // min(max(x, alpha), beta); derivative 1 on [alpha, beta]
  kHardSigmoid,  // max(0, min(1, alpha·x + beta))
  kHardSwish,    // x · max(0, min(1, x / 6 + 1/2))
};

std::string_view PointwiseFnName(PointwiseFn fn);  // "Sigmoid", ...

// alpha, beta: the function's constants where it has them (Pow's exponent,
// LeakyRelu's / Elu's slope, Clip's bounds, HardSigmoid's slope and offset).
Tensor Pointwise(PointwiseFn fn, const Tensor& x, float alpha = 0.0f, float beta = 0.0f);
Tensor PointwiseBackward(PointwiseFn fn, const Tensor& grad_out, const Tensor& x, const Tensor& y, float alpha = 0.0f,
                         float beta = 0.0f);

}  // namespace tessera::ops
