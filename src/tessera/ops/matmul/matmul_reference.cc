// Reference MatMul: the oracle the optimized path is tested against. Reads
// every operand through Tensor::ToFloatVector (so any view works), loops in
// the textbook order and accumulates in fp32.
#include <vector>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/ops/matmul/matmul_internal.h"

namespace tessera::ops::internal {
namespace {

std::string Describe(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  return fmt::format("a {} {} (trans_a={}) and b {} {} (trans_b={})", ShapeString(a.shape()), DTypeName(a.dtype()),
                     trans_a, ShapeString(b.shape()), DTypeName(b.dtype()), trans_b);
}

// Element (row, col) of op(x) for one matrix stored [rows_s, cols_s] at `base`.
struct OpView {
  const float* base;
  int64_t cols_s;  // stored row length
  bool trans;
  float operator()(int64_t r, int64_t c) const { return trans ? base[c * cols_s + r] : base[r * cols_s + c]; }
};

}  // namespace

MatMulDims CheckMatMulArgs(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  TESSERA_OP_CHECK(a.defined() && b.defined(), "matmul: undefined operand (a defined={}, b defined={})", a.defined(),
                   b.defined());
  TESSERA_OP_CHECK(IsFloating(a.dtype()) && a.dtype() == b.dtype(),
                   "matmul: operands must share one floating dtype; got {}", Describe(a, b, trans_a, trans_b));
  TESSERA_OP_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: operands must have at least 2 dims; got {}",
                   Describe(a, b, trans_a, trans_b));
  MatMulDims d;
  d.batch_shape.assign(a.shape().begin(), a.shape().end() - 2);
  d.batch = NumElements(d.batch_shape);
  d.m = trans_a ? a.size(-1) : a.size(-2);
  int64_t ka = trans_a ? a.size(-2) : a.size(-1);
  int64_t kb = trans_b ? b.size(-1) : b.size(-2);
  d.n = trans_b ? b.size(-2) : b.size(-1);
  d.k = ka;
  if (b.dim() == 2) {
    d.batched_b = false;
  } else {
    Shape b_batch(b.shape().begin(), b.shape().end() - 2);
    TESSERA_OP_CHECK(b_batch == d.batch_shape, "matmul: b must be 2-D or have the same leading axes as a; got {}",
                     Describe(a, b, trans_a, trans_b));
    d.batched_b = true;
  }
  TESSERA_OP_CHECK(ka == kb, "matmul: contraction sizes differ ({} vs {}); got {}", ka, kb,
                   Describe(a, b, trans_a, trans_b));
  d.out_shape = d.batch_shape;
  d.out_shape.push_back(d.m);
  d.out_shape.push_back(d.n);
  return d;
}

MatMulDims CheckMatMulBackwardArgs(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a,
                                   bool trans_b) {
  MatMulDims d = CheckMatMulArgs(a, b, trans_a, trans_b);
  TESSERA_OP_CHECK(grad_out.defined() && grad_out.shape() == d.out_shape && grad_out.dtype() == a.dtype(),
                   "matmul backward: grad_out {} {} does not match the output {} {} of {}",
                   grad_out.defined() ? ShapeString(grad_out.shape()) : "undefined",
                   grad_out.defined() ? DTypeName(grad_out.dtype()) : "-", ShapeString(d.out_shape),
                   DTypeName(a.dtype()), Describe(a, b, trans_a, trans_b));
  return d;
}

Tensor ReferenceMatMul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  MatMulDims d = CheckMatMulArgs(a, b, trans_a, trans_b);
  std::vector<float> av = a.ToFloatVector(), bv = b.ToFloatVector();
  std::vector<float> out(static_cast<size_t>(d.batch * d.m * d.n));
  for (int64_t bi = 0; bi < d.batch; ++bi) {
    OpView x{av.data() + bi * d.m * d.k, trans_a ? d.m : d.k, trans_a};
    OpView y{bv.data() + (d.batched_b ? bi * d.k * d.n : 0), trans_b ? d.k : d.n, trans_b};
    float* c = out.data() + bi * d.m * d.n;
    for (int64_t i = 0; i < d.m; ++i) {
      for (int64_t j = 0; j < d.n; ++j) {
        float acc = 0.0f;
        for (int64_t p = 0; p < d.k; ++p) acc += x(i, p) * y(p, j);
        c[i * d.n + j] = acc;
      }
    }
  }
  return Tensor::FromVector(out, d.out_shape, a.dtype());
}

Tensor ReferenceLinear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor y = ReferenceMatMul(x, weight, false, true);
  std::vector<float> yv = y.ToFloatVector(), bv = bias.ToFloatVector();
  const int64_t n = static_cast<int64_t>(bv.size());
  for (size_t i = 0; i < yv.size(); ++i) yv[i] += bv[static_cast<int64_t>(i) % n];
  return Tensor::FromVector(yv, y.shape(), y.dtype());
}

MatMulGrads ReferenceMatMulBackward(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a,
                                    bool trans_b, bool need_a, bool need_b) {
  MatMulDims d = CheckMatMulBackwardArgs(grad_out, a, b, trans_a, trans_b);
  std::vector<float> av = a.ToFloatVector(), bv = b.ToFloatVector(), gv = grad_out.ToFloatVector();
  MatMulGrads grads;
  if (need_a) {
    // d op(a)[i, p] = sum_j g[i, j] * op(b)[p, j]; stored transposed when trans_a.
    std::vector<float> ga(av.size());
    for (int64_t bi = 0; bi < d.batch; ++bi) {
      OpView y{bv.data() + (d.batched_b ? bi * d.k * d.n : 0), trans_b ? d.k : d.n, trans_b};
      const float* g = gv.data() + bi * d.m * d.n;
      float* out = ga.data() + bi * d.m * d.k;
      for (int64_t i = 0; i < d.m; ++i) {
        for (int64_t p = 0; p < d.k; ++p) {
          float acc = 0.0f;
          for (int64_t j = 0; j < d.n; ++j) acc += g[i * d.n + j] * y(p, j);
          out[trans_a ? p * d.m + i : i * d.k + p] = acc;
        }
      }
    }
    grads.grad_a = Tensor::FromVector(ga, a.shape(), a.dtype());
  }
  if (need_b) {
    // d op(b)[p, j] = sum_i op(a)[i, p] * g[i, j], summed over the batch when b is shared.
    std::vector<float> gb(bv.size());
    int64_t b_batches = d.batched_b ? d.batch : 1;
    int64_t per_b = d.batched_b ? 1 : d.batch;
    for (int64_t bb = 0; bb < b_batches; ++bb) {
      float* out = gb.data() + bb * d.k * d.n;
      for (int64_t p = 0; p < d.k; ++p) {
        for (int64_t j = 0; j < d.n; ++j) {
          float acc = 0.0f;
          for (int64_t s = 0; s < per_b; ++s) {
            int64_t bi = bb * per_b + s;
            OpView x{av.data() + bi * d.m * d.k, trans_a ? d.m : d.k, trans_a};
            const float* g = gv.data() + bi * d.m * d.n;
            for (int64_t i = 0; i < d.m; ++i) acc += x(i, p) * g[i * d.n + j];
          }
          out[trans_b ? j * d.k + p : p * d.n + j] = acc;
        }
      }
    }
    grads.grad_b = Tensor::FromVector(gb, b.shape(), b.dtype());
  }
  return grads;
}

}  // namespace tessera::ops::internal
