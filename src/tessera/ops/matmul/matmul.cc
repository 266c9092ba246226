// MatMul front end: validates, maps each operand's last two axes onto a
// row-major GEMM operand (a transposed view becomes a flipped trans flag, any
// other layout is copied), folds batch axes into M (or into K for the
// batch-summed weight gradient) when the memory layout allows, and runs
// GemmF32 / GemmBF16F32. bf16 and fp16 results are accumulated in fp32 and
// rounded once.
#include "tessera/ops/matmul/matmul.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/matmul/gemm.h"
#include "tessera/ops/matmul/matmul_internal.h"

namespace tessera::ops {
namespace {

// Multiply-adds below which one GEMM runs single-threaded; batches of such
// GEMMs are spread over threads instead.
constexpr int64_t kSmallGemmMacs = int64_t{1} << 21;
// Elements below which the fp32 -> bf16/fp16 rounding pass stays serial.
constexpr int64_t kParallelConvert = int64_t{1} << 16;

// One GEMM operand: matrix i of the batch is stored row-major at
// base + Offset(i) elements with leading dimension ld; `trans` means the GEMM
// uses its transpose. A single offset means one matrix shared by the batch.
struct Operand {
  Tensor hold;  // the (possibly converted or copied) tensor the pointer refers to
  DType dtype = DType::kF32;
  int64_t ld = 1;
  bool trans = false;
  std::vector<int64_t> offsets;

  int64_t Offset(int64_t i) const { return offsets.size() == 1 ? offsets[0] : offsets[i]; }
  // True if the batch's matrices (each `stored_rows` rows) lie back to back.
  bool Stacked(int64_t batch, int64_t stored_rows) const {
    if (batch == 1) return true;
    if (static_cast<int64_t>(offsets.size()) != batch) return false;
    for (int64_t i = 1; i < batch; ++i) {
      if (offsets[i] != offsets[0] + i * stored_rows * ld) return false;
    }
    return true;
  }
};

DType ComputeDType(DType dtype) { return dtype == DType::kBF16 ? DType::kBF16 : DType::kF32; }

Operand MakeOperand(const Tensor& t, bool op_trans) {
  Operand o;
  o.dtype = ComputeDType(t.dtype());
  Tensor x = t.dtype() == o.dtype ? t : t.To(o.dtype);
  int rank = x.dim();
  int64_t rows = x.size(-2), cols = x.size(-1);
  int64_t sr = x.strides()[rank - 2], sc = x.strides()[rank - 1];
  bool row_major = (cols == 1 || sc == 1) && (rows == 1 || sr >= cols);
  bool col_major = !row_major && (rows == 1 || sr == 1) && (cols == 1 || sc >= rows);
  if (row_major) {
    o.ld = rows == 1 ? cols : sr;
    o.trans = op_trans;
  } else if (col_major) {
    o.ld = cols == 1 ? rows : sc;
    o.trans = !op_trans;
  } else {
    x = x.Contiguous();
    o.ld = cols;
    o.trans = op_trans;
  }
  o.ld = std::max<int64_t>(o.ld, 1);
  o.hold = x;
  // Offsets of the matrices over the leading axes, in row-major batch order.
  int lead = rank - 2;
  int64_t count = 1;
  for (int i = 0; i < lead; ++i) count *= x.size(i);
  o.offsets.resize(static_cast<size_t>(std::max<int64_t>(count, 1)));
  std::vector<int64_t> idx(static_cast<size_t>(lead), 0);
  for (int64_t c = 0; c < count; ++c) {
    int64_t off = 0;
    for (int i = 0; i < lead; ++i) off += idx[i] * x.strides()[i];
    o.offsets[c] = off;
    for (int i = lead - 1; i >= 0; --i) {
      if (++idx[i] < x.size(i)) break;
      idx[i] = 0;
    }
  }
  return o;
}

void Gemm(const Operand& x, int64_t xi, const Operand& y, int64_t yi, int64_t m, int64_t n, int64_t k, float beta,
          float* c, int64_t ldc) {
  if (x.dtype == DType::kF32) {
    GemmF32(x.trans, y.trans, m, n, k, 1.0f, static_cast<const float*>(x.hold.raw_data()) + x.Offset(xi), x.ld,
            static_cast<const float*>(y.hold.raw_data()) + y.Offset(yi), y.ld, beta, c, ldc);
  } else {
    GemmBF16F32(x.trans, y.trans, m, n, k, 1.0f, static_cast<const bf16*>(x.hold.raw_data()) + x.Offset(xi), x.ld,
                static_cast<const bf16*>(y.hold.raw_data()) + y.Offset(yi), y.ld, beta, c, ldc);
  }
}

// C_i[m, n] = op(X_i) @ op(Y_i) for i < batch, C contiguous. With sum_batch,
// C is one [m, n] matrix holding the sum over the batch.
void RunGemms(const Operand& x, const Operand& y, int64_t batch, int64_t m, int64_t n, int64_t k, float* c,
              bool sum_batch) {
  if (m == 0 || n == 0) return;
  if (sum_batch) {
    if (batch == 0) {
      std::fill(c, c + m * n, 0.0f);
      return;
    }
    // Contraction over (batch, k): one GEMM when both stack along k.
    if (x.trans && !y.trans && x.Stacked(batch, k) && y.Stacked(batch, k)) {
      Gemm(x, 0, y, 0, m, n, k * batch, 0.0f, c, n);
      return;
    }
    for (int64_t i = 0; i < batch; ++i) Gemm(x, i, y, i, m, n, k, i == 0 ? 0.0f : 1.0f, c, n);
    return;
  }
  if (y.offsets.size() == 1 && !x.trans && x.Stacked(batch, m)) {
    Gemm(x, 0, y, 0, m * batch, n, k, 0.0f, c, n);  // shared Y: fold the batch into M
    return;
  }
  int64_t macs = m * n * k;
  if (batch > 1 && macs < kSmallGemmMacs && macs * batch >= kSmallGemmMacs && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) Gemm(x, i, y, i, m, n, k, 0.0f, c + i * m * n, n);
    return;
  }
  for (int64_t i = 0; i < batch; ++i) Gemm(x, i, y, i, m, n, k, 0.0f, c + i * m * n, n);
}

// An fp32 destination for a result of `dtype`: the output itself for fp32,
// else a scratch tensor rounded into the output by Finish().
class F32Result {
 public:
  F32Result(const Shape& shape, DType dtype) : out_(Tensor::Empty(shape, dtype)) {
    acc_ = dtype == DType::kF32 ? out_ : Tensor::Empty(shape, DType::kF32);
  }
  float* data() const { return acc_.data<float>(); }
  Tensor Finish() {
    if (out_.dtype() == DType::kF32) return out_;
    const float* src = acc_.data<float>();
    int64_t count = out_.numel();
    if (out_.dtype() == DType::kBF16) {
      bf16* dst = out_.data<bf16>();
#pragma omp parallel for schedule(static) if (count >= kParallelConvert && !omp_in_parallel())
      for (int64_t i = 0; i < count; ++i) dst[i].bits = bf16::FromFloat(src[i]);
    } else {
      fp16* dst = out_.data<fp16>();
#pragma omp parallel for schedule(static) if (count >= kParallelConvert && !omp_in_parallel())
      for (int64_t i = 0; i < count; ++i) dst[i].bits = fp16::FromFloat(src[i]);
    }
    return out_;
  }

 private:
  Tensor out_;
  Tensor acc_;
};

}  // namespace

Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  if (UseReference()) return internal::ReferenceMatMul(a, b, trans_a, trans_b);
  internal::MatMulDims d = internal::CheckMatMulArgs(a, b, trans_a, trans_b);
  F32Result out(d.out_shape, a.dtype());
  if (d.batch * d.m * d.n > 0) {
    Operand x = MakeOperand(a, trans_a);
    Operand y = MakeOperand(b, trans_b);
    RunGemms(x, y, d.batch, d.m, d.n, d.k, out.data(), false);
  }
  return out.Finish();
}

MatMulGrads MatMulBackward(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                           bool need_a, bool need_b) {
  if (UseReference()) {
    return internal::ReferenceMatMulBackward(grad_out, a, b, trans_a, trans_b, need_a, need_b);
  }
  internal::MatMulDims d = internal::CheckMatMulBackwardArgs(grad_out, a, b, trans_a, trans_b);
  MatMulGrads grads;
  if (need_a) {
    F32Result ga(a.shape(), a.dtype());
    if (a.numel() > 0) {
      if (!trans_a) {  // grad_a[m, k] = g @ op(b)^T
        RunGemms(MakeOperand(grad_out, false), MakeOperand(b, !trans_b), d.batch, d.m, d.k, d.n, ga.data(), false);
      } else {  // grad_a[k, m] = op(b) @ g^T
        RunGemms(MakeOperand(b, trans_b), MakeOperand(grad_out, true), d.batch, d.k, d.m, d.n, ga.data(), false);
      }
    }
    grads.grad_a = ga.Finish();
  }
  if (need_b) {
    F32Result gb(b.shape(), b.dtype());
    if (b.numel() > 0) {
      bool sum = !d.batched_b;
      if (!trans_b) {  // grad_b[k, n] = op(a)^T @ g
        RunGemms(MakeOperand(a, !trans_a), MakeOperand(grad_out, false), d.batch, d.k, d.n, d.m, gb.data(), sum);
      } else {  // grad_b[n, k] = g^T @ op(a)
        RunGemms(MakeOperand(grad_out, true), MakeOperand(a, trans_a), d.batch, d.n, d.k, d.m, gb.data(), sum);
      }
    }
    grads.grad_b = gb.Finish();
  }
  return grads;
}

}  // namespace tessera::ops
