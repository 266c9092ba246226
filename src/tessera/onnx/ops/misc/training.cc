// The ai.onnx.preview.training optimizers: Adagrad, Adam and Momentum, each
// updating any number of tensors (inputs R, T, then the per-tensor groups).
#include <cmath>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {
namespace {

// The optimizer inputs after R and T: `groups` groups of n tensors each
// (X..., G..., ...), all float, each group's i-th tensor shaped as X_i.
struct OptimizerInputs {
  double r = 0;
  int64_t t = 0;
  size_t n = 0;
  std::vector<Array> tensors;  // group-major: tensors[g * n + i]
  const Array& at(size_t g, size_t i) const { return tensors[g * n + i]; }
};

StatusOr<OptimizerInputs> ReadOptimizerInputs(const OpContext& ctx, size_t groups) {
  OptimizerInputs in;
  TESSERA_ASSIGN_OR_RETURN(in.r, ScalarInput(ctx, 0));
  TESSERA_ASSIGN_OR_RETURN(Array t, ctx.tensor(1));
  if (!IsIntegerType(t.type()) || t.numel() != 1) return ctx.Error("T must be one integer, got {}", t.ShapeString());
  in.t = t.GetInt(0);
  const size_t rest = ctx.num_inputs() < 2 ? 0 : ctx.num_inputs() - 2;
  if (rest == 0 || rest % groups != 0) {
    return ctx.Error("expected R, T and {} groups of tensors, got {} inputs", groups, ctx.num_inputs());
  }
  in.n = rest / groups;
  if (ctx.num_outputs() > in.n * (groups - 1)) {
    return ctx.Error("expected at most {} outputs, got {}", in.n * (groups - 1), ctx.num_outputs());
  }
  for (size_t k = 0; k < rest; ++k) {
    TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(k + 2));
    if (!IsFloatType(a.type())) return ctx.Error("input {} must be float, got {}", k + 2, ElemName(a.type()));
    const Array& x = k < in.n ? a : in.tensors[k % in.n];
    if (a.shape() != x.shape())
      return ctx.Error("input {} has shape {}, expected {}", k + 2, a.ShapeString(), x.ShapeString());
    in.tensors.push_back(std::move(a));
  }
  return in;
}

void SetIfWanted(OpContext& ctx, size_t i, Array a) {
  if (i < ctx.num_outputs()) ctx.set_output(i, std::move(a));
}

}  // namespace

Status AdagradKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(OptimizerInputs in, ReadOptimizerInputs(ctx, 3));
  TESSERA_ASSIGN_OR_RETURN(float decay, ctx.node().Float("decay_factor", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(float eps, ctx.node().Float("epsilon", 1e-6f));
  TESSERA_ASSIGN_OR_RETURN(float norm, ctx.node().Float("norm_coefficient", 0.0f));
  const double r = in.r / (1 + static_cast<double>(in.t) * decay);
  for (size_t i = 0; i < in.n; ++i) {
    const Array &x = in.at(0, i), &g = in.at(1, i), &h = in.at(2, i);
    Array x_new(x.type(), x.shape()), h_new(h.type(), h.shape());
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double gr = norm * x.GetDouble(k) + g.GetDouble(k);
      const double hn = h.GetDouble(k) + gr * gr;
      h_new.SetDouble(k, hn);
      x_new.SetDouble(k, x.GetDouble(k) - r * gr / (std::sqrt(hn) + eps));
    }
    SetIfWanted(ctx, i, std::move(x_new));
    SetIfWanted(ctx, in.n + i, std::move(h_new));
  }
  return Status::Ok();
}

Status AdamKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(OptimizerInputs in, ReadOptimizerInputs(ctx, 4));
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 0.9f));
  TESSERA_ASSIGN_OR_RETURN(float beta, ctx.node().Float("beta", 0.999f));
  TESSERA_ASSIGN_OR_RETURN(float eps, ctx.node().Float("epsilon", 1e-6f));
  TESSERA_ASSIGN_OR_RETURN(float norm, ctx.node().Float("norm_coefficient", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(float norm_post, ctx.node().Float("norm_coefficient_post", 0.0f));
  const double tt = static_cast<double>(in.t);
  const double r = in.t > 0 ? in.r * std::sqrt(1 - std::pow(beta, tt)) / (1 - std::pow(alpha, tt)) : in.r;
  for (size_t i = 0; i < in.n; ++i) {
    const Array &x = in.at(0, i), &g = in.at(1, i), &v = in.at(2, i), &h = in.at(3, i);
    Array x_new(x.type(), x.shape()), v_new(v.type(), v.shape()), h_new(h.type(), h.shape());
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double gr = norm * x.GetDouble(k) + g.GetDouble(k);
      const double vn = alpha * v.GetDouble(k) + (1 - alpha) * gr;
      const double hn = beta * h.GetDouble(k) + (1 - beta) * gr * gr;
      const double xn = x.GetDouble(k) - r * vn / (std::sqrt(hn) + eps);
      x_new.SetDouble(k, (1 - norm_post) * xn);
      v_new.SetDouble(k, vn);
      h_new.SetDouble(k, hn);
    }
    SetIfWanted(ctx, i, std::move(x_new));
    SetIfWanted(ctx, in.n + i, std::move(v_new));
    SetIfWanted(ctx, 2 * in.n + i, std::move(h_new));
  }
  return Status::Ok();
}

Status MomentumKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(OptimizerInputs in, ReadOptimizerInputs(ctx, 3));
  for (const char* a : {"alpha", "beta", "mode", "norm_coefficient"}) {
    if (!ctx.node().Has(a)) return ctx.Error("attribute '{}' is required", a);
  }
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(float beta, ctx.node().Float("beta", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(float norm, ctx.node().Float("norm_coefficient", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(std::string mode, ctx.node().String("mode", "standard"));
  if (mode != "standard" && mode != "nesterov")
    return ctx.Error("mode must be 'standard' or 'nesterov', got '{}'", mode);
  const bool nesterov = mode == "nesterov";
  const double beta_adj = in.t > 0 ? beta : 1.0;
  for (size_t i = 0; i < in.n; ++i) {
    const Array &x = in.at(0, i), &g = in.at(1, i), &v = in.at(2, i);
    Array x_new(x.type(), x.shape()), v_new(v.type(), v.shape());
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double gr = norm * x.GetDouble(k) + g.GetDouble(k);
      const double vn = alpha * v.GetDouble(k) + beta_adj * gr;
      const double step = nesterov ? gr + alpha * vn : vn;
      x_new.SetDouble(k, x.GetDouble(k) - in.r * step);
      v_new.SetDouble(k, vn);
    }
    SetIfWanted(ctx, i, std::move(x_new));
    SetIfWanted(ctx, in.n + i, std::move(v_new));
  }
  return Status::Ok();
}

}  // namespace tessera::onnx
