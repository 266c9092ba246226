// Element-wise arithmetic: argument checks, dispatch, reference kernels and
// SumToShape / AddInPlace / Affine. The optimized binary kernels live in
// binary_kernels.cc.
#include "tessera/ops/elementwise/elementwise.h"

#include "tessera/ops/common/impl.h"
#include "tessera/ops/elementwise/binary_kernels.h"
#include "tessera/ops/elementwise/broadcast.h"
#include "tessera/ops/elementwise/kernel_util.h"
#include "tessera/ops/reduce/reduce_internal.h"

namespace tessera::ops {
namespace {

const char* OpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
  }
  return "binary";
}

float ApplyRef(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
  }
  return 0.0f;
}

// Reference forward: one scalar loop over the output, offsets recomputed
// from the flat index.
Tensor BinaryReference(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out_shape) {
  Tensor out = Tensor::Empty(out_shape, a.dtype());
  const Shape* shapes[2] = {&a.shape(), &b.shape()};
  kern::BroadcastPlan p = kern::MakeBroadcastPlan(out_shape, shapes, 2, /*merge=*/false);
  std::vector<float> av = a.ToFloatVector(), bv = b.ToFloatVector(), ov(p.numel);
  for (int64_t i = 0; i < p.numel; ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t idx = rem % p.shape[d];
      rem /= p.shape[d];
      oa += idx * p.strides[0][d];
      ob += idx * p.strides[1][d];
    }
    ov[i] = ApplyRef(op, av[oa], bv[ob]);
  }
  out.CopyFrom(Tensor::FromVector(ov, out_shape, DType::kF32));
  return out;
}

// Reference backward: full-size fp32 gradients, then SumToShape (which runs
// the reference reduction under the reference Impl).
BinaryGrads BinaryBackwardReference(BinaryOp op, const Tensor& g, const Tensor& a, const Tensor& b) {
  const Shape& out_shape = g.shape();
  const Shape* shapes[2] = {&a.shape(), &b.shape()};
  kern::BroadcastPlan p = kern::MakeBroadcastPlan(out_shape, shapes, 2, /*merge=*/false);
  std::vector<float> gv = g.ToFloatVector(), av = a.ToFloatVector(), bv = b.ToFloatVector();
  std::vector<float> ga(p.numel), gb(p.numel);
  for (int64_t i = 0; i < p.numel; ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t idx = rem % p.shape[d];
      rem /= p.shape[d];
      oa += idx * p.strides[0][d];
      ob += idx * p.strides[1][d];
    }
    float x = av[oa], y = bv[ob], gi = gv[i];
    switch (op) {
      case BinaryOp::kAdd:
        ga[i] = gi;
        gb[i] = gi;
        break;
      case BinaryOp::kSub:
        ga[i] = gi;
        gb[i] = -gi;
        break;
      case BinaryOp::kMul:
        ga[i] = gi * y;
        gb[i] = gi * x;
        break;
      case BinaryOp::kDiv:
        ga[i] = gi / y;
        gb[i] = -gi * x / (y * y);
        break;
    }
  }
  BinaryGrads grads;
  grads.grad_a = kern::SumToShapeAs(Tensor::FromVector(ga, out_shape), a.shape(), a.dtype());
  grads.grad_b = kern::SumToShapeAs(Tensor::FromVector(gb, out_shape), b.shape(), b.dtype());
  return grads;
}

}  // namespace

namespace kern {

Tensor SumToShapeAs(const Tensor& grad, const Shape& shape, DType out_dtype) {
  const Shape& gs = grad.shape();
  int lead = static_cast<int>(gs.size() - shape.size());
  std::vector<bool> reduce(gs.size(), false);
  bool any = false;
  for (int d = 0; d < static_cast<int>(gs.size()); ++d) {
    reduce[d] = d < lead || (shape[d - lead] == 1 && gs[d] != 1);
    any = any || reduce[d];
  }
  if (!any) {
    Tensor out = Tensor::Empty(shape, out_dtype);
    if (UseReference()) {
      out.CopyFrom(grad.Reshape(shape));
    } else {
      CopyConvert(grad.Contiguous(), out);
    }
    return out;
  }
  return ReduceSum(grad, reduce, out_dtype).View(shape);
}

}  // namespace kern

Tensor Binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
  const char* name = OpName(op);
  Shape out_shape = kern::CheckBroadcastOperands(name, a_in, b_in);
  Tensor a = a_in.Contiguous(), b = b_in.Contiguous();
  if (UseReference()) return BinaryReference(op, a, b, out_shape);
  Tensor out = Tensor::Empty(out_shape, a.dtype());
  kern::BinaryForward(op, a, b, out);
  return out;
}

BinaryGrads BinaryBackward(BinaryOp op, const Tensor& grad_out, const Tensor& a_in, const Tensor& b_in) {
  const char* name = OpName(op);
  Shape out_shape = kern::CheckBroadcastOperands(name, a_in, b_in);
  TESSERA_OP_CHECK(grad_out.defined() && grad_out.shape() == out_shape && grad_out.dtype() == a_in.dtype(),
                   "{} backward: grad_out must be {} {} (the broadcast of a {} and b {}), got {} {}", name,
                   DTypeName(a_in.dtype()), ShapeString(out_shape), ShapeString(a_in.shape()),
                   ShapeString(b_in.shape()), grad_out.defined() ? DTypeName(grad_out.dtype()) : "undefined",
                   grad_out.defined() ? ShapeString(grad_out.shape()) : "");
  Tensor g = grad_out.Contiguous(), a = a_in.Contiguous(), b = b_in.Contiguous();
  if (UseReference()) return BinaryBackwardReference(op, g, a, b);
  return kern::BinaryBackwardOptimized(op, g, a, b);
}

Tensor SumToShape(const Tensor& grad, const Shape& shape) {
  TESSERA_OP_CHECK(grad.defined() && IsFloating(grad.dtype()), "sum_to_shape: grad must be a floating tensor, got {}",
                   grad.defined() ? DTypeName(grad.dtype()) : "undefined");
  StatusOr<Shape> bs = BroadcastShapes(shape, grad.shape());
  TESSERA_OP_CHECK(bs.ok() && bs.value() == grad.shape() && shape.size() <= grad.shape().size(),
                   "sum_to_shape: {} does not broadcast to the gradient shape {}", ShapeString(shape),
                   ShapeString(grad.shape()));
  return kern::SumToShapeAs(grad, shape, grad.dtype());
}

Tensor Affine(const Tensor& x_in, float scale, float shift) {
  TESSERA_OP_CHECK(x_in.defined() && IsFloating(x_in.dtype()), "affine: x must be a floating tensor, got {}",
                   x_in.defined() ? DTypeName(x_in.dtype()) : "undefined");
  Tensor x = x_in.Contiguous();
  Tensor out = Tensor::Empty(x.shape(), x.dtype());
  if (UseReference()) {
    std::vector<float> v = x.ToFloatVector();
    for (float& e : v) e = e * scale + shift;
    out.CopyFrom(Tensor::FromVector(v, x.shape()));
    return out;
  }
  kern::AffineForward(x, scale, shift, out);
  return out;
}

void AddInPlace(Tensor& dst, const Tensor& src_in) {
  TESSERA_OP_CHECK(dst.defined() && src_in.defined() && IsFloating(dst.dtype()) && IsFloating(src_in.dtype()),
                   "add_in_place: dst and src must be floating tensors");
  TESSERA_OP_CHECK(dst.shape() == src_in.shape(), "add_in_place: dst shape {} differs from src shape {}",
                   ShapeString(dst.shape()), ShapeString(src_in.shape()));
  TESSERA_OP_CHECK(dst.dtype() == DType::kF32 || dst.dtype() == src_in.dtype(),
                   "add_in_place: dst must be fp32 or match src ({}), got {}", DTypeName(src_in.dtype()),
                   DTypeName(dst.dtype()));
  Tensor src = src_in.Contiguous();
  Tensor target = dst.is_contiguous() ? dst : dst.Contiguous();
  if (UseReference()) {
    std::vector<float> d = target.ToFloatVector(), s = src.ToFloatVector();
    for (size_t i = 0; i < d.size(); ++i) d[i] += s[i];
    target.CopyFrom(Tensor::FromVector(d, target.shape()));
  } else {
    kern::AccumulateInto(target, src);
  }
  if (target.impl() != dst.impl()) dst.CopyFrom(target);
}

}  // namespace tessera::ops
