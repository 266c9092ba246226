// BatchNorm2d: argument checks, dispatch, the running-statistics update and
// the reference kernels (scalar loops, double accumulators, the textbook
// formulas). Optimized kernels: batch_norm_kernels.cc.
#include "tessera/ops/norm/batch_norm.h"

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/norm/batch_norm_kernels.h"

namespace tessera::ops {
namespace {

using kern::BnGeom;

std::string_view DTypeOrUndefined(const Tensor& t) { return t.defined() ? DTypeName(t.dtype()) : "undefined"; }
std::string ShapeOrUndefined(const Tensor& t) { return t.defined() ? ShapeString(t.shape()) : "undefined"; }

BnGeom CheckX(const char* op, const Tensor& x, ImageLayout layout) {
  TESSERA_OP_CHECK(x.defined() && x.dtype() == DType::kF32, "{}: x must be fp32, got {}", op, DTypeOrUndefined(x));
  TESSERA_OP_CHECK(x.dim() == 4, "{}: x must be 4-d ({} layout), got shape {}", op, ImageLayoutName(layout),
                   ShapeString(x.shape()));
  TESSERA_OP_CHECK(x.numel() > 0, "{}: x must not be empty, got shape {}", op, ShapeString(x.shape()));
  const bool nhwc = layout == ImageLayout::kNHWC;
  return BnGeom{x.size(0), nhwc ? x.size(3) : x.size(1), nhwc ? x.size(1) * x.size(2) : x.size(2) * x.size(3), nhwc};
}

void CheckChannelTensor(const char* op, const char* name, const Tensor& t, const BnGeom& g, const Tensor& x) {
  TESSERA_OP_CHECK(t.defined() && t.dtype() == DType::kF32 && t.shape() == Shape{g.C},
                   "{}: {} must be fp32 [{}] (C of x {} {}), got {} {}", op, name, g.C,
                   g.nhwc ? "NHWC" : "NCHW", ShapeString(x.shape()), DTypeOrUndefined(t), ShapeOrUndefined(t));
}

int64_t At(const BnGeom& g, int64_t n, int64_t c, int64_t i) {
  return g.nhwc ? (n * g.HW + i) * g.C + c : (n * g.C + c) * g.HW + i;
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<float> v = t.ToFloatVector();
  return std::vector<double>(v.begin(), v.end());
}

Tensor FromDoubles(const std::vector<double>& v) {
  return Tensor::FromVector(std::vector<float>(v.begin(), v.end()), {static_cast<int64_t>(v.size())});
}

// Two-pass mean and biased variance in double.
void StatsReference(const BnGeom& g, const float* x, std::vector<double>& mean, std::vector<double>& var) {
  const double m = static_cast<double>(g.N * g.HW);
  for (int64_t c = 0; c < g.C; ++c) {
    double s = 0, s2 = 0;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t i = 0; i < g.HW; ++i) s += x[At(g, n, c, i)];
    mean[c] = s / m;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t i = 0; i < g.HW; ++i) s2 += (x[At(g, n, c, i)] - mean[c]) * (x[At(g, n, c, i)] - mean[c]);
    var[c] = s2 / m;
  }
}

// running = (1 - momentum) * running + momentum * value (as torch.nn.BatchNorm2d).
void UpdateRunning(Tensor& running, const std::vector<double>& value, double momentum) {
  std::vector<double> r = ToDoubles(running);
  for (size_t c = 0; c < r.size(); ++c) r[c] = (1.0 - momentum) * r[c] + momentum * value[c];
  running.CopyFrom(FromDoubles(r));
}

}  // namespace

BatchNormResult BatchNorm2d(const Tensor& x_in, const Tensor& gamma, const Tensor& beta, Tensor running_mean,
                            Tensor running_var, const BatchNormOptions& options) {
  const char* op = "batch_norm2d";
  const BnGeom g = CheckX(op, x_in, options.layout);
  CheckChannelTensor(op, "gamma", gamma, g, x_in);
  CheckChannelTensor(op, "beta", beta, g, x_in);
  if (running_mean.defined() || !options.training) CheckChannelTensor(op, "running_mean", running_mean, g, x_in);
  if (running_var.defined() || !options.training) CheckChannelTensor(op, "running_var", running_var, g, x_in);
  TESSERA_OP_CHECK(std::isfinite(options.eps) && options.eps >= 0.0f, "{}: eps must be finite and >= 0, got {}", op,
                   options.eps);
  TESSERA_OP_CHECK(std::isfinite(options.momentum), "{}: momentum must be finite, got {}", op, options.momentum);
  const int64_t M = g.N * g.HW;
  TESSERA_OP_CHECK(!options.training || M > 1,
                   "{}: training needs more than 1 value per channel (N*H*W = {} for x {})", op, M,
                   ShapeString(x_in.shape()));
  Tensor x = x_in.Contiguous();
  const float* xp = x.data<float>();
  const bool reference = UseReference();

  std::vector<double> mean(g.C), var(g.C);
  if (!options.training) {
    mean = ToDoubles(running_mean);
    var = ToDoubles(running_var);
  } else if (reference) {
    StatsReference(g, xp, mean, var);
  } else {
    kern::BatchNormStatsOptimized(g, xp, mean.data(), var.data());
  }
  std::vector<double> rstd(g.C);
  for (int64_t c = 0; c < g.C; ++c) rstd[c] = 1.0 / std::sqrt(var[c] + static_cast<double>(options.eps));

  BatchNormResult r;
  r.y = Tensor::Empty(x.shape(), DType::kF32);
  r.save_mean = FromDoubles(mean);
  r.save_rstd = FromDoubles(rstd);
  std::vector<double> gm = ToDoubles(gamma), bt = ToDoubles(beta);
  float* y = r.y.data<float>();
  if (reference) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t i = 0; i < g.HW; ++i) {
          const int64_t k = At(g, n, c, i);
          double v = (xp[k] - mean[c]) * rstd[c] * gm[c] + bt[c];
          if (options.fuse_relu && !(v > 0.0)) v = 0.0;
          y[k] = static_cast<float>(v);
        }
  } else {
    std::vector<float> meanf(mean.begin(), mean.end()), scale(g.C), betaf(bt.begin(), bt.end());
    for (int64_t c = 0; c < g.C; ++c) scale[c] = static_cast<float>(gm[c] * rstd[c]);
    kern::BatchNormApplyOptimized(g, xp, meanf.data(), scale.data(), betaf.data(), options.fuse_relu, y);
  }

  if (options.training) {
    if (running_mean.defined()) UpdateRunning(running_mean, mean, options.momentum);
    if (running_var.defined()) {
      std::vector<double> value(var.begin(), var.end());
      if (options.unbiased_running_var) {
        for (int64_t c = 0; c < g.C; ++c) value[c] *= static_cast<double>(M) / static_cast<double>(M - 1);
      }
      UpdateRunning(running_var, value, options.momentum);
    }
  }
  return r;
}

BatchNormGrads BatchNorm2dBackward(const Tensor& grad_y, const Tensor& x_in, const Tensor& y_in, const Tensor& gamma,
                                   const BatchNormResult& forward, const BatchNormOptions& options) {
  const char* op = "batch_norm2d backward";
  const BnGeom g = CheckX(op, x_in, options.layout);
  CheckChannelTensor(op, "gamma", gamma, g, x_in);
  CheckChannelTensor(op, "forward.save_mean", forward.save_mean, g, x_in);
  CheckChannelTensor(op, "forward.save_rstd", forward.save_rstd, g, x_in);
  TESSERA_OP_CHECK(grad_y.defined() && grad_y.dtype() == DType::kF32 && grad_y.shape() == x_in.shape(),
                   "{}: grad_y must be fp32 {} (x's shape), got {} {}", op, ShapeString(x_in.shape()),
                   DTypeOrUndefined(grad_y), ShapeOrUndefined(grad_y));
  if (options.fuse_relu) {
    TESSERA_OP_CHECK(y_in.defined() && y_in.dtype() == DType::kF32 && y_in.shape() == x_in.shape(),
                     "{}: with fuse_relu, y (the forward's output) must be fp32 {}, got {} {}", op,
                     ShapeString(x_in.shape()), DTypeOrUndefined(y_in), ShapeOrUndefined(y_in));
  }
  Tensor x = x_in.Contiguous(), dy = grad_y.Contiguous();
  Tensor y = options.fuse_relu ? y_in.Contiguous() : Tensor();
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  const float* yp = options.fuse_relu ? y.data<float>() : nullptr;
  const std::vector<double> mean = ToDoubles(forward.save_mean), rstd = ToDoubles(forward.save_rstd),
                            gm = ToDoubles(gamma);
  const double M = static_cast<double>(g.N * g.HW);
  const bool reference = UseReference();

  // Pass 1: sum of dy' and of dy' * (x - mean), dy' = dy masked by y > 0 with fuse_relu.
  std::vector<double> sum_dy(g.C, 0.0), sum_dyx(g.C, 0.0);
  auto masked = [&](int64_t k) { return (yp == nullptr || yp[k] > 0.0f) ? static_cast<double>(dyp[k]) : 0.0; };
  if (reference) {
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t i = 0; i < g.HW; ++i) {
          const int64_t k = At(g, n, c, i);
          sum_dy[c] += masked(k);
          sum_dyx[c] += masked(k) * (xp[k] - mean[c]);
        }
  } else {
    std::vector<float> meanf(mean.begin(), mean.end());
    kern::BatchNormBackwardSumsOptimized(g, dyp, xp, yp, meanf.data(), sum_dy.data(), sum_dyx.data());
  }
  std::vector<double> grad_gamma(g.C);
  for (int64_t c = 0; c < g.C; ++c) grad_gamma[c] = sum_dyx[c] * rstd[c];

  // Pass 2: dx = gamma * rstd * (dy' - sum_dy / M - xhat * grad_gamma / M) in training; the
  // statistics are constants in inference: dx = gamma * rstd * dy'.
  BatchNormGrads grads;
  grads.grad_x = Tensor::Empty(x.shape(), DType::kF32);
  float* dx = grads.grad_x.data<float>();
  const bool training = options.training;
  if (reference) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t i = 0; i < g.HW; ++i) {
          const int64_t k = At(g, n, c, i);
          const double xhat = (xp[k] - mean[c]) * rstd[c];
          double v = masked(k);
          if (training) v -= sum_dy[c] / M + xhat * grad_gamma[c] / M;
          dx[k] = static_cast<float>(gm[c] * rstd[c] * v);
        }
  } else {
    std::vector<float> k(g.C), p(g.C, 0.0f), q(g.C, 0.0f), meanf(mean.begin(), mean.end());
    for (int64_t c = 0; c < g.C; ++c) {
      const double kc = gm[c] * rstd[c];
      k[c] = static_cast<float>(kc);
      if (training) {
        p[c] = static_cast<float>(-kc * rstd[c] * grad_gamma[c] / M);
        q[c] = static_cast<float>(-kc * sum_dy[c] / M);
      }
    }
    kern::BatchNormBackwardDxOptimized(g, dyp, xp, yp, k.data(), p.data(), meanf.data(), q.data(), dx);
  }
  grads.grad_gamma = FromDoubles(grad_gamma);
  grads.grad_beta = FromDoubles(sum_dy);
  return grads;
}

}  // namespace tessera::ops
