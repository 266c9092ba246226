// MatMul front end: validates, maps each operand's last two axes onto a
// row-major GEMM operand (a transposed view becomes a flipped trans flag, any
// other layout is copied), folds batch axes into M (or into K for the
// batch-summed weight gradient) when the memory layout allows, and runs
// the GEMM driver. bf16 and fp16 results are accumulated in fp32 and rounded
// once, block by block as the driver finishes them.
#include "tessera/ops/matmul/matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/matmul/matmul_internal.h"
#include "tessera/tile/gemm.h"

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

// fp32 -> bf16, round to nearest even, NaN kept quiet: bit-identical to
// bf16::FromFloat, 8 lanes at a time.
void RoundToBF16(const float* src, bf16* dst, int64_t n) {
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
    __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i].bits = bf16::FromFloat(src[i]);
}

// fp32 -> fp16 with F16C (round to nearest even; IEEE subnormals/overflow).
void RoundToFP16(const float* src, fp16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i].bits = fp16::FromFloat(src[i]);
}

// bf16 / fp16 values of n floats in place: y = round(float(y) + bias[j]) —
// exactly what an element-wise Add of the rounded product and the bias
// computes, so a fused bias is bitwise the unfused MatMul + Add.
template <typename Half>
void AddBiasRounded(Half* y, const float* bias, int64_t n) {
  float tmp[64];
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t len = std::min<int64_t>(64, n - i);
    for (int64_t j = 0; j < len; ++j) tmp[j] = static_cast<float>(y[i + j]) + bias[i + j];
    if constexpr (std::is_same_v<Half, bf16>) {
      RoundToBF16(tmp, y + i, len);
    } else {
      RoundToFP16(tmp, y + i, len);
    }
  }
}

// The result of a GEMM sequence. fp32 results are written in place. bf16 and
// fp16 results are rounded from fp32 by the GEMM driver's epilogue as blocks
// finish: straight from L1-resident strips when a GEMM has one K block and
// writes final values, else from an fp32 scratch tensor allocated on demand.
// An optional bias (one value per output column) is added by the same
// epilogue, after the rounding for bf16 / fp16 (see AddBiasRounded).
class F32Result {
 public:
  F32Result(const Shape& shape, DType dtype) : out_(Tensor::Empty(shape, dtype)) {
    if (dtype == DType::kF32) acc_ = out_;
  }
  // bias: out's dtype, [columns].
  void SetBias(const Tensor& bias) {
    Tensor b = bias.Contiguous().To(DType::kF32);
    bias_.assign(b.data<float>(), b.data<float>() + b.numel());
  }
  bool needs_rounding() const { return out_.dtype() != DType::kF32; }
  // Whether finished blocks must pass through Finalize (rounding or bias).
  bool needs_epilogue() const { return needs_rounding() || !bias_.empty(); }
  float* data() {
    if (!acc_.defined()) acc_ = Tensor::Empty(out_.shape(), DType::kF32);
    return acc_.data<float>();
  }

  // Finishes a block: source rows at src + r*src_ld, destination elements
  // [offset + (row + r)*ld + col + c] (for fp32 possibly the source itself).
  void Finalize(const float* src, int64_t src_ld, int64_t offset, int64_t ld, int64_t row, int64_t rows, int64_t col,
                int64_t cols) const {
    const float* bias = bias_.empty() ? nullptr : bias_.data() + col;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = offset + (row + r) * ld + col;
      const float* s = src + r * src_ld;
      if (out_.dtype() == DType::kBF16) {
        bf16* d = static_cast<bf16*>(out_.raw_data()) + at;
        RoundToBF16(s, d, cols);
        if (bias != nullptr) AddBiasRounded(d, bias, cols);
      } else if (out_.dtype() == DType::kF16) {
        fp16* d = static_cast<fp16*>(out_.raw_data()) + at;
        RoundToFP16(s, d, cols);
        if (bias != nullptr) AddBiasRounded(d, bias, cols);
      } else if (bias != nullptr) {
        float* d = static_cast<float*>(out_.raw_data()) + at;
        for (int64_t j = 0; j < cols; ++j) d[j] = s[j] + bias[j];
      }
    }
  }

  // finalized: whether the GEMM epilogues covered every element already.
  Tensor Finish(bool finalized) {
    if (!needs_epilogue() || finalized) return out_;
    const float* src = data();
    if (!bias_.empty()) {  // row by row: the bias is indexed by column
      const int64_t cols = out_.size(-1), rows = cols > 0 ? out_.numel() / cols : 0;
#pragma omp parallel for schedule(static) if (out_.numel() >= kParallelConvert && !omp_in_parallel())
      for (int64_t r = 0; r < rows; ++r) Finalize(src + r * cols, 0, 0, cols, r, 1, 0, cols);
      return out_;
    }
    int64_t count = out_.numel();
    constexpr int64_t kChunk = 4096;
    int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (count >= kParallelConvert && !omp_in_parallel())
    for (int64_t i = 0; i < chunks; ++i) {
      Finalize(src + i * kChunk, 0, i * kChunk, 0, 0, 1, 0, std::min(kChunk, count - i * kChunk));
    }
    return out_;
  }

 private:
  Tensor out_;
  Tensor acc_;               // fp32 values (the output itself for fp32)
  std::vector<float> bias_;  // per output column; empty: none
};

// Where one GEMM writes: out's matrix at element `offset` with row pitch
// ldc, and whether its values are final (then bf16/fp16 are rounded as it goes).
struct Dest {
  F32Result& res;
  int64_t offset;
  int64_t ldc;
  bool final;
};

struct RoundContext {
  const F32Result* res;
  int64_t offset, ldc;
};

void FinalizeBlock(void* ctx, const void* block, int64_t ld, int64_t row, int64_t rows, int64_t col, int64_t cols) {
  auto* rc = static_cast<const RoundContext*>(ctx);
  rc->res->Finalize(static_cast<const float*>(block), ld, rc->offset, rc->ldc, row, rows, col, cols);
}

// Operands are validated and ld >= their row length by construction, so the
// driver is called directly (with the rounding epilogue when needed).
void Gemm(const Operand& x, int64_t xi, const Operand& y, int64_t yi, int64_t m, int64_t n, int64_t k, float beta,
          const Dest& dest) {
  RoundContext ctx{&dest.res, dest.offset, dest.ldc};
  const tile::Epilogue epilogue{&FinalizeBlock, &ctx};
  const bool round = dest.final && dest.res.needs_epilogue();
  const bool bf16_inputs = x.dtype == DType::kBF16;
  const tile::GemmType type = bf16_inputs ? tile::GemmType::kBf16F32 : tile::GemmType::kF32;
  // Rounded outputs of one-K-block GEMMs never touch an fp32 C.
  float* c = round && beta == 0.0f && tile::FitsOneKBlock(type, k) ? nullptr : dest.res.data() + dest.offset;
  auto run = [&](auto* type_tag) {
    using T = std::remove_pointer_t<decltype(type_tag)>;
    tile::GemmArgs<T, T, float> g;
    g.trans_a = x.trans;
    g.trans_b = y.trans;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = static_cast<const T*>(x.hold.raw_data()) + x.Offset(xi);
    g.lda = x.ld;
    g.b = static_cast<const T*>(y.hold.raw_data()) + y.Offset(yi);
    g.ldb = y.ld;
    g.beta = beta;
    g.c = c;
    g.ldc = dest.ldc;
    g.epilogue = round ? &epilogue : nullptr;
    tile::Gemm(g);
  };
  if (bf16_inputs) {
    run(static_cast<bf16*>(nullptr));
  } else {
    run(static_cast<float*>(nullptr));
  }
}

// C_i[m, n] = op(X_i) @ op(Y_i) for i < batch into `out` (contiguous). With
// sum_batch, out is one [m, n] matrix holding the sum over the batch.
// Returns whether every output element was rounded by the GEMM epilogues.
bool RunGemms(const Operand& x, const Operand& y, int64_t batch, int64_t m, int64_t n, int64_t k, F32Result& out,
              bool sum_batch) {
  if (m == 0 || n == 0) return true;
  if (sum_batch) {
    if (batch == 0) {
      std::fill(out.data(), out.data() + m * n, 0.0f);
      return false;
    }
    // Contraction over (batch, k): one GEMM when both stack along k.
    if (x.trans && !y.trans && x.Stacked(batch, k) && y.Stacked(batch, k)) {
      Gemm(x, 0, y, 0, m, n, k * batch, 0.0f, {out, 0, n, true});
      return true;
    }
    for (int64_t i = 0; i < batch; ++i) Gemm(x, i, y, i, m, n, k, i == 0 ? 0.0f : 1.0f, {out, 0, n, i == batch - 1});
    return true;
  }
  if (y.offsets.size() == 1 && !x.trans && x.Stacked(batch, m)) {
    Gemm(x, 0, y, 0, m * batch, n, k, 0.0f, {out, 0, n, true});  // shared Y: fold the batch into M
    return true;
  }
  int64_t macs = m * n * k;
  if (batch > 1 && macs < kSmallGemmMacs && macs * batch >= kSmallGemmMacs && !omp_in_parallel()) {
    // Allocate the fp32 scratch (if any GEMM needs it) before the threads start.
    if (!out.needs_rounding() ||
        !tile::FitsOneKBlock(x.dtype == DType::kBF16 ? tile::GemmType::kBf16F32 : tile::GemmType::kF32, k)) {
      out.data();
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) Gemm(x, i, y, i, m, n, k, 0.0f, {out, i * m * n, n, true});
    return true;
  }
  for (int64_t i = 0; i < batch; ++i) Gemm(x, i, y, i, m, n, k, 0.0f, {out, i * m * n, n, true});
  return true;
}

}  // namespace

Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  if (UseReference()) return internal::ReferenceMatMul(a, b, trans_a, trans_b);
  internal::MatMulDims d = internal::CheckMatMulArgs(a, b, trans_a, trans_b);
  F32Result out(d.out_shape, a.dtype());
  bool rounded = true;
  if (d.batch * d.m * d.n > 0) {
    rounded = RunGemms(MakeOperand(a, trans_a), MakeOperand(b, trans_b), d.batch, d.m, d.n, d.k, out, false);
  }
  return out.Finish(rounded);
}

Tensor Linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TESSERA_OP_CHECK(weight.defined() && weight.dim() == 2, "linear: weight must be 2-D [out, in], got {}",
                   weight.defined() ? ShapeString(weight.shape()) : "undefined");
  if (!bias.defined()) return MatMul(x, weight, false, true);
  TESSERA_OP_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0) && bias.dtype() == x.dtype(),
                   "linear: bias must be {} [{}] (the input's dtype, one value per output feature), got {} {}",
                   DTypeName(x.dtype()), weight.size(0), DTypeName(bias.dtype()), ShapeString(bias.shape()));
  internal::MatMulDims d = internal::CheckMatMulArgs(x, weight, false, true);
  if (UseReference()) return internal::ReferenceLinear(x, weight, bias);
  F32Result out(d.out_shape, x.dtype());
  out.SetBias(bias);
  bool finalized = true;
  if (d.batch * d.m * d.n > 0) {
    finalized = RunGemms(MakeOperand(x, false), MakeOperand(weight, true), d.batch, d.m, d.n, d.k, out, false);
  }
  return out.Finish(finalized);
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
    bool rounded = true;
    if (a.numel() > 0) {
      if (!trans_a) {  // grad_a[m, k] = g @ op(b)^T
        rounded = RunGemms(MakeOperand(grad_out, false), MakeOperand(b, !trans_b), d.batch, d.m, d.k, d.n, ga, false);
      } else {  // grad_a[k, m] = op(b) @ g^T
        rounded = RunGemms(MakeOperand(b, trans_b), MakeOperand(grad_out, true), d.batch, d.k, d.m, d.n, ga, false);
      }
    }
    grads.grad_a = ga.Finish(rounded);
  }
  if (need_b) {
    F32Result gb(b.shape(), b.dtype());
    bool rounded = true;
    if (b.numel() > 0) {
      bool sum = !d.batched_b;
      if (!trans_b) {  // grad_b[k, n] = op(a)^T @ g
        rounded = RunGemms(MakeOperand(a, !trans_a), MakeOperand(grad_out, false), d.batch, d.k, d.n, d.m, gb, sum);
      } else {  // grad_b[n, k] = g^T @ op(a)
        rounded = RunGemms(MakeOperand(grad_out, true), MakeOperand(a, trans_a), d.batch, d.n, d.k, d.m, gb, sum);
      }
    }
    grads.grad_b = gb.Finish(rounded);
  }
  return grads;
}

}  // namespace tessera::ops
