// Resize (opset 10: scales only; 11+: roi / scales / sizes, coordinate
// transformation modes, nearest / linear / cubic) and Upsample. N-d
// interpolation is separable: one pass per axis, each output index a short
// list of (input index, weight) taps.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"
#include "tessera/onnx/ops/nn/nn_util.h"

namespace tessera::onnx::nn {
namespace {

struct ResizeAttrs {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
  bool legacy = false;  // Upsample / Resize-10: asymmetric coordinates, nearest rounds down
};

using Taps = std::vector<std::pair<int64_t, double>>;

// The source coordinate of output index o on an axis of `in` -> `out` with scale `sc`.
// The source coordinate of output index o on an axis of `in` -> `out` with scale `sc`. As the
// reference, align_corners / tf_crop_and_resize / pytorch_half_pixel use the unrounded resized
// length in * sc (equal to `out` when sizes are given).
double SourceCoord(const ResizeAttrs& at, int64_t o, int64_t in, double sc, double r0, double r1) {
  const double x = static_cast<double>(o), lr = static_cast<double>(in) * sc;
  if (at.legacy || at.coord == "asymmetric") return x / sc;
  if (at.coord == "half_pixel") return (x + 0.5) / sc - 0.5;
  if (at.coord == "pytorch_half_pixel") return lr > 1 ? (x + 0.5) / sc - 0.5 : 0.0;
  if (at.coord == "align_corners") return lr == 1 ? 0.0 : x * static_cast<double>(in - 1) / (lr - 1);
  if (at.coord == "tf_half_pixel_for_nn") return (x + 0.5) / sc;
  // tf_crop_and_resize
  const double len = static_cast<double>(in - 1);
  return lr > 1 ? r0 * len + x * (r1 - r0) * len / (lr - 1) : 0.5 * (r0 + r1) * len;
}

std::vector<double> Coeffs(const ResizeAttrs& at, double t) {
  if (at.mode == "linear") return {1 - t, t};
  if (at.mode == "cubic") {
    const double a = at.cubic_a, u = t + 1, v = 1 - t, w = 2 - t;
    return {((a * u - 5 * a) * u + 8 * a) * u - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * v - (a + 3)) * v * v + 1, ((a * w - 5 * a) * w + 8 * a) * w - 4 * a};
  }
  return {};
}

// Taps of every output index of one axis; `outside[o]` marks tf_crop_and_resize extrapolation.
std::vector<Taps> AxisTaps(const ResizeAttrs& at, int64_t in, int64_t out, double sc, double r0, double r1,
                           std::vector<bool>& outside) {
  std::vector<Taps> taps(static_cast<size_t>(out));
  outside.assign(static_cast<size_t>(out), false);
  for (int64_t o = 0; o < out; ++o) {
    const double x = SourceCoord(at, o, in, sc, r0, r1);
    Taps& t = taps[static_cast<size_t>(o)];
    if (at.coord == "tf_crop_and_resize" && !at.legacy && (x < 0 || x > static_cast<double>(in - 1))) {
      outside[static_cast<size_t>(o)] = true;
      continue;
    }
    const double base = std::floor(x), frac = x - base;
    if (at.mode == "nearest") {
      double idx;
      if (at.legacy || at.nearest == "floor") {
        idx = base;
      } else if (at.nearest == "ceil") {
        idx = std::ceil(x);
      } else if (at.nearest == "round_prefer_ceil") {
        idx = frac >= 0.5 ? base + 1 : base;
      } else {
        idx = frac > 0.5 ? base + 1 : base;
      }
      const double clamped = std::min(std::max(idx, 0.0), static_cast<double>(in - 1));
      t.emplace_back(static_cast<int64_t>(clamped), 1.0);
      continue;
    }
    const std::vector<double> c = Coeffs(at, frac);
    const int64_t n = static_cast<int64_t>(c.size());
    const int64_t b = static_cast<int64_t>(std::min(std::max(base, -4.0), static_cast<double>(in + 4)));
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t idx = b - n / 2 + 1 + j;
      const bool in_range = idx >= 0 && idx < in;
      const double w = (at.exclude_outside && !in_range) ? 0.0 : c[static_cast<size_t>(j)];
      sum += w;
      t.emplace_back(std::min(std::max<int64_t>(idx, 0), in - 1), w);
    }
    if (at.exclude_outside && sum != 0) {
      for (auto& [idx, w] : t) w /= sum;
    }
  }
  return taps;
}

Status Interpolate(OpContext& ctx, const Array& x, const ResizeAttrs& at, const std::vector<double>& scales,
                   const std::vector<int64_t>& out_shape, const std::vector<double>& roi) {
  const size_t r = x.rank();
  std::vector<int64_t> shape = x.shape();
  const Array xd = x.CastTo(ElemType::kDouble);
  std::vector<double> cur(xd.data<double>(), xd.data<double>() + xd.numel());
  std::vector<bool> any_outside;  // per element of the current tensor
  bool use_outside = false;
  for (size_t d = 0; d < r; ++d) {
    const int64_t in = shape[d], out = out_shape[d];
    if (in == 0 && out > 0) return ctx.Error("cannot resize an empty axis {} to {}", d, out);
    const double r0 = roi.empty() ? 0 : roi[d], r1 = roi.empty() ? 1 : roi[r + d];
    std::vector<bool> outside;
    const std::vector<Taps> taps = AxisTaps(at, in, out, scales[d], r0, r1, outside);
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= shape[i];
    for (size_t i = d + 1; i < r; ++i) inner *= shape[i];
    std::vector<double> next(static_cast<size_t>(outer * out * inner));
    std::vector<bool> next_out(use_outside ? next.size() : 0);
    const bool axis_outside = std::find(outside.begin(), outside.end(), true) != outside.end();
    if (axis_outside) next_out.assign(next.size(), false);
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t o = 0; o < out; ++o) {
        const Taps& t = taps[static_cast<size_t>(o)];
        const size_t dst = static_cast<size_t>((a * out + o) * inner);
        for (const auto& [idx, w] : t) {
          if (w == 0) continue;
          const size_t src = static_cast<size_t>((a * in + idx) * inner);
          for (int64_t i = 0; i < inner; ++i)
            next[dst + static_cast<size_t>(i)] += w * cur[src + static_cast<size_t>(i)];
        }
        if (!next_out.empty()) {
          for (int64_t i = 0; i < inner; ++i) {
            bool flag = outside[static_cast<size_t>(o)];
            if (use_outside) {
              for (const auto& tp : t) {
                if (tp.second != 0) flag = flag || any_outside[static_cast<size_t>((a * in + tp.first) * inner + i)];
              }
            }
            next_out[dst + static_cast<size_t>(i)] = flag;
          }
        }
      }
    }
    cur = std::move(next);
    any_outside = std::move(next_out);
    use_outside = !any_outside.empty();
    shape[d] = out;
  }
  Array y(ElemType::kDouble, out_shape);
  for (size_t i = 0; i < cur.size(); ++i) {
    y.data<double>()[i] = (use_outside && any_outside[i]) ? at.extrapolation : cur[i];
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

// Output sizes from scales (floor(in * scale)) or scales from sizes.
Status Finish(OpContext& ctx, const Array& x, const ResizeAttrs& at, std::vector<double> scales,
              std::vector<int64_t> sizes, const std::vector<double>& roi) {
  const size_t r = x.rank();
  if (!sizes.empty()) {
    if (sizes.size() != r) return ctx.Error("sizes has {} entries for rank {}", sizes.size(), r);
    scales.resize(r);
    for (size_t d = 0; d < r; ++d) {
      if (sizes[d] < 0) return ctx.Error("negative size {}", sizes[d]);
      scales[d] = x.dim(d) > 0 ? static_cast<double>(sizes[d]) / static_cast<double>(x.dim(d)) : 1.0;
    }
  } else {
    if (scales.size() != r) return ctx.Error("scales has {} entries for rank {}", scales.size(), r);
    sizes.resize(r);
    for (size_t d = 0; d < r; ++d) {
      if (!(scales[d] > 0) || scales[d] > 1e9) return ctx.Error("scale {} must be positive", scales[d]);
      sizes[d] = static_cast<int64_t>(std::floor(static_cast<double>(x.dim(d)) * scales[d]));
    }
  }
  for (size_t d = 0; d < r; ++d) {
    if (!(scales[d] > 0)) scales[d] = 1.0;
  }
  if (!roi.empty() && roi.size() != 2 * r) return ctx.Error("roi has {} entries for rank {}", roi.size(), r);
  if (at.mode != "nearest" && at.mode != "linear" && at.mode != "cubic") {
    return ctx.Error("unknown mode '{}'", at.mode);
  }
  return Interpolate(ctx, x, at, scales, sizes, roi);
}

StatusOr<std::vector<double>> FloatsInput(const OpContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::vector<double>{};
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
  if (!IsFloatType(a.type())) return ctx.Error("input {} must be a float tensor", i);
  std::vector<double> v(static_cast<size_t>(a.numel()));
  for (int64_t k = 0; k < a.numel(); ++k) v[static_cast<size_t>(k)] = a.GetDouble(k);
  return v;
}

Status ResizeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() == ElemType::kString) return ctx.Error("string tensors cannot be resized");
  ResizeAttrs at;
  const Node& node = ctx.node();
  TESSERA_ASSIGN_OR_RETURN(at.mode, node.String("mode", "nearest"));
  if (ctx.opset() < 11) {
    at.legacy = true;
    TESSERA_ASSIGN_OR_RETURN(std::vector<double> scales, FloatsInput(ctx, 1));
    return Finish(ctx, x, at, scales, {}, {});
  }
  TESSERA_ASSIGN_OR_RETURN(at.coord, node.String("coordinate_transformation_mode", "half_pixel"));
  TESSERA_ASSIGN_OR_RETURN(at.nearest, node.String("nearest_mode", "round_prefer_floor"));
  TESSERA_ASSIGN_OR_RETURN(at.cubic_a, node.Float("cubic_coeff_a", -0.75f));
  TESSERA_ASSIGN_OR_RETURN(at.extrapolation, node.Float("extrapolation_value", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(int64_t excl, node.Int("exclude_outside", 0));
  at.exclude_outside = excl != 0;
  static const char* kCoords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                  "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoords), std::end(kCoords), at.coord) == std::end(kCoords)) {
    return ctx.Error("unknown coordinate_transformation_mode '{}'", at.coord);
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> roi, FloatsInput(ctx, 1));
  if (at.coord != "tf_crop_and_resize") roi.clear();
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> scales, FloatsInput(ctx, 2));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntsInput(ctx, 3));
  if (!scales.empty() && !sizes.empty()) return ctx.Error("only one of scales and sizes may be given");
  if (scales.empty() && sizes.empty()) return ctx.Error("one of scales and sizes must be given");
  return Finish(ctx, x, at, scales, sizes, roi);
}

Status UpsampleKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() == ElemType::kString) return ctx.Error("string tensors cannot be resized");
  ResizeAttrs at;
  at.legacy = true;
  TESSERA_ASSIGN_OR_RETURN(at.mode, ctx.node().String("mode", "nearest"));
  if (at.mode == "bilinear") at.mode = "linear";
  std::vector<double> scales;
  if (ctx.has_input(1)) {
    TESSERA_ASSIGN_OR_RETURN(scales, FloatsInput(ctx, 1));
  } else {
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> s, ctx.node().Floats("scales", {}));
    scales.assign(s.begin(), s.end());
  }
  return Finish(ctx, x, at, scales, {}, {});
}

}  // namespace

void RegisterResizeKernels(OpRegistry& r) {
  r.Register("Resize", ResizeKernel);
  r.Register("Upsample", UpsampleKernel);
}

}  // namespace tessera::onnx::nn
