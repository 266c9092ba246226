// Gemm and MatMul. float32 runs on Tessera's optimized ops::MatMul; other
// element types use a reference loop (floats accumulate in double, integers
// wrap as numpy does).
#include <cmath>
#include <exception>
#include <type_traits>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"
#include "tessera/onnx/ops/nn/nn_util.h"
#include "tessera/ops/matmul/matmul.h"

namespace tessera::onnx::nn {
namespace {

bool MatMulType(ElemType t) {
  return IsFloatType(t) || t == ElemType::kInt32 || t == ElemType::kInt64 || t == ElemType::kUint32 ||
         t == ElemType::kUint64;
}

// Accumulator for T: double for floats, the unsigned 64-bit type for integers (wrapping).
template <typename T>
using AccOf = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

template <typename T>
AccOf<T> Widen(T v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return ToDouble(v);
  }
}

// An integer Gemm's alpha / beta as a wrapping multiplier (out-of-range values read as 0).
uint64_t IntFactor(double v) { return std::fabs(v) < 9e18 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : 0; }

template <typename T>
T Narrow(AccOf<T> v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(v);
  } else {
    return FromDouble<T>(v);
  }
}

// c[i, j] = sum_k a[i, k] b[k, j] for one matrix pair with element strides.
template <typename T>
void MatMulRef(const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs, int64_t b_cs, int64_t m, int64_t k,
               int64_t n, AccOf<T>* c) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      AccOf<T> acc{};
      for (int64_t t = 0; t < k; ++t) acc += Widen(a[i * a_rs + t * a_cs]) * Widen(b[t * b_rs + j * b_cs]);
      c[i * n + j] = acc;
    }
  }
}

StatusOr<Array> MatMulFloat32(const OpContext& ctx, const MatMulShape& s, const Array& a, const Array& b) {
  try {
    const int64_t batches = static_cast<int64_t>(s.a_batch.size());
    const Array a3 = a.Reshaped({a.numel() / std::max<int64_t>(s.m * s.k, 1), s.m, s.k});
    const Array b3 = b.Reshaped({b.numel() / std::max<int64_t>(s.k * s.n, 1), s.k, s.n});
    const bool b_single = b3.dim(0) == 1, same_batch = a3.dim(0) == batches && b3.dim(0) == batches;
    if (b_single && a3.dim(0) == batches) {
      return FromTensor(ops::MatMul(ToTensor(a3), ToTensor(b.Reshaped({s.k, s.n})))).Reshaped(s.out);
    }
    if (same_batch) return FromTensor(ops::MatMul(ToTensor(a3), ToTensor(b3))).Reshaped(s.out);
    // Broadcast batches: one 2-d product per output matrix.
    Array out(ElemType::kFloat, {batches, s.m, s.n});
    const Tensor ta = ToTensor(a3), tb = ToTensor(b3);
    for (int64_t i = 0; i < batches; ++i) {
      const size_t u = static_cast<size_t>(i);
      Tensor y = ops::MatMul(ta.Slice(0, s.a_batch[u], s.a_batch[u] + 1).Squeeze(0),
                             tb.Slice(0, s.b_batch[u], s.b_batch[u] + 1).Squeeze(0));
      const Array ya = FromTensor(y);
      std::copy(ya.data<float>(), ya.data<float>() + s.m * s.n, out.data<float>() + i * s.m * s.n);
    }
    return out.Reshaped(s.out);
  } catch (const std::exception& e) {
    return ctx.Error("{}", e.what());
  }
}

Status MatMulKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array b, ctx.tensor(1));
  if (a.type() != b.type() || !MatMulType(a.type())) {
    return ctx.Error("A and B must share a float or 32/64-bit integer type, got {} and {}", ElemName(a.type()),
                     ElemName(b.type()));
  }
  TESSERA_ASSIGN_OR_RETURN(MatMulShape s, ReadMatMulShape(ctx, a.shape(), b.shape()));
  if (a.type() == ElemType::kFloat && s.m > 0 && s.n > 0 && s.k > 0 && !s.a_batch.empty()) {
    TESSERA_ASSIGN_OR_RETURN(Array y, MatMulFloat32(ctx, s, a, b));
    ctx.set_output(0, y);
    return Status::Ok();
  }
  Array y(a.type(), s.out);
  Status st = VisitNumeric(a.type(), "MatMul", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      std::vector<AccOf<T>> acc(static_cast<size_t>(s.m * s.n));
      for (size_t i = 0; i < s.a_batch.size(); ++i) {
        MatMulRef<T>(a.data<T>() + s.a_batch[i] * s.m * s.k, s.k, 1, b.data<T>() + s.b_batch[i] * s.k * s.n, s.n, 1,
                     s.m, s.k, s.n, acc.data());
        T* out = y.data<T>() + static_cast<int64_t>(i) * s.m * s.n;
        for (size_t j = 0; j < acc.size(); ++j) out[j] = Narrow<T>(acc[j]);
      }
    }
  });
  TESSERA_RETURN_IF_ERROR(st);
  ctx.set_output(0, y);
  return Status::Ok();
}

Status GemmKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array b, ctx.tensor(1));
  if (a.type() != b.type() || !MatMulType(a.type())) {
    return ctx.Error("A and B must share a float or 32/64-bit integer type, got {} and {}", ElemName(a.type()),
                     ElemName(b.type()));
  }
  if (a.rank() != 2 || b.rank() != 2)
    return ctx.Error("A and B must be 2-d, got {} and {}", a.ShapeString(), b.ShapeString());
  TESSERA_ASSIGN_OR_RETURN(int64_t ta, ctx.node().Int("transA", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t tb, ctx.node().Int("transB", 0));
  TESSERA_ASSIGN_OR_RETURN(double alpha, ctx.node().Float("alpha", 1.0f));
  TESSERA_ASSIGN_OR_RETURN(double beta, ctx.node().Float("beta", 1.0f));
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t kb = tb ? b.dim(1) : b.dim(0), n = tb ? b.dim(0) : b.dim(1);
  if (k != kb) return ctx.Error("inner dimensions differ: {} vs {}", k, kb);
  Array c;
  std::vector<int64_t> ci;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(c, ctx.tensor(2));
    auto bs = BroadcastShapes(c.shape(), {m, n});
    if (c.type() != a.type() || !bs.ok() || *bs != std::vector<int64_t>{m, n}) {
      return ctx.Error("C {} {} does not broadcast to [{},{}]", ElemName(c.type()), c.ShapeString(), m, n);
    }
    ci = BroadcastIndex(c.shape(), {m, n});
  }
  Array y(a.type(), {m, n});
  Status st = VisitNumeric(a.type(), "Gemm", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      std::vector<AccOf<T>> acc(static_cast<size_t>(m * n));
      bool done = false;
      if constexpr (std::is_same_v<T, float>) {
        if (m > 0 && n > 0 && k > 0) {
          try {
            const Array p = FromTensor(ops::MatMul(ToTensor(a), ToTensor(b), ta != 0, tb != 0));
            for (size_t i = 0; i < acc.size(); ++i) acc[i] = p.data<float>()[i];
            done = true;
          } catch (const std::exception&) {
            done = false;
          }
        }
      }
      if (!done) {
        const int64_t a_rs = ta ? 1 : k, a_cs = ta ? m : 1, b_rs = tb ? 1 : n, b_cs = tb ? k : 1;
        MatMulRef<T>(a.data<T>(), a_rs, a_cs, b.data<T>(), b_rs, b_cs, m, k, n, acc.data());
      }
      T* out = y.data<T>();
      for (size_t i = 0; i < acc.size(); ++i) {
        if constexpr (std::is_integral_v<T>) {
          uint64_t v = acc[i] * IntFactor(alpha);
          if (c.defined()) v += Widen(c.data<T>()[ci[i]]) * IntFactor(beta);
          out[i] = static_cast<T>(v);
        } else {
          double v = alpha * acc[i];
          if (c.defined()) v += beta * ToDouble(c.data<T>()[ci[i]]);
          out[i] = FromDouble<T>(v);
        }
      }
    }
  });
  TESSERA_RETURN_IF_ERROR(st);
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterGemmKernels(OpRegistry& r) {
  r.Register("Gemm", GemmKernel);
  r.Register("MatMul", MatMulKernel);
}

}  // namespace tessera::onnx::nn
