// Differentiable arithmetic, reductions, softmax and cross-entropy.
#include "tessera/graph/functional.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/base/error.h"
#include "tessera/graph/apply.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/ops/matmul/matmul.h"
#include "tessera/ops/reduce/reduce.h"
#include "tessera/ops/softmax/softmax.h"

namespace tessera::graph {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

using Ins = std::vector<Tensor>;

Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  OpSpec spec{"MatMul", OpKind::kOutFusable, fmt::format("trans_a={} trans_b={}", trans_a, trans_b)};
  spec.separable_grad = true;  // MatMulBackward computes only what `needs` asks for
  return Apply1(
      spec, {a, b}, [trans_a, trans_b](const Ins& in) { return Ins{ops::MatMul(in[0], in[1], trans_a, trans_b)}; },
      [trans_a, trans_b](const Grads& g, const Ins& in, const Ins&, const Needs& needs) {
        ops::MatMulGrads r = ops::MatMulBackward(g[0], in[0], in[1], trans_a, trans_b, needs[0], needs[1]);
        return Grads{r.grad_a, r.grad_b};
      });
}

Tensor Linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const bool has_bias = bias.defined();
  Shape bias_shape = has_bias ? bias.shape() : Shape{};
  OpSpec spec{"Linear", OpKind::kOutFusable, has_bias ? "bias" : "", SaveBit(0) | SaveBit(1)};
  spec.separable_grad = true;  // dx, dW and the bias's sum are computed alone from `needs`
  return Apply1(
      spec, has_bias ? Ins{x, weight, bias} : Ins{x, weight},
      [has_bias](const Ins& in) { return Ins{ops::Linear(in[0], in[1], has_bias ? in[2] : Tensor())}; },
      [has_bias, bias_shape](const Grads& g, const Ins& in, const Ins&, const Needs& needs) {
        ops::MatMulGrads r = ops::MatMulBackward(g[0], in[0], in[1], false, true, needs[0], needs[1]);
        Grads grads{r.grad_a, r.grad_b};
        if (has_bias) grads.push_back(needs[2] ? ops::SumToShape(g[0], bias_shape) : Tensor());
        return grads;
      });
}

namespace {

const char* BinaryName(ops::BinaryOp op) {
  switch (op) {
    case ops::BinaryOp::kAdd: return "Add";
    case ops::BinaryOp::kSub: return "Sub";
    case ops::BinaryOp::kMul: return "Mul";
    case ops::BinaryOp::kDiv: return "Div";
  }
  return "Binary";
}

Tensor BinaryRecorded(ops::BinaryOp op, const Tensor& a, const Tensor& b) {
  // Add/Sub gradients need only the operands' shapes.
  const bool reads_operands = op == ops::BinaryOp::kMul || op == ops::BinaryOp::kDiv;
  Shape a_shape = a.shape(), b_shape = b.shape();
  DType a_dtype = a.dtype(), b_dtype = b.dtype();
  const OpKind kind =
      a_shape == b_shape || a.numel() == 1 || b.numel() == 1 ? OpKind::kElementwise : OpKind::kInjective;
  return Apply1(
      {BinaryName(op), kind, "", reads_operands ? kSaveAll : kSaveNone}, {a, b},
      [op](const Ins& in) { return Ins{ops::Binary(op, in[0], in[1])}; },
      [op, reads_operands, a_shape, b_shape, a_dtype, b_dtype](const Grads& g, const Ins& in, const Ins&,
                                                               const Needs&) {
        if (reads_operands) {
          ops::BinaryGrads r = ops::BinaryBackward(op, g[0], in[0], in[1]);
          return Grads{r.grad_a, r.grad_b};
        }
        // Add/Sub: the gradients are g and ±g summed to each operand's shape.
        Tensor ga = a_shape == g[0].shape() ? g[0] : ops::SumToShape(g[0], a_shape);
        Tensor gb_full = op == ops::BinaryOp::kSub ? ops::Affine(g[0], -1.0f, 0.0f) : g[0];
        Tensor gb = b_shape == gb_full.shape() ? gb_full : ops::SumToShape(gb_full, b_shape);
        if (ga.dtype() != a_dtype) ga = ga.To(a_dtype);
        if (gb.dtype() != b_dtype) gb = gb.To(b_dtype);
        return Grads{ga, gb};
      });
}

}  // namespace

Tensor Add(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kAdd, a, b); }
Tensor Sub(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kSub, a, b); }
Tensor Mul(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kMul, a, b); }
Tensor Div(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kDiv, a, b); }

Tensor Affine(const Tensor& x, float scale, float shift) {
  return Apply1(
      {"Affine", OpKind::kElementwise, fmt::format("scale={} shift={}", scale, shift), kSaveNone}, {x},
      [scale, shift](const Ins& in) { return Ins{ops::Affine(in[0], scale, shift)}; },
      [scale](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{ops::Affine(g[0], scale, 0)}; });
}

Tensor Sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Shape shape = x.shape();
  return Apply1(
      {"Sum", OpKind::kReduction, fmt::format("axes=[{}] keepdim={}", fmt::join(axes, ","), keepdim), kSaveNone}, {x},
      [axes, keepdim](const Ins& in) { return Ins{ops::Sum(in[0], axes, keepdim)}; },
      [shape, axes, keepdim](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{ops::SumBackward(g[0], shape, axes, keepdim)};
      });
}

Tensor Mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Shape shape = x.shape();
  return Apply1(
      {"Mean", OpKind::kReduction, fmt::format("axes=[{}] keepdim={}", fmt::join(axes, ","), keepdim), kSaveNone}, {x},
      [axes, keepdim](const Ins& in) { return Ins{ops::Mean(in[0], axes, keepdim)}; },
      [shape, axes, keepdim](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{ops::MeanBackward(g[0], shape, axes, keepdim)};
      });
}

MaxOutput Max(const Tensor& x, int axis, bool keepdim) {
  Shape shape = x.shape();
  std::vector<Tensor> out = Apply(
      {"Max", OpKind::kReduction, fmt::format("axis={} keepdim={}", axis, keepdim), kSaveNone, SaveBit(1), 1}, {x},
      [axis, keepdim](const Ins& in) {
        ops::MaxResult r = ops::Max(in[0], axis, keepdim);
        return Ins{r.values, r.indices};
      },
      [shape, axis, keepdim](const Grads& g, const Ins&, const Ins& out, const Needs&) {
        return Grads{ops::MaxBackward(g[0], out[1], shape, axis, keepdim)};
      });
  return {out[0], out[1]};
}

Tensor Softmax(const Tensor& x, int axis) {
  return Apply1(
      {"Softmax", OpKind::kReduction, fmt::format("axis={}", axis), kSaveNone, SaveBit(0)}, {x},
      [axis](const Ins& in) { return Ins{ops::Softmax(in[0], axis)}; },
      [axis](const Grads& g, const Ins&, const Ins& out, const Needs&) {
        return Grads{ops::SoftmaxBackward(g[0], out[0], axis)};
      });
}

Tensor LogSoftmax(const Tensor& x, int axis) {
  return Apply1(
      {"LogSoftmax", OpKind::kReduction, fmt::format("axis={}", axis), kSaveNone, SaveBit(0)}, {x},
      [axis](const Ins& in) { return Ins{ops::LogSoftmax(in[0], axis)}; },
      [axis](const Grads& g, const Ins&, const Ins& out, const Needs&) {
        return Grads{ops::LogSoftmaxBackward(g[0], out[0], axis)};
      });
}

Tensor CrossEntropy(const Tensor& logits, const Tensor& targets, const ops::CrossEntropyOptions& options) {
  TESSERA_OP_CHECK(logits.dim() >= 1, "CrossEntropy: logits must have a class axis, got shape {}",
                   ShapeString(logits.shape()));
  int64_t classes = logits.size(-1);
  Shape expected_targets(logits.shape().begin(), logits.shape().end() - 1);
  TESSERA_OP_CHECK(targets.defined() && targets.shape() == expected_targets,
                   "CrossEntropy: targets shape {} does not match logits shape {} (expected {})",
                   targets.defined() ? ShapeString(targets.shape()) : "undefined", ShapeString(logits.shape()),
                   ShapeString(expected_targets));
  Shape shape = logits.shape();
  // Outputs: the loss, then the saved log-sum-exp per row and the row count.
  return Apply1(
      {"CrossEntropy", OpKind::kReduction,
       fmt::format("ignore_index={} label_smoothing={}", options.ignore_index, options.label_smoothing), kSaveAll,
       SaveBit(1) | SaveBit(2), 1},
      {logits, targets},
      [classes, options](const Ins& in) {
        ops::CrossEntropyResult r = ops::CrossEntropy(in[0].Reshape({-1, classes}), in[1].Reshape({-1}), options);
        return Ins{r.loss, r.lse, Tensor::Scalar(static_cast<double>(r.count), DType::kI64)};
      },
      [classes, options, shape](const Grads& g, const Ins& in, const Ins& out, const Needs&) {
        ops::CrossEntropyResult r;
        r.loss = out[0];
        r.lse = out[1];
        r.count = static_cast<int64_t>(*out[2].data<int64_t>());
        return Grads{ops::CrossEntropyBackward(g[0], in[0].Reshape({-1, classes}), in[1].Reshape({-1}), r, options)
                         .Reshape(shape),
                     Tensor()};
      });
}

}  // namespace tessera::graph
