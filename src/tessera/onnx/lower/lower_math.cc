// Lowerings of arithmetic, activations and unary math, MatMul / Gemm,
// softmax and reductions onto graph:: functions (onnx/lower/lower.h).
#include <limits>
#include <numeric>

#include "tessera/graph/functional.h"
#include "tessera/onnx/lower/lower.h"

namespace tessera::onnx::lower {
namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);

Lowering Binary(BinaryFn fn) {
  return [fn](LowerContext& ctx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Tensor a, ctx.float_tensor(0));
    TESSERA_ASSIGN_OR_RETURN(Tensor b, ctx.float_tensor(1));
    ctx.set_output(0, fn(a, b));
    return Status::Ok();
  };
}

Lowering Unary(Tensor (*fn)(const Tensor&)) {
  return [fn](LowerContext& ctx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
    ctx.set_output(0, fn(x));
    return Status::Ok();
  };
}

// Sigmoid, Tanh, Exp, ... (alpha from an attribute where the operator has one).
Lowering PointwiseLowering(ops::PointwiseFn fn, const char* alpha_attr = nullptr, float alpha_default = 0.0f) {
  return [fn, alpha_attr, alpha_default](LowerContext& ctx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
    float alpha = alpha_default;
    if (alpha_attr != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(alpha, ctx.node().Float(alpha_attr, alpha_default));
    }
    ctx.set_output(0, graph::Pointwise(fn, x, alpha));
    return Status::Ok();
  };
}

// Pow with a constant scalar exponent (x^2 and x^0.5 in exported norms).
Status PowLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array e, ctx.constant(1));
  if (e.numel() != 1) return ctx.Error("the exponent must be one constant number, got shape {}", e.ShapeString());
  ctx.set_output(0, graph::Pointwise(ops::PointwiseFn::kPow, x, static_cast<float>(e.GetDouble(0))));
  return Status::Ok();
}

// Clip: bounds from attributes before opset 11, optional constant inputs after.
Status ClipLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (ctx.opset() < 11) {
    TESSERA_ASSIGN_OR_RETURN(lo, ctx.node().Float("min", lo));
    TESSERA_ASSIGN_OR_RETURN(hi, ctx.node().Float("max", hi));
  } else {
    for (size_t i : {size_t{1}, size_t{2}}) {
      if (!ctx.has_input(i)) continue;
      TESSERA_ASSIGN_OR_RETURN(Array b, ctx.constant(i));
      if (b.numel() != 1) return ctx.Error("Clip bounds must be scalars, got shape {}", b.ShapeString());
      (i == 1 ? lo : hi) = static_cast<float>(b.GetDouble(0));
    }
  }
  ctx.set_output(0, graph::Pointwise(ops::PointwiseFn::kClip, x, lo, hi));
  return Status::Ok();
}

Status HardSigmoidLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 0.2f));
  TESSERA_ASSIGN_OR_RETURN(float beta, ctx.node().Float("beta", 0.5f));
  ctx.set_output(0, graph::Pointwise(ops::PointwiseFn::kHardSigmoid, x, alpha, beta));
  return Status::Ok();
}

Status IdentityLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.tensor(0));
  ctx.set_output(0, x);
  return Status::Ok();
}

Status NegLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  ctx.set_output(0, graph::Affine(x, -1.0f));
  return Status::Ok();
}

Status SumLowering(LowerContext& ctx) {  // variadic Sum: a chain of broadcasting Adds
  TESSERA_ASSIGN_OR_RETURN(Tensor acc, ctx.float_tensor(0));
  for (size_t i = 1; i < ctx.node().inputs.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(i));
    acc = graph::Add(acc, x);
  }
  ctx.set_output(0, acc);
  return Status::Ok();
}

// numpy matmul: 1-D operands are promoted (a to [1, K], b to [K, 1]) and the
// promoted axis dropped from the result; b is 2-D (folded over a's leading
// axes) or has a's leading axes.
Status MatMulLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor a, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Tensor b, ctx.float_tensor(1));
  if (a.dim() == 0 || b.dim() == 0) return ctx.Error("MatMul operands must have rank >= 1");
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  if (a_vec) a = graph::Reshape(a, {1, a.size(0)});
  if (b_vec) b = graph::Reshape(b, {b.size(0), 1});
  if (b.dim() > 2 && b.dim() != a.dim()) {
    return ctx.Error("batched MatMul of {} by {}: Tessera's MatMul needs B 2-D or with A's leading axes",
                     ShapeString(a.shape()), ShapeString(b.shape()));
  }
  Tensor y = graph::MatMul(a, b);
  if (a_vec || b_vec) {
    Shape s = y.shape();
    if (b_vec) s.pop_back();
    if (a_vec) s.erase(s.end() - (b_vec ? 1 : 2));
    y = graph::Reshape(y, s);
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Y = alpha * A' B' + beta * C. The common layer form (B transposed, alpha =
// beta = 1, C a bias vector) is one fused GEMM with the bias in its epilogue.
Status GemmLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor a, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Tensor b, ctx.float_tensor(1));
  TESSERA_ASSIGN_OR_RETURN(int64_t trans_a, ctx.node().Int("transA", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t trans_b, ctx.node().Int("transB", 0));
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 1.0f));
  TESSERA_ASSIGN_OR_RETURN(float beta, ctx.node().Float("beta", 1.0f));
  if (a.dim() != 2 || b.dim() != 2) {
    return ctx.Error("A and B must be 2-D, got {} and {}", ShapeString(a.shape()), ShapeString(b.shape()));
  }
  Tensor c;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(c, ctx.float_tensor(2));
  }
  const int64_t n = trans_b ? b.size(0) : b.size(1);
  if (trans_b && !trans_a && alpha == 1.0f && (!c.defined() || (beta == 1.0f && c.dim() == 1 && c.size(0) == n))) {
    ctx.set_output(0, graph::Linear(a, b, c));
    return Status::Ok();
  }
  Tensor y = graph::MatMul(a, b, trans_a != 0, trans_b != 0);
  if (alpha != 1.0f) y = graph::Scale(y, alpha);
  if (c.defined() && beta != 0.0f) y = graph::Add(y, beta == 1.0f ? c : graph::Scale(c, beta));
  ctx.set_output(0, y);
  return Status::Ok();
}

// Softmax / LogSoftmax: from opset 13 along `axis` (default -1); before, the
// input is coerced to 2-D at `axis` (default 1) and normalized per row.
Lowering SoftmaxLike(Tensor (*fn)(const Tensor&, int)) {
  return [fn](LowerContext& ctx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
    const bool coerce = ctx.opset() < 13;
    TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", coerce ? 1 : -1));
    const int rank = x.dim();
    if (rank == 0) return ctx.Error("input must have rank >= 1");
    TESSERA_ASSIGN_OR_RETURN(int axis, Axis(ctx, axis_attr, rank));
    if (!coerce) {
      ctx.set_output(0, fn(x, axis));
      return Status::Ok();
    }
    const Shape& s = x.shape();
    const int64_t rows = std::accumulate(s.begin(), s.begin() + axis, int64_t{1}, std::multiplies<>());
    const int64_t cols = std::accumulate(s.begin() + axis, s.end(), int64_t{1}, std::multiplies<>());
    ctx.set_output(0, graph::Reshape(fn(graph::Reshape(x, {rows, cols}), -1), s));
    return Status::Ok();
  };
}

// ReduceSum (axes an input from opset 13) and ReduceMean (from opset 18):
// empty axes reduce everything unless noop_with_empty_axes.
Lowering Reduce(bool mean) {
  return [mean](LowerContext& ctx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.ints_attr_or_input("axes", 1, mean ? 18 : 13, {}));
    TESSERA_ASSIGN_OR_RETURN(int64_t keepdims, ctx.node().Int("keepdims", 1));
    TESSERA_ASSIGN_OR_RETURN(int64_t noop, ctx.node().Int("noop_with_empty_axes", 0));
    if (axes.empty() && noop != 0) {
      ctx.set_output(0, x);
      return Status::Ok();
    }
    std::vector<int> dims;
    for (int64_t a : axes) {
      TESSERA_ASSIGN_OR_RETURN(int d, Axis(ctx, a, x.dim()));
      dims.push_back(d);
    }
    if (dims.empty()) {
      for (int d = 0; d < x.dim(); ++d) dims.push_back(d);
    }
    ctx.set_output(0, mean ? graph::Mean(x, dims, keepdims != 0) : graph::Sum(x, dims, keepdims != 0));
    return Status::Ok();
  };
}

}  // namespace

void AddMathLowerings(LoweringTable& t) {
  t["Add"] = Binary(&graph::Add);
  t["Sub"] = Binary(&graph::Sub);
  t["Mul"] = Binary(&graph::Mul);
  t["Div"] = Binary(&graph::Div);
  t["Neg"] = NegLowering;
  t["Sum"] = SumLowering;
  t["Relu"] = Unary(&graph::Relu);
  using F = ops::PointwiseFn;
  t["Sigmoid"] = PointwiseLowering(F::kSigmoid);
  t["Tanh"] = PointwiseLowering(F::kTanh);
  t["Exp"] = PointwiseLowering(F::kExp);
  t["Log"] = PointwiseLowering(F::kLog);
  t["Sqrt"] = PointwiseLowering(F::kSqrt);
  t["Reciprocal"] = PointwiseLowering(F::kReciprocal);
  t["Abs"] = PointwiseLowering(F::kAbs);
  t["Erf"] = PointwiseLowering(F::kErf);
  t["LeakyRelu"] = PointwiseLowering(F::kLeakyRelu, "alpha", 0.01f);
  t["Elu"] = PointwiseLowering(F::kElu, "alpha", 1.0f);
  t["Softplus"] = PointwiseLowering(F::kSoftplus);
  t["Softsign"] = PointwiseLowering(F::kSoftsign);
  t["Pow"] = PowLowering;
  t["Clip"] = ClipLowering;
  t["HardSigmoid"] = HardSigmoidLowering;
  t["HardSwish"] = PointwiseLowering(F::kHardSwish);
  t["Identity"] = IdentityLowering;
  t["MatMul"] = MatMulLowering;
  t["Gemm"] = GemmLowering;
  t["Softmax"] = SoftmaxLike(&graph::Softmax);
  t["LogSoftmax"] = SoftmaxLike(&graph::LogSoftmax);
  t["ReduceSum"] = Reduce(false);
  t["ReduceMean"] = Reduce(true);
}

}  // namespace tessera::onnx::lower
