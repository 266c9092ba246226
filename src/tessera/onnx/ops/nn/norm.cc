// Batch-statistics normalizations: BatchNormalization (inference and
// training mode), InstanceNormalization and LayerNormalization. Statistics
// are computed in double.
#include <cmath>
#include <string>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"
#include "tessera/onnx/ops/nn/nn_util.h"

namespace tessera::onnx::nn {
namespace {

// A per-channel (or per-element of X[1:]) parameter: element index for channel c, position i in the plane.
struct Param {
  Array a;
  bool per_channel = true;
  int64_t plane = 1;
  double At(int64_t c, int64_t i) const { return a.GetDouble(per_channel ? c : c * plane + i); }
};

StatusOr<Param> ReadParam(const OpContext& ctx, size_t i, int64_t c, int64_t plane) {
  Param p;
  TESSERA_ASSIGN_OR_RETURN(p.a, ctx.tensor(i));
  if (!IsFloatType(p.a.type())) return ctx.Error("input {} must be a float tensor", i);
  p.plane = plane;
  if (p.a.numel() == c) return p;
  if (p.a.numel() == c * plane) {
    p.per_channel = false;
    return p;
  }
  return ctx.Error("input {} has shape {}, expected [{}]", i, p.a.ShapeString(), c);
}

StatusOr<Array> NormInput(const OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("X must be a float tensor, got {}", ElemName(x.type()));
  if (x.rank() < 2) return ctx.Error("X must be N x C x ..., got {}", x.ShapeString());
  return x;
}

Status BatchNormKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, NormInput(ctx));
  const int64_t n = x.dim(0), c = x.dim(1), plane = x.numel() / std::max<int64_t>(n * c, 1);
  TESSERA_ASSIGN_OR_RETURN(double eps, ctx.node().Float("epsilon", 1e-5f));
  TESSERA_ASSIGN_OR_RETURN(double momentum, ctx.node().Float("momentum", 0.9f));
  TESSERA_ASSIGN_OR_RETURN(int64_t training_mode, ctx.node().Int("training_mode", 0));
  const bool training = ctx.opset() >= 14 ? training_mode != 0 : (ctx.num_outputs() > 1 && ctx.output_wanted(1));
  TESSERA_ASSIGN_OR_RETURN(Param scale, ReadParam(ctx, 1, c, plane));
  TESSERA_ASSIGN_OR_RETURN(Param bias, ReadParam(ctx, 2, c, plane));
  TESSERA_ASSIGN_OR_RETURN(Param mean, ReadParam(ctx, 3, c, plane));
  TESSERA_ASSIGN_OR_RETURN(Param var, ReadParam(ctx, 4, c, plane));
  Array y(ElemType::kDouble, x.shape());
  double* py = y.data<double>();
  if (!training) {
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t i = 0; i < plane; ++i) {
          const int64_t k = (b * c + ch) * plane + i;
          py[k] = (x.GetDouble(k) - mean.At(ch, i)) / std::sqrt(var.At(ch, i) + eps) * scale.At(ch, i) + bias.At(ch, i);
        }
      }
    }
    ctx.set_output(0, y.CastTo(x.type()));
    return Status::Ok();
  }
  if (!scale.per_channel || !mean.per_channel || !var.per_channel || !bias.per_channel) {
    return ctx.Error("training mode needs per-channel parameters");
  }
  Array run_mean(mean.a.type(), {c}), run_var(var.a.type(), {c}), saved_mean(mean.a.type(), {c}),
      saved_var(var.a.type(), {c});
  const double cnt = static_cast<double>(std::max<int64_t>(n * plane, 1));
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0, s2 = 0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < plane; ++i) s += x.GetDouble((b * c + ch) * plane + i);
    }
    const double mu = s / cnt;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < plane; ++i) {
        const double d = x.GetDouble((b * c + ch) * plane + i) - mu;
        s2 += d * d;
      }
    }
    const double v = s2 / cnt;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < plane; ++i) {
        const int64_t k = (b * c + ch) * plane + i;
        py[k] = (x.GetDouble(k) - mu) / std::sqrt(v + eps) * scale.At(ch, 0) + bias.At(ch, 0);
      }
    }
    run_mean.SetDouble(ch, mean.At(ch, 0) * momentum + mu * (1 - momentum));
    run_var.SetDouble(ch, var.At(ch, 0) * momentum + v * (1 - momentum));
    saved_mean.SetDouble(ch, mu);
    saved_var.SetDouble(ch, ctx.opset() >= 9 ? 1.0 / std::sqrt(v + eps) : v);
  }
  ctx.set_output(0, y.CastTo(x.type()));
  const Array extra[] = {run_mean, run_var, saved_mean, saved_var};
  for (size_t i = 1; i < ctx.num_outputs() && i <= 4; ++i) {
    if (ctx.output_wanted(i)) ctx.set_output(i, extra[i - 1]);
  }
  return Status::Ok();
}

Status InstanceNormKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, NormInput(ctx));
  const int64_t n = x.dim(0), c = x.dim(1), plane = x.numel() / std::max<int64_t>(n * c, 1);
  TESSERA_ASSIGN_OR_RETURN(double eps, ctx.node().Float("epsilon", 1e-5f));
  TESSERA_ASSIGN_OR_RETURN(Param scale, ReadParam(ctx, 1, c, 1));
  TESSERA_ASSIGN_OR_RETURN(Param bias, ReadParam(ctx, 2, c, 1));
  Array y(ElemType::kDouble, x.shape());
  double* py = y.data<double>();
  for (int64_t p = 0; p < n * c; ++p) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < plane; ++i) s += x.GetDouble(p * plane + i);
    const double mu = s / static_cast<double>(std::max<int64_t>(plane, 1));
    for (int64_t i = 0; i < plane; ++i) s2 += std::pow(x.GetDouble(p * plane + i) - mu, 2);
    const double inv = 1.0 / std::sqrt(s2 / static_cast<double>(std::max<int64_t>(plane, 1)) + eps);
    const int64_t ch = p % c;
    for (int64_t i = 0; i < plane; ++i) {
      py[p * plane + i] = (x.GetDouble(p * plane + i) - mu) * inv * scale.At(ch, 0) + bias.At(ch, 0);
    }
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

// An optional parameter broadcast (unidirectionally) to `inner`: flat index per inner position.
StatusOr<std::vector<int64_t>> InnerIndex(const OpContext& ctx, const Array& p, const std::vector<int64_t>& inner) {
  auto b = BroadcastShapes(p.shape(), inner);
  if (!b.ok() || *b != inner || !IsFloatType(p.type())) {
    return ctx.Error("parameter {} {} does not broadcast to the normalized shape", ElemName(p.type()), p.ShapeString());
  }
  return BroadcastIndex(p.shape(), inner);
}

Status LayerNormKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("X must be a float tensor, got {}", ElemName(x.type()));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", -1));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(x.rank())));
  TESSERA_ASSIGN_OR_RETURN(double eps, ctx.node().Float("epsilon", 1e-5f));
  TESSERA_ASSIGN_OR_RETURN(int64_t stash, ctx.node().Int("stash_type", 1));
  const std::vector<int64_t> inner(x.shape().begin() + axis, x.shape().end());
  const int64_t isz = Numel(inner), outer = isz > 0 ? x.numel() / isz : 0;
  TESSERA_ASSIGN_OR_RETURN(Array scale, ctx.tensor(1));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> si, InnerIndex(ctx, scale, inner));
  Array bias;
  std::vector<int64_t> bi;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(bias, ctx.tensor(2));
    TESSERA_ASSIGN_OR_RETURN(bi, InnerIndex(ctx, bias, inner));
  }
  std::vector<int64_t> stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(x.rank(), 1);
  Array y(ElemType::kDouble, x.shape()), mean(ElemType::kDouble, stat_shape), inv(ElemType::kDouble, stat_shape);
  for (int64_t o = 0; o < outer; ++o) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < isz; ++i) s += x.GetDouble(o * isz + i);
    const double mu = s / static_cast<double>(isz);
    for (int64_t i = 0; i < isz; ++i) s2 += std::pow(x.GetDouble(o * isz + i) - mu, 2);
    const double r = 1.0 / std::sqrt(s2 / static_cast<double>(isz) + eps);
    for (int64_t i = 0; i < isz; ++i) {
      const size_t u = static_cast<size_t>(i);
      y.data<double>()[o * isz + i] =
          (x.GetDouble(o * isz + i) - mu) * r * scale.GetDouble(si[u]) + (bias.defined() ? bias.GetDouble(bi[u]) : 0);
    }
    mean.data<double>()[o] = mu;
    inv.data<double>()[o] = r;
  }
  auto stash_type = ElemTypeFromProto(static_cast<int32_t>(stash));
  const ElemType st = stash_type.ok() && IsFloatType(*stash_type) ? *stash_type : ElemType::kFloat;
  ctx.set_output(0, y.CastTo(x.type()));
  if (ctx.num_outputs() > 1 && ctx.output_wanted(1)) ctx.set_output(1, mean.CastTo(st));
  if (ctx.num_outputs() > 2 && ctx.output_wanted(2)) ctx.set_output(2, inv.CastTo(st));
  return Status::Ok();
}

}  // namespace

void RegisterNormKernels(OpRegistry& r) {
  r.Register("BatchNormalization", BatchNormKernel);
  r.Register("InstanceNormalization", InstanceNormKernel);
  r.Register("LayerNormalization", LayerNormKernel);
}

}  // namespace tessera::onnx::nn
