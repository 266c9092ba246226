// Differentiable arithmetic, reductions, softmax and cross-entropy.
#include "tessera/graph/functional.h"
#include "tessera/base/error.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/ops/matmul/matmul.h"
#include "tessera/ops/reduce/reduce.h"
#include "tessera/ops/softmax/softmax.h"

namespace tessera::graph {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Tensor MatMul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  Tensor out = ops::MatMul(a, b, trans_a, trans_b);
  if (ShouldRecord({a, b})) {
    Record("MatMul", {a, b}, {out}, [a, b, trans_a, trans_b](const Grads& g, const Needs& needs) {
      ops::MatMulGrads r = ops::MatMulBackward(g[0], a, b, trans_a, trans_b, needs[0], needs[1]);
      return Grads{r.grad_a, r.grad_b};
    });
  }
  return out;
}

Tensor Linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor out = ops::Linear(x, weight, bias);
  const bool has_bias = bias.defined();
  if (has_bias ? ShouldRecord({x, weight, bias}) : ShouldRecord({x, weight})) {
    Record("Linear", has_bias ? std::vector<Tensor>{x, weight, bias} : std::vector<Tensor>{x, weight}, {out},
           [x, weight, has_bias, bias_shape = has_bias ? bias.shape() : Shape{}](const Grads& g, const Needs& needs) {
             ops::MatMulGrads r = ops::MatMulBackward(g[0], x, weight, false, true, needs[0], needs[1]);
             Grads grads{r.grad_a, r.grad_b};
             if (has_bias) grads.push_back(needs[2] ? ops::SumToShape(g[0], bias_shape) : Tensor());
             return grads;
           });
  }
  return out;
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
  Tensor out = ops::Binary(op, a, b);
  if (ShouldRecord({a, b})) {
    Record(BinaryName(op), {a, b}, {out}, [op, a, b](const Grads& g, const Needs&) {
      ops::BinaryGrads r = ops::BinaryBackward(op, g[0], a, b);
      return Grads{r.grad_a, r.grad_b};
    });
  }
  return out;
}

}  // namespace

Tensor Add(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kAdd, a, b); }
Tensor Sub(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kSub, a, b); }
Tensor Mul(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kMul, a, b); }
Tensor Div(const Tensor& a, const Tensor& b) { return BinaryRecorded(ops::BinaryOp::kDiv, a, b); }

Tensor Affine(const Tensor& x, float scale, float shift) {
  Tensor out = ops::Affine(x, scale, shift);
  if (ShouldRecord({x})) {
    Record("Affine", {x}, {out}, [scale](const Grads& g, const Needs&) { return Grads{ops::Affine(g[0], scale, 0)}; });
  }
  return out;
}

Tensor Sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Tensor out = ops::Sum(x, axes, keepdim);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Record("Sum", {x}, {out}, [shape, axes, keepdim](const Grads& g, const Needs&) {
      return Grads{ops::SumBackward(g[0], shape, axes, keepdim)};
    });
  }
  return out;
}

Tensor Mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  Tensor out = ops::Mean(x, axes, keepdim);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Record("Mean", {x}, {out}, [shape, axes, keepdim](const Grads& g, const Needs&) {
      return Grads{ops::MeanBackward(g[0], shape, axes, keepdim)};
    });
  }
  return out;
}

MaxOutput Max(const Tensor& x, int axis, bool keepdim) {
  ops::MaxResult r = ops::Max(x, axis, keepdim);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Tensor indices = r.indices;
    Record("Max", {x}, {r.values}, [indices, shape, axis, keepdim](const Grads& g, const Needs&) {
      return Grads{ops::MaxBackward(g[0], indices, shape, axis, keepdim)};
    });
  }
  return {r.values, r.indices};
}

Tensor Softmax(const Tensor& x, int axis) {
  Tensor y = ops::Softmax(x, axis);
  if (ShouldRecord({x})) {
    // The closure keeps the output's storage through a handle without
    // autograd identity, so it does not pin the output impl itself.
    Tensor y_data = Detach(y);
    Record("Softmax", {x}, {y}, [y_data, axis](const Grads& g, const Needs&) {
      return Grads{ops::SoftmaxBackward(g[0], y_data, axis)};
    });
  }
  return y;
}

Tensor LogSoftmax(const Tensor& x, int axis) {
  Tensor y = ops::LogSoftmax(x, axis);
  if (ShouldRecord({x})) {
    Tensor y_data = Detach(y);
    Record("LogSoftmax", {x}, {y}, [y_data, axis](const Grads& g, const Needs&) {
      return Grads{ops::LogSoftmaxBackward(g[0], y_data, axis)};
    });
  }
  return y;
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
  Tensor logits2 = logits.Reshape({-1, classes});
  Tensor targets1 = targets.Reshape({-1});
  ops::CrossEntropyResult fwd = ops::CrossEntropy(logits2, targets1, options);
  Tensor loss = fwd.loss;
  if (ShouldRecord({logits})) {
    Shape shape = logits.shape();
    Record("CrossEntropy", {logits}, {loss}, [logits2, targets1, fwd, options, shape](const Grads& g, const Needs&) {
      return Grads{ops::CrossEntropyBackward(g[0], logits2, targets1, fwd, options).Reshape(shape)};
    });
  }
  return loss;
}

}  // namespace tessera::graph
