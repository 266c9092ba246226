// Reductions: argument checks, dispatch and the reference kernels.
#include "tessera/ops/reduce/reduce.h"

#include <cstring>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/reduce/reduce_internal.h"
#include "tessera/ops/reduce/reduce_kernels.h"

namespace tessera::ops {
namespace {

void CheckFloating(const char* op, const char* arg, const Tensor& t) {
  TESSERA_OP_CHECK(t.defined(), "{}: {} is undefined", op, arg);
  TESSERA_OP_CHECK(IsFloating(t.dtype()), "{}: {} must be fp32/bf16/fp16, got {} {}", op, arg, DTypeName(t.dtype()),
                   ShapeString(t.shape()));
}

// Axis set as a per-axis mask (empty axes = all axes).
std::vector<bool> AxesMask(const char* op, const Shape& shape, const std::vector<int>& axes) {
  const int rank = static_cast<int>(shape.size());
  std::vector<bool> mask(rank, axes.empty());
  for (int a : axes) {
    TESSERA_OP_CHECK(a >= -rank && a < rank, "{}: axis {} out of range for shape {}", op, a, ShapeString(shape));
    int n = a < 0 ? a + rank : a;
    TESSERA_OP_CHECK(!mask[n], "{}: axis {} repeated in the axis list for shape {}", op, a, ShapeString(shape));
    mask[n] = true;
  }
  return mask;
}

Shape ReducedShape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

int64_t ReducedCount(const Shape& shape, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) n *= mask[d] ? shape[d] : 1;
  return n;
}

Tensor ReduceSumReference(const Tensor& x, const std::vector<bool>& reduce, DType out_dtype, double scale) {
  const Shape& s = x.shape();
  Shape out_shape = ReducedShape(s, reduce, /*keepdim=*/true);
  Shape out_strides = ContiguousStrides(out_shape);
  std::vector<double> acc(NumElements(out_shape), 0.0);
  std::vector<float> v = x.ToFloatVector();
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    int64_t rem = i, o = 0;
    for (int d = x.dim() - 1; d >= 0; --d) {
      int64_t idx = rem % s[d];
      rem /= s[d];
      if (!reduce[d]) o += idx * out_strides[d];
    }
    acc[o] += v[i];
  }
  std::vector<float> f(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) f[i] = static_cast<float>(acc[i] * scale);
  Tensor out = Tensor::Empty(out_shape, out_dtype);
  out.CopyFrom(Tensor::FromVector(f, out_shape));
  return out;
}

Tensor SumOrMean(const char* op, const Tensor& x_in, const std::vector<int>& axes, bool keepdim, bool mean) {
  CheckFloating(op, "x", x_in);
  std::vector<bool> mask = AxesMask(op, x_in.shape(), axes);
  int64_t count = ReducedCount(x_in.shape(), mask);
  TESSERA_OP_CHECK(!mean || count > 0, "mean: reducing {} over an empty axis", ShapeString(x_in.shape()));
  double scale = mean ? 1.0 / static_cast<double>(count) : 1.0;
  Tensor r = kern::ReduceSum(x_in, mask, x_in.dtype(), scale);
  return r.View(ReducedShape(x_in.shape(), mask, keepdim));
}

Tensor SumOrMeanBackward(const char* op, const Tensor& grad_out, const Shape& input_shape, const std::vector<int>& axes,
                         bool keepdim, bool mean) {
  CheckFloating(op, "grad_out", grad_out);
  std::vector<bool> mask = AxesMask(op, input_shape, axes);
  Shape expected = ReducedShape(input_shape, mask, keepdim);
  TESSERA_OP_CHECK(grad_out.shape() == expected, "{}: grad_out shape {} does not match the reduced shape {} of {}", op,
                   ShapeString(grad_out.shape()), ShapeString(expected), ShapeString(input_shape));
  int64_t count = ReducedCount(input_shape, mask);
  float scale = mean && count > 0 ? static_cast<float>(1.0 / static_cast<double>(count)) : 1.0f;
  Tensor g = grad_out.Contiguous().View(ReducedShape(input_shape, mask, /*keepdim=*/true));
  Tensor out = Tensor::Empty(input_shape, grad_out.dtype());
  if (UseReference()) {
    std::vector<float> gv = g.ToFloatVector(), ov(out.numel());
    Shape gstrides = ContiguousStrides(g.shape());
    for (int64_t i = 0; i < static_cast<int64_t>(ov.size()); ++i) {
      int64_t rem = i, o = 0;
      for (int d = static_cast<int>(input_shape.size()) - 1; d >= 0; --d) {
        int64_t idx = rem % input_shape[d];
        rem /= input_shape[d];
        if (!mask[d]) o += idx * gstrides[d];
      }
      ov[i] = gv[o] * scale;
    }
    out.CopyFrom(Tensor::FromVector(ov, input_shape));
    return out;
  }
  kern::BroadcastScaled(g, scale, out);
  return out;
}

// x viewed as [A, R, B] around `axis`.
void SplitAround(const Shape& s, int axis, int64_t& A, int64_t& R, int64_t& B) {
  A = 1;
  B = 1;
  for (int d = 0; d < axis; ++d) A *= s[d];
  R = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) B *= s[d];
}

}  // namespace

namespace kern {

Tensor ReduceSum(const Tensor& x, const std::vector<bool>& reduce, DType out_dtype, double scale) {
  if (UseReference()) return ReduceSumReference(x, reduce, out_dtype, scale);
  return ReduceSumOptimized(x.Contiguous(), reduce, out_dtype, scale);
}

}  // namespace kern

Tensor Sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return SumOrMean("sum", x, axes, keepdim, /*mean=*/false);
}

Tensor Mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return SumOrMean("mean", x, axes, keepdim, /*mean=*/true);
}

Tensor SumBackward(const Tensor& grad_out, const Shape& input_shape, const std::vector<int>& axes, bool keepdim) {
  return SumOrMeanBackward("sum backward", grad_out, input_shape, axes, keepdim, /*mean=*/false);
}

Tensor MeanBackward(const Tensor& grad_out, const Shape& input_shape, const std::vector<int>& axes, bool keepdim) {
  return SumOrMeanBackward("mean backward", grad_out, input_shape, axes, keepdim, /*mean=*/true);
}

MaxResult Max(const Tensor& x_in, int axis, bool keepdim) {
  CheckFloating("max", "x", x_in);
  const int rank = x_in.dim();
  TESSERA_OP_CHECK(axis >= -rank && axis < rank, "max: axis {} out of range for shape {}", axis,
                   ShapeString(x_in.shape()));
  const int a = axis < 0 ? axis + rank : axis;
  TESSERA_OP_CHECK(x_in.shape()[a] > 0, "max: axis {} of shape {} is empty", axis, ShapeString(x_in.shape()));
  TESSERA_OP_CHECK(x_in.shape()[a] < (int64_t{1} << 31), "max: axis {} of shape {} exceeds 2^31 elements", axis,
                   ShapeString(x_in.shape()));
  Tensor x = x_in.Contiguous();
  int64_t A, R, B;
  SplitAround(x.shape(), a, A, R, B);
  std::vector<bool> mask(rank, false);
  mask[a] = true;
  Shape out_shape = ReducedShape(x.shape(), mask, keepdim);
  MaxResult result{Tensor::Empty(out_shape, x.dtype()), Tensor::Empty(out_shape, DType::kI64)};
  if (!UseReference()) {
    kern::MaxMiddleOptimized(x, A, R, B, result.values, result.indices);
    return result;
  }
  std::vector<float> v = x.ToFloatVector(), best(A * B);
  std::vector<int64_t> idx(A * B);
  for (int64_t i = 0; i < A; ++i) {
    for (int64_t j = 0; j < B; ++j) {
      float m = v[i * R * B + j];
      int64_t k = 0;
      for (int64_t r = 1; r < R; ++r) {
        float e = v[(i * R + r) * B + j];
        if (e > m) {
          m = e;
          k = r;
        }
      }
      best[i * B + j] = m;
      idx[i * B + j] = k;
    }
  }
  result.values.CopyFrom(Tensor::FromVector(best, out_shape));
  result.indices.CopyFrom(Tensor::FromInts(idx, out_shape));
  return result;
}

Tensor MaxBackward(const Tensor& grad_out, const Tensor& indices, const Shape& input_shape, int axis, bool keepdim) {
  CheckFloating("max backward", "grad_out", grad_out);
  const int rank = static_cast<int>(input_shape.size());
  TESSERA_OP_CHECK(axis >= -rank && axis < rank, "max backward: axis {} out of range for shape {}", axis,
                   ShapeString(input_shape));
  const int a = axis < 0 ? axis + rank : axis;
  std::vector<bool> mask(rank, false);
  mask[a] = true;
  Shape out_shape = ReducedShape(input_shape, mask, keepdim);
  TESSERA_OP_CHECK(grad_out.shape() == out_shape, "max backward: grad_out shape {} should be {} for input {}",
                   ShapeString(grad_out.shape()), ShapeString(out_shape), ShapeString(input_shape));
  TESSERA_OP_CHECK(indices.defined() && indices.dtype() == DType::kI64 && indices.shape() == out_shape,
                   "max backward: indices must be int64 {}, got {} {}", ShapeString(out_shape),
                   indices.defined() ? DTypeName(indices.dtype()) : "undefined",
                   indices.defined() ? ShapeString(indices.shape()) : "");
  int64_t A, R, B;
  SplitAround(input_shape, a, A, R, B);
  Tensor idx_t = indices.Contiguous();
  const int64_t* idx = idx_t.data<int64_t>();
  for (int64_t i = 0; i < A * B; ++i) {
    TESSERA_OP_CHECK(idx[i] >= 0 && idx[i] < R, "max backward: index {} at position {} out of range [0, {})", idx[i], i,
                     R);
  }
  Tensor g = grad_out.Contiguous();
  Tensor out = Tensor::Zeros(input_shape, grad_out.dtype());
  const size_t es = DTypeSize(g.dtype());
  const char* gp = static_cast<const char*>(g.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  // Same scatter for both impls: it moves values, there is no arithmetic.
  for (int64_t i = 0; i < A; ++i) {
    for (int64_t j = 0; j < B; ++j) {
      int64_t src = i * B + j;
      std::memcpy(op + ((i * R + idx[src]) * B + j) * es, gp + src * es, es);
    }
  }
  return out;
}

}  // namespace tessera::ops
