// Activation kernels: Sigmoid, Relu, LeakyRelu, Elu, Selu, Celu,
// HardSigmoid, HardSwish, Softplus, Softsign, ThresholdedRelu, Shrink,
// PRelu, Mish and Gelu.
#include <algorithm>
#include <cmath>

#include "tessera/onnx/ops/elementwise/elementwise_ops.h"
#include "tessera/onnx/ops/elementwise/elementwise_util.h"

namespace tessera::onnx::elementwise {
namespace {

template <typename C>
inline C StableSigmoid(C v) {
  if (v >= C(0)) return C(1) / (C(1) + std::exp(-v));
  const C e = std::exp(v);
  return e / (C(1) + e);
}

// log(1 + exp(v)) without overflow.
template <typename C>
inline C StableSoftplus(C v) {
  return v > C(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
}

Status Sigmoid(OpContext& ctx) {
  return MapUnary<kFloats>(ctx, [](auto v) { return StableSigmoid(v); });
}

Status Relu(OpContext& ctx) {
  return MapUnary<kFloats | kSigned>(ctx, [](auto v) { return v < decltype(v)(0) ? decltype(v)(0) : v; });
}

Status LeakyRelu(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 0.01f));
  return MapUnary<kFloats>(ctx, [alpha](auto v) {
    using C = decltype(v);
    return v >= C(0) ? v : static_cast<C>(alpha) * v;
  });
}

Status Elu(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 1.0f));
  return MapUnary<kFloats>(ctx, [alpha](auto v) {
    using C = decltype(v);
    return v >= C(0) ? v : static_cast<C>(alpha) * std::expm1(v);
  });
}

Status Selu(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 1.67326319217681884765625f));
  TESSERA_ASSIGN_OR_RETURN(float gamma, ctx.node().Float("gamma", 1.05070102214813232421875f));
  return MapUnary<kFloats>(ctx, [alpha, gamma](auto v) {
    using C = decltype(v);
    const C g = static_cast<C>(gamma);
    return v > C(0) ? g * v : g * static_cast<C>(alpha) * std::expm1(v);
  });
}

Status Celu(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 1.0f));
  if (alpha == 0) return ctx.Error("alpha must not be 0");
  return MapUnary<kFloats>(ctx, [alpha](auto v) {
    using C = decltype(v);
    const C a = static_cast<C>(alpha);
    return v > C(0) ? v : a * std::expm1(v / a);
  });
}

Status HardSigmoid(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 0.2f));
  TESSERA_ASSIGN_OR_RETURN(float beta, ctx.node().Float("beta", 0.5f));
  return MapUnary<kFloats>(ctx, [alpha, beta](auto v) {
    using C = decltype(v);
    return std::max(C(0), std::min(C(1), static_cast<C>(alpha) * v + static_cast<C>(beta)));
  });
}

Status HardSwish(OpContext& ctx) {
  return MapUnary<kFloats>(ctx, [](auto v) {
    using C = decltype(v);
    return v * std::max(C(0), std::min(C(1), v / C(6) + C(0.5)));
  });
}

Status Softplus(OpContext& ctx) {
  return MapUnary<kFloats>(ctx, [](auto v) { return StableSoftplus(v); });
}

Status Softsign(OpContext& ctx) {
  return MapUnary<kFloats>(ctx, [](auto v) { return v / (decltype(v)(1) + std::fabs(v)); });
}

Status ThresholdedRelu(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(float alpha, ctx.node().Float("alpha", 1.0f));
  return MapUnary<kFloats>(ctx, [alpha](auto v) {
    using C = decltype(v);
    return v > static_cast<C>(alpha) ? v : C(0);
  });
}

Status Shrink(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(float lambd, ctx.node().Float("lambd", 0.5f));
  TESSERA_ASSIGN_OR_RETURN(float bias, ctx.node().Float("bias", 0.0f));
  return MapUnary<kNumeric>(ctx, [lambd, bias](auto v) {
    using C = decltype(v);
    if constexpr (std::is_integral_v<C>) {
      // Integers: computed in double, converted back (wrapping like a Cast).
      const double d = static_cast<double>(v);
      const double y = d < -lambd ? d + bias : (d > lambd ? d - bias : 0.0);
      return FloatToInt<C>(y);
    } else {
      return v < static_cast<C>(-lambd) ? v + static_cast<C>(bias)
                                        : (v > static_cast<C>(lambd) ? v - static_cast<C>(bias) : C(0));
    }
  });
}

Status Mish(OpContext& ctx) {
  return MapUnary<kFloats>(ctx, [](auto v) { return v * std::tanh(StableSoftplus(v)); });
}

Status Gelu(OpContext& ctx) {
  const StatusOr<std::string> approx = ctx.node().String("approximate", "none");
  if (!approx.ok()) return approx.status();
  const std::string& approximate = *approx;
  if (approximate == "none") {
    return MapUnary<kFloats>(ctx, [](auto v) {
      using C = decltype(v);
      return C(0.5) * v * (C(1) + std::erf(v * C(0.70710678118654752440)));
    });
  }
  if (approximate == "tanh") {
    return MapUnary<kFloats>(ctx, [](auto v) {
      using C = decltype(v);
      return C(0.5) * v * (C(1) + std::tanh(C(0.79788456080286535588) * (v + C(0.044715) * v * v * v)));
    });
  }
  return ctx.Error("approximate must be 'none' or 'tanh', got '{}'", approximate);
}

// PRelu: y = x < 0 ? slope * x : x, slope broadcast to X's shape. Before
// opset 7 a 1-D slope of X's channel count (dim 1) applies per channel, as
// the exporters of that time (Caffe2, PyTorch's opset-6 export) meant.
Status PRelu(OpContext& ctx) {
  BinaryInputs in;
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array slope, ctx.tensor(1));
  if (ctx.opset() < 7 && slope.rank() == 1 && x.rank() > 2 && slope.dim(0) == x.dim(1) && slope.dim(0) > 1) {
    std::vector<int64_t> per_channel(x.rank() - 1, 1);
    per_channel[0] = slope.dim(0);
    in.a = x;
    in.b = slope.Reshaped(per_channel);
    in.out_shape = x.shape();
  } else {
    TESSERA_ASSIGN_OR_RETURN(in, GetBinaryInputs(ctx, /*legacy_broadcast_before_7=*/false));
  }
  if (in.a.type() != in.b.type()) {
    return ctx.Error("X and slope must have one element type, got {} and {}", ElemName(in.a.type()),
                     ElemName(in.b.type()));
  }
  if (in.out_shape != in.a.shape()) {
    return ctx.Error("slope {} does not broadcast to X {}", in.b.ShapeString(), in.a.ShapeString());
  }
  constexpr unsigned kTypes = kFloats | kSigned;
  if (!TypeInSet(in.a.type(), kTypes))
    return ctx.Error("X must be a float or signed integer tensor, got {}", ElemName(in.a.type()));
  Array y;
  TESSERA_RETURN_IF_ERROR(VisitNumeric(in.a.type(), "PRelu", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (TypeIn<T>(kTypes)) {
      y = BinaryLoop<T, T, T>(in.a, in.b, in.a.type(), in.out_shape, [](T x, T s) -> T {
        const auto cx = Load(x);
        return cx < decltype(cx)(0) ? Store<T>(WrapMul(Load(s), cx)) : x;
      });
    }
  }));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace

void RegisterActivationOps(OpRegistry& r) {
  r.Register("Sigmoid", Sigmoid);
  r.Register("Relu", Relu);
  r.Register("LeakyRelu", LeakyRelu);
  r.Register("Elu", Elu);
  r.Register("Selu", Selu);
  r.Register("Celu", Celu);
  r.Register("HardSigmoid", HardSigmoid);
  r.Register("HardSwish", HardSwish);
  r.Register("Softplus", Softplus);
  r.Register("Softsign", Softsign);
  r.Register("ThresholdedRelu", ThresholdedRelu);
  r.Register("Shrink", Shrink);
  r.Register("Mish", Mish);
  r.Register("Gelu", Gelu);
  r.Register("PRelu", PRelu);
}

}  // namespace tessera::onnx::elementwise
