#include "tessera/ops/testing/parity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tessera/ops/common/impl.h"
#include "tessera/tensor/rng.h"

namespace tessera::ops::testing {

Tolerance DefaultTolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32: return {1e-4, 1e-4};
    case DType::kBF16: return {2e-2, 2e-2};
    case DType::kF16: return {2e-3, 2e-3};
    default: return {0, 0};
  }
}

Status AllClose(const Tensor& actual, const Tensor& expected, Tolerance tol, const std::string& what) {
  if (!actual.defined() || !expected.defined()) {
    if (actual.defined() != expected.defined()) {
      return Internal("{}: one side is undefined (actual {}, expected {})", what, actual.defined(),
                      expected.defined());
    }
    return Status::Ok();
  }
  if (actual.shape() != expected.shape()) {
    return Internal("{}: shape {} vs expected {}", what, ShapeString(actual.shape()), ShapeString(expected.shape()));
  }
  if (actual.dtype() != expected.dtype()) {
    return Internal("{}: dtype {} vs expected {}", what, DTypeName(actual.dtype()), DTypeName(expected.dtype()));
  }
  if (!IsFloating(actual.dtype())) {
    auto a = actual.ToIntVector(), e = expected.ToIntVector();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != e[i]) return Internal("{}: element {} is {}, expected {}", what, i, a[i], e[i]);
    }
    return Status::Ok();
  }
  auto a = actual.ToFloatVector(), e = expected.ToFloatVector();
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    if (both_nan) continue;
    double diff = std::fabs(static_cast<double>(a[i]) - e[i]);
    if (!(diff <= tol.atol + tol.rtol * std::fabs(e[i]))) {
      return Internal("{}: element {} is {}, expected {} (|diff| {:.3g} > atol {} + rtol {})", what, i, a[i], e[i],
                      diff, tol.atol, tol.rtol);
    }
  }
  return Status::Ok();
}

namespace {

double Dot(const Tensors& outs, const Tensors& gouts, const std::vector<bool>& diff) {
  double total = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!diff[i] || !gouts[i].defined()) continue;
    auto o = outs[i].ToFloatVector(), g = gouts[i].ToFloatVector();
    for (size_t j = 0; j < o.size(); ++j) total += static_cast<double>(o[j]) * g[j];
  }
  return total;
}

}  // namespace

Status CheckParity(const ParityCase& c, DType dtype, uint64_t seed) {
  std::string label = fmt::format("{} [{}] {}", c.op, c.name, DTypeName(dtype));
  Tensors inputs = c.make_inputs(dtype, seed);
  Tensors ref_out, opt_out;
  {
    ScopedImpl scope(Impl::kReference);
    ref_out = c.forward(inputs);
  }
  opt_out = c.forward(inputs);
  if (ref_out.size() != opt_out.size()) return Internal("{}: output count differs", label);
  Tolerance tol = DefaultTolerance(dtype);
  for (size_t i = 0; i < ref_out.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(AllClose(opt_out[i], ref_out[i], tol, fmt::format("{}: forward output {}", label, i)));
  }
  if (!c.backward) return Status::Ok();

  std::vector<bool> diff = c.differentiable_outputs;
  if (diff.empty()) {
    for (const Tensor& t : ref_out) diff.push_back(IsFloating(t.dtype()));
  }
  Tensors gouts(ref_out.size());
  for (size_t i = 0; i < ref_out.size(); ++i) {
    if (diff[i]) gouts[i] = RandomTensor(ref_out[i].shape(), ref_out[i].dtype(), seed * 31 + 7 + i);
  }
  Tensors ref_g, opt_g;
  {
    ScopedImpl scope(Impl::kReference);
    ref_g = c.backward(inputs, ref_out, gouts);
  }
  opt_g = c.backward(inputs, opt_out, gouts);
  if (ref_g.size() != inputs.size() || opt_g.size() != inputs.size()) {
    return Internal("{}: backward must return one gradient per input ({} inputs, got {} / {})", label,
                    inputs.size(), ref_g.size(), opt_g.size());
  }
  Tolerance gtol = tol;
  if (dtype != DType::kF32) gtol = {tol.atol * 2, tol.rtol * 2};
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(AllClose(opt_g[i], ref_g[i], gtol, fmt::format("{}: gradient of input {}", label, i)));
  }
  if (dtype != DType::kF32) return Status::Ok();

  // Finite differences on the reference forward.
  ScopedImpl scope(Impl::kReference);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!ref_g[i].defined() || !IsFloating(inputs[i].dtype())) continue;
    std::vector<float> g = ref_g[i].ToFloatVector();
    double gscale = 0;
    for (float v : g) gscale = std::max(gscale, static_cast<double>(std::fabs(v)));
    int64_t n = inputs[i].numel();
    int samples = static_cast<int>(std::min<int64_t>(n, c.fd_samples));
    for (int s = 0; s < samples; ++s) {
      int64_t e = samples == n ? s : static_cast<int64_t>(UniformAt(seed + 99, i * 1000 + s) * n);
      double values[2];
      for (int side = 0; side < 2; ++side) {
        Tensors perturbed = inputs;
        perturbed[i] = inputs[i].Clone();
        perturbed[i].data<float>()[e] += static_cast<float>(side == 0 ? c.fd_eps : -c.fd_eps);
        values[side] = Dot(c.forward(perturbed), gouts, diff);
      }
      double fd = (values[0] - values[1]) / (2 * c.fd_eps);
      double err = std::fabs(fd - g[e]);
      double bound = c.fd_tolerance * (std::max(std::fabs(fd), std::fabs(static_cast<double>(g[e]))) + 0.1 * gscale) + 1e-4;
      if (!(err <= bound)) {
        return Internal("{}: d/d input{}[{}]: analytic {} vs finite difference {} (|err| {:.3g} > {:.3g})", label, i,
                        e, g[e], fd, err, bound);
      }
    }
  }
  return Status::Ok();
}

std::vector<ParityCase>& Registry() {
  static std::vector<ParityCase> cases;
  return cases;
}

Registrar::Registrar(std::function<std::vector<ParityCase>()> make) {
  for (ParityCase& c : make()) Registry().push_back(std::move(c));
}

Tensor RandomTensor(const Shape& shape, DType dtype, uint64_t seed, float low, float high) {
  Tensor t = Tensor::Empty(shape, dtype);
  FillUniform(t, seed, low, high);
  return t;
}

Tensor RandomIndices(const Shape& shape, int64_t high, uint64_t seed) {
  std::vector<int64_t> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::min<int64_t>(high - 1, static_cast<int64_t>(UniformAt(seed, i) * static_cast<float>(high)));
  }
  return Tensor::FromInts(v, shape);
}

}  // namespace tessera::ops::testing
