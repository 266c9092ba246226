// Differentiable functions: each runs the ops:: forward kernel and, when
// ShouldRecord (grad mode on and some input requires grad), records a
// backward closure built from the ops:: backward kernels on this thread's
// tape (graph/tape.h). Shapes, dtypes and errors are those of the underlying
// operator (bad arguments throw OpError); see the ops/ headers for the exact
// semantics. Index tensors (ids, targets, indices, rows) are never
// differentiated. Thread-safety: as the tape (per thread).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/ops/attention/attention.h"
#include "tessera/ops/loss/cross_entropy.h"
#include "tessera/ops/pointwise/pointwise.h"
#include "tessera/tensor/tensor.h"

namespace tessera::graph {

// ---- Linear algebra and arithmetic (graph/functional_math.cc) ----
Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// x @ weight^T + bias (bias may be undefined) in one GEMM with the bias in its
// epilogue: bitwise MatMul(x, weight, false, true) then Add(bias), one pass
// over the output less (ops/matmul/matmul.h).
Tensor Linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
Tensor Add(const Tensor& a, const Tensor& b);  // numpy broadcasting
Tensor Sub(const Tensor& a, const Tensor& b);
Tensor Mul(const Tensor& a, const Tensor& b);
Tensor Div(const Tensor& a, const Tensor& b);
Tensor Affine(const Tensor& x, float scale, float shift = 0.0f);  // x * scale + shift
inline Tensor Scale(const Tensor& x, float scale) { return Affine(x, scale, 0.0f); }
Tensor Sum(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
Tensor Mean(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
struct MaxOutput {
  Tensor values;   // differentiable
  Tensor indices;  // int64
};
MaxOutput Max(const Tensor& x, int axis, bool keepdim = false);
Tensor Softmax(const Tensor& x, int axis = -1);
Tensor LogSoftmax(const Tensor& x, int axis = -1);
// Mean cross-entropy of logits [..., V] against int64 targets [...] (the
// leading axes are flattened); a scalar fp32 loss.
Tensor CrossEntropy(const Tensor& logits, const Tensor& targets, const ops::CrossEntropyOptions& options = {});

// ---- Neural-network layers (graph/functional_nn.cc) ----
Tensor Embedding(const Tensor& weight, const Tensor& ids);
Tensor LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps = 1e-5f);
Tensor RmsNorm(const Tensor& x, const Tensor& gamma, float eps = 1e-6f);
Tensor Gelu(const Tensor& x);
Tensor Silu(const Tensor& x);
Tensor Relu(const Tensor& x);
Tensor SwiGlu(const Tensor& gate, const Tensor& up);  // silu(gate) * up
// Unary math with its derivative: Sigmoid, Tanh, Exp, Log, Sqrt, Erf, x^alpha, ...
// (ops/pointwise/pointwise.h; used by imported ONNX models).
Tensor Pointwise(ops::PointwiseFn fn, const Tensor& x, float alpha = 0.0f, float beta = 0.0f);
// Identity unless `training` and p > 0. The mask is a function of
// (seed, offset + element index) only (see ops/dropout/dropout.h).
Tensor Dropout(const Tensor& x, float p, bool training, uint64_t seed, uint64_t offset = 0);
Tensor CausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, float scale);  // [B, H, T, Dh]
Tensor Rope(const Tensor& x, float base = 10000.0f, int64_t position_offset = 0);     // [B, H, T, Dh]
struct TopKOutput {
  Tensor values;   // differentiable
  Tensor indices;  // int64
};
TopKOutput TopK(const Tensor& x, int64_t k);  // along the last axis
Tensor Gather(const Tensor& x, int axis, const Tensor& index);
Tensor ScatterAdd(const Tensor& base, int axis, const Tensor& index, const Tensor& src);
Tensor GatherRows(const Tensor& x, const Tensor& rows);                     // [N, D], [M] -> [M, D]
Tensor ScatterAddRows(const Tensor& src, const Tensor& rows, int64_t n);  // [M, D], [M] -> [n, D]

// ---- Shapes, copies and casts (graph/functional_shape.cc) ----
Tensor Concat(const std::vector<Tensor>& xs, int axis);
std::vector<Tensor> Split(const Tensor& x, const std::vector<int64_t>& sizes, int axis);
Tensor Reshape(const Tensor& x, const Shape& shape);  // view if contiguous, else copy
Tensor View(const Tensor& x, const Shape& shape);     // requires contiguous x
Tensor Transpose(const Tensor& x, int a, int b);      // strided view
Tensor Permute(const Tensor& x, const std::vector<int>& order);
Tensor Slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step = 1);
Tensor Contiguous(const Tensor& x);  // x itself when already contiguous
// Converts to `dtype` (x itself if already); the gradient is converted back
// to x's dtype. Used for mixed precision (fp32 masters -> bf16 compute).
Tensor Cast(const Tensor& x, DType dtype);
// A new handle on x's data that is not connected to the tape.
Tensor Detach(const Tensor& x);

}  // namespace tessera::graph
