// Kernels over several broadcast inputs: Max, Min, Sum, Mean (variadic),
// Clip (attribute bounds before opset 11, optional inputs after) and Where.
#include <cmath>
#include <string>
#include <vector>

#include "tessera/onnx/ops/elementwise/elementwise_ops.h"
#include "tessera/onnx/ops/elementwise/elementwise_util.h"

namespace tessera::onnx::elementwise {
namespace {

// Folds op over every input (numpy-broadcast); Mean divides by the count.
template <unsigned kTypes, typename Op>
Status Variadic(OpContext& ctx, bool mean, Op op) {
  if (ctx.num_inputs() == 0) return ctx.Error("needs at least one input");
  std::vector<Array> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
    ins.push_back(std::move(a));
  }
  const ElemType type = ins[0].type();
  for (size_t i = 1; i < ins.size(); ++i) {
    if (ins[i].type() != type) {
      return ctx.Error("inputs must have one element type, got {} and {}", ElemName(type), ElemName(ins[i].type()));
    }
  }
  if (!TypeInSet(type, kTypes)) return ctx.Error("inputs must be a {}, got {}", TypeSetName(kTypes), ElemName(type));
  std::vector<std::vector<int64_t>> shapes;
  for (const Array& a : ins) shapes.push_back(a.shape());
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastAll(ctx, shapes));
  Array acc;
  TESSERA_RETURN_IF_ERROR(VisitNumeric(type, ctx.node().op_type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (TypeIn<T>(kTypes)) {
      auto f = [&](T u, T v) -> T { return Store<T>(op(Load(u), Load(v))); };
      if (ins.size() == 1) {
        acc = ins[0].Clone();
      } else {
        std::vector<int64_t> shape = BroadcastShapes(ins[0].shape(), ins[1].shape()).value();
        acc = BinaryLoop<T, T, T>(ins[0], ins[1], type, shape, f);
        for (size_t i = 2; i < ins.size(); ++i) {
          shape = BroadcastShapes(acc.shape(), ins[i].shape()).value();
          acc = BinaryLoop<T, T, T>(acc, ins[i], type, shape, f);
        }
      }
      if (mean) {
        using C = Compute<T>;
        const C n = static_cast<C>(ins.size());
        T* p = acc.data<T>();
        for (int64_t k = 0; k < acc.numel(); ++k) p[k] = Store<T>(Load(p[k]) / n);
      }
    }
  }));
  TESSERA_CHECK(acc.shape() == out_shape, "Variadic: shape {} vs {}", acc.ShapeString(), fmt::join(out_shape, ","));
  ctx.set_output(0, std::move(acc));
  return Status::Ok();
}

template <typename C>
inline bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// NaN-propagating max / min (numpy's maximum / minimum).
Status Max(OpContext& ctx) {
  return Variadic<kNumeric>(ctx, false, [](auto a, auto b) { return (IsNan(a) || a > b) ? a : b; });
}
Status Min(OpContext& ctx) {
  return Variadic<kNumeric>(ctx, false, [](auto a, auto b) { return (IsNan(a) || a < b) ? a : b; });
}
Status Sum(OpContext& ctx) {
  return Variadic<kNumeric>(ctx, false, [](auto a, auto b) { return WrapAdd(a, b); });
}
Status Mean(OpContext& ctx) {
  return Variadic<kFloats>(ctx, true, [](auto a, auto b) { return a + b; });
}

Status Clip(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  constexpr unsigned kTypes = kNumeric;
  if (!TypeInSet(x.type(), kTypes)) return ctx.Error("input must be numeric, got {}", ElemName(x.type()));
  Array lo_t, hi_t;  // opset >= 11: optional one-element inputs of x's type
  bool has_lo = false, has_hi = false;
  float lo_attr = 0, hi_attr = 0;
  if (ctx.opset() < 11) {
    has_lo = ctx.node().Has("min");
    has_hi = ctx.node().Has("max");
    TESSERA_ASSIGN_OR_RETURN(lo_attr, ctx.node().Float("min", 0));
    TESSERA_ASSIGN_OR_RETURN(hi_attr, ctx.node().Float("max", 0));
  } else {
    for (size_t i = 1; i <= 2; ++i) {
      if (!ctx.has_input(i)) continue;
      TESSERA_ASSIGN_OR_RETURN(Array b, ctx.tensor(i));
      if (b.type() != x.type()) {
        return ctx.Error("{} must have the input's type {}, got {}", i == 1 ? "min" : "max", ElemName(x.type()),
                         ElemName(b.type()));
      }
      if (b.numel() != 1)
        return ctx.Error("{} must be a scalar, has shape {}", i == 1 ? "min" : "max", b.ShapeString());
      (i == 1 ? lo_t : hi_t) = b;
      (i == 1 ? has_lo : has_hi) = true;
    }
  }
  Array y(x.type(), x.shape());
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), "Clip", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (TypeIn<T>(kTypes)) {
      using C = Compute<T>;
      auto bound = [&](const Array& t, float attr) -> C {
        if (t.defined()) return Load(t.data<T>()[0]);
        if constexpr (std::is_integral_v<C>) {
          return FloatToInt<C>(attr);
        } else {
          return static_cast<C>(attr);
        }
      };
      const C lo = has_lo ? bound(lo_t, lo_attr) : C{};
      const C hi = has_hi ? bound(hi_t, hi_attr) : C{};
      const T* px = x.data<T>();
      T* py = y.data<T>();
      const int64_t n = x.numel();
      for (int64_t i = 0; i < n; ++i) {
        C v = Load(px[i]);
        if (has_lo && v < lo) v = lo;
        if (has_hi && v > hi) v = hi;
        py[i] = Store<T>(v);
      }
    }
  }));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

template <typename T>
Array WhereLoop(const Array& c, const Array& x, const Array& y, const std::vector<int64_t>& out_shape) {
  Array out(x.type(), out_shape);
  const bool* pc = c.data<bool>();
  const T* px = x.data<T>();
  const T* py = y.data<T>();
  T* po = out.data<T>();
  ForEachRow<3>({&c.shape(), &x.shape(), &y.shape()}, out_shape,
                [&](int64_t o, int64_t n, const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st) {
                  for (int64_t t = 0; t < n; ++t) {
                    po[o + t] = pc[off[0] + t * st[0]] ? px[off[1] + t * st[1]] : py[off[2] + t * st[2]];
                  }
                });
  return out;
}

Status Where(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array c, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(1));
  TESSERA_ASSIGN_OR_RETURN(Array y, ctx.tensor(2));
  if (c.type() != ElemType::kBool) return ctx.Error("condition must be bool, got {}", ElemName(c.type()));
  if (x.type() != y.type()) {
    return ctx.Error("X and Y must have one element type, got {} and {}", ElemName(x.type()), ElemName(y.type()));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastAll(ctx, {c.shape(), x.shape(), y.shape()}));
  if (x.type() == ElemType::kString) {
    ctx.set_output(0, WhereLoop<std::string>(c, x, y, out_shape));
    return Status::Ok();
  }
  Array out;
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), "Where", [&](auto tag) {
    using T = decltype(tag);
    out = WhereLoop<T>(c, x, y, out_shape);
  }));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

void RegisterVariadicOps(OpRegistry& r) {
  r.Register("Max", Max);
  r.Register("Min", Min);
  r.Register("Sum", Sum);
  r.Register("Mean", Mean);
  r.Register("Clip", Clip);
  r.Register("Where", Where);
}

}  // namespace tessera::onnx::elementwise
