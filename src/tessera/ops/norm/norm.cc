// LayerNorm / RMSNorm: argument checks, dispatch and reference kernels
// (scalar loops, double accumulators). Optimized kernels: norm_kernels.cc.
#include "tessera/ops/norm/norm.h"

#include <cmath>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/norm/norm_kernels.h"

namespace tessera::ops {
namespace {

struct Dims {
  int64_t rows;
  int64_t D;
};

Dims CheckInputs(const char* op, const Tensor& x, const Tensor& gamma, const Tensor* beta) {
  TESSERA_OP_CHECK(x.defined() && IsFloating(x.dtype()), "{}: x must be a floating tensor, got {}", op,
                   x.defined() ? DTypeName(x.dtype()) : "undefined");
  TESSERA_OP_CHECK(x.dim() >= 1 && x.size(-1) > 0, "{}: x must have a non-empty last axis, got shape {}", op,
                   ShapeString(x.shape()));
  const int64_t D = x.size(-1);
  TESSERA_OP_CHECK(gamma.defined() && IsFloating(gamma.dtype()) && gamma.shape() == Shape{D},
                   "{}: gamma must be a floating [{}] tensor for x {} {}, got {} {}", op, D, DTypeName(x.dtype()),
                   ShapeString(x.shape()), gamma.defined() ? DTypeName(gamma.dtype()) : "undefined",
                   gamma.defined() ? ShapeString(gamma.shape()) : "");
  if (beta != nullptr) {
    TESSERA_OP_CHECK(beta->defined() && IsFloating(beta->dtype()) && beta->shape() == Shape{D},
                     "{}: beta must be a floating [{}] tensor for x {}, got {} {}", op, D, ShapeString(x.shape()),
                     beta->defined() ? DTypeName(beta->dtype()) : "undefined",
                     beta->defined() ? ShapeString(beta->shape()) : "");
  }
  return {x.numel() / D, D};
}

void CheckBackward(const char* op, bool rms, const Tensor& grad_out, const Tensor& x, const NormResult& fwd,
                   int64_t rows) {
  TESSERA_OP_CHECK(grad_out.defined() && grad_out.shape() == x.shape() && grad_out.dtype() == x.dtype(),
                   "{}: grad_out must match x ({} {}), got {} {}", op, DTypeName(x.dtype()), ShapeString(x.shape()),
                   grad_out.defined() ? DTypeName(grad_out.dtype()) : "undefined",
                   grad_out.defined() ? ShapeString(grad_out.shape()) : "");
  TESSERA_OP_CHECK(fwd.rstd.defined() && fwd.rstd.dtype() == DType::kF32 && fwd.rstd.numel() == rows,
                   "{}: fwd.rstd must be fp32 with {} elements (one per row of x {})", op, rows,
                   ShapeString(x.shape()));
  if (!rms) {
    TESSERA_OP_CHECK(fwd.mean.defined() && fwd.mean.dtype() == DType::kF32 && fwd.mean.numel() == rows,
                     "{}: fwd.mean must be fp32 with {} elements (one per row of x {})", op, rows,
                     ShapeString(x.shape()));
  }
}

// gamma/beta as contiguous fp32 (no copy when already fp32 and contiguous).
Tensor AsF32Param(const Tensor& t) { return t.dtype() == DType::kF32 ? t.Contiguous() : t.To(DType::kF32); }

NormResult ForwardReference(bool rms, const Tensor& x, const Tensor& gamma, const Tensor* beta, float eps, Dims d) {
  std::vector<float> xv = x.ToFloatVector(), g = gamma.ToFloatVector(), b;
  if (beta != nullptr) b = beta->ToFloatVector();
  std::vector<float> y(xv.size()), mean(d.rows), rstd(d.rows);
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* row = xv.data() + r * d.D;
    double m = 0, v = 0;
    if (!rms) {
      for (int64_t i = 0; i < d.D; ++i) m += row[i];
      m /= static_cast<double>(d.D);
    }
    for (int64_t i = 0; i < d.D; ++i) v += (row[i] - m) * (row[i] - m);
    float rs = static_cast<float>(1.0 / std::sqrt(v / static_cast<double>(d.D) + eps));
    mean[r] = static_cast<float>(m);
    rstd[r] = rs;
    for (int64_t i = 0; i < d.D; ++i) {
      float xh = (row[i] - mean[r]) * rs;
      y[r * d.D + i] = xh * g[i] + (beta != nullptr ? b[i] : 0.0f);
    }
  }
  NormResult res;
  res.y = Tensor::Empty(x.shape(), x.dtype());
  res.y.CopyFrom(Tensor::FromVector(y, x.shape()));
  res.rstd = Tensor::FromVector(rstd, {d.rows});
  if (!rms) res.mean = Tensor::FromVector(mean, {d.rows});
  return res;
}

NormGrads BackwardReference(bool rms, const Tensor& dy_t, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                            const NormResult& fwd, Dims d) {
  std::vector<float> xv = x.ToFloatVector(), dy = dy_t.ToFloatVector(), g = gamma.ToFloatVector();
  std::vector<float> rstd = fwd.rstd.ToFloatVector(), mean(d.rows, 0.0f);
  if (!rms) mean = fwd.mean.ToFloatVector();
  std::vector<float> dx(xv.size());
  std::vector<double> dg(d.D, 0.0), db(d.D, 0.0);
  for (int64_t r = 0; r < d.rows; ++r) {
    double c1 = 0, c2 = 0;
    for (int64_t i = 0; i < d.D; ++i) {
      int64_t k = r * d.D + i;
      double xh = (xv[k] - mean[r]) * rstd[r];
      double dxh = static_cast<double>(dy[k]) * g[i];
      c1 += dxh;
      c2 += dxh * xh;
      dg[i] += dy[k] * xh;
      db[i] += dy[k];
    }
    c1 /= static_cast<double>(d.D);
    c2 /= static_cast<double>(d.D);
    if (rms) c1 = 0;
    for (int64_t i = 0; i < d.D; ++i) {
      int64_t k = r * d.D + i;
      double xh = (xv[k] - mean[r]) * rstd[r];
      dx[k] = static_cast<float>(rstd[r] * (static_cast<double>(dy[k]) * g[i] - c1 - xh * c2));
    }
  }
  NormGrads grads;
  grads.grad_x = Tensor::Empty(x.shape(), x.dtype());
  grads.grad_x.CopyFrom(Tensor::FromVector(dx, x.shape()));
  std::vector<float> dgf(dg.begin(), dg.end()), dbf(db.begin(), db.end());
  grads.grad_gamma = Tensor::Empty(gamma.shape(), gamma.dtype());
  grads.grad_gamma.CopyFrom(Tensor::FromVector(dgf, gamma.shape()));
  if (beta != nullptr) {
    grads.grad_beta = Tensor::Empty(beta->shape(), beta->dtype());
    grads.grad_beta.CopyFrom(Tensor::FromVector(dbf, beta->shape()));
  }
  return grads;
}

NormResult Forward(bool rms, const Tensor& x_in, const Tensor& gamma, const Tensor* beta, float eps) {
  const char* op = rms ? "rmsnorm" : "layernorm";
  Dims d = CheckInputs(op, x_in, gamma, beta);
  TESSERA_OP_CHECK(eps >= 0.0f && std::isfinite(eps), "{}: eps must be finite and >= 0, got {}", op, eps);
  Tensor x = x_in.Contiguous();
  if (UseReference()) return ForwardReference(rms, x, gamma, beta, eps, d);
  Tensor g = AsF32Param(gamma);
  Tensor b = beta != nullptr ? AsF32Param(*beta) : Tensor();
  NormResult res;
  res.y = Tensor::Empty(x.shape(), x.dtype());
  res.rstd = Tensor::Empty({d.rows}, DType::kF32);
  if (!rms) res.mean = Tensor::Empty({d.rows}, DType::kF32);
  kern::NormForwardOptimized(rms, x, g.data<float>(), b.defined() ? b.data<float>() : nullptr, eps, res.y,
                             rms ? nullptr : res.mean.data<float>(), res.rstd.data<float>(), d.rows, d.D);
  return res;
}

NormGrads Backward(bool rms, const Tensor& grad_out, const Tensor& x_in, const Tensor& gamma, const Tensor* beta,
                   const NormResult& fwd) {
  const char* op = rms ? "rmsnorm backward" : "layernorm backward";
  Dims d = CheckInputs(op, x_in, gamma, beta);
  CheckBackward(op, rms, grad_out, x_in, fwd, d.rows);
  Tensor x = x_in.Contiguous(), dy = grad_out.Contiguous();
  if (UseReference()) return BackwardReference(rms, dy, x, gamma, beta, fwd, d);
  Tensor g = AsF32Param(gamma);
  Tensor rstd = fwd.rstd.Contiguous();
  Tensor mean = rms ? Tensor() : fwd.mean.Contiguous();
  NormGrads grads;
  grads.grad_x = Tensor::Empty(x.shape(), x.dtype());
  Tensor dg = Tensor::Empty({d.D}, DType::kF32);
  Tensor db = beta != nullptr ? Tensor::Empty({d.D}, DType::kF32) : Tensor();
  kern::NormBackwardOptimized(rms, dy, x, g.data<float>(), rms ? nullptr : mean.data<float>(), rstd.data<float>(),
                              grads.grad_x, dg.data<float>(), db.defined() ? db.data<float>() : nullptr, d.rows, d.D);
  grads.grad_gamma = dg.To(gamma.dtype());
  if (beta != nullptr) grads.grad_beta = db.To(beta->dtype());
  return grads;
}

}  // namespace

NormResult LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  return Forward(/*rms=*/false, x, gamma, &beta, eps);
}

NormGrads LayerNormBackward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const NormResult& fwd) {
  // beta's dtype is only needed for its gradient; it matches gamma's role.
  return Backward(/*rms=*/false, grad_out, x, gamma, &gamma, fwd);
}

NormResult RmsNorm(const Tensor& x, const Tensor& gamma, float eps) {
  return Forward(/*rms=*/true, x, gamma, nullptr, eps);
}

NormGrads RmsNormBackward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const NormResult& fwd) {
  return Backward(/*rms=*/true, grad_out, x, gamma, nullptr, fwd);
}

}  // namespace tessera::ops
