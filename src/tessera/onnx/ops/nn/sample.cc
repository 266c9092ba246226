// Sampling ops: GridSample (bilinear / nearest / bicubic, zeros / border /
// reflection padding, as PyTorch's grid_sample) and RoiAlign (avg / max,
// half_pixel / output_half_pixel, as onnxruntime).
#include <algorithm>
#include <cmath>
#include <string>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"
#include "tessera/onnx/ops/nn/nn_util.h"

namespace tessera::onnx::nn {
namespace {

double Reflect(double v, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  v = std::fabs(v - lo);
  const double extra = std::fmod(v, span);
  const double flips = std::floor(v / span);
  return std::fmod(flips, 2.0) == 0 ? extra + lo : span - extra + lo;
}

struct GridSampler {
  const double* plane;
  int64_t h, w;
  std::string padding;
  bool align;

  // Applies the padding mode to a (possibly fractional) coordinate on an axis of `size`.
  double Pad(double v, int64_t size) const {
    const double hi = static_cast<double>(size - 1);
    if (padding == "border") return std::min(std::max(v, 0.0), hi);
    if (padding == "reflection") {
      v = align ? Reflect(v, 0, 2 * hi) : Reflect(v, -1, 2 * static_cast<double>(size) - 1);
      return std::min(std::max(v, 0.0), hi);
    }
    return v;
  }
  // Pixel (y, x) or 0 when outside (after padding of integer coordinates).
  double At(int64_t y, int64_t x) const {
    if (y < 0 || y >= h || x < 0 || x >= w) return 0;
    return plane[y * w + x];
  }
  double AtPadded(double y, double x) const {
    y = Pad(y, h);
    x = Pad(x, w);
    if (!(y >= 0 && y < static_cast<double>(h) && x >= 0 && x < static_cast<double>(w))) return 0;
    return At(static_cast<int64_t>(y), static_cast<int64_t>(x));
  }
};

double Unnormalize(double c, int64_t size, bool align) {
  return align ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
}

double Cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
double Cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

Status GridSampleKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array grid, ctx.tensor(1));
  if (!IsFloatType(x.type()) || !IsFloatType(grid.type())) return ctx.Error("X and grid must be float tensors");
  if (x.rank() != 4 || grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2) {
    return ctx.Error("X must be N x C x H x W and grid N x H_out x W_out x 2, got {} and {}", x.ShapeString(),
                     grid.ShapeString());
  }
  TESSERA_ASSIGN_OR_RETURN(std::string mode, ctx.node().String("mode", "bilinear"));
  TESSERA_ASSIGN_OR_RETURN(std::string padding, ctx.node().String("padding_mode", "zeros"));
  TESSERA_ASSIGN_OR_RETURN(int64_t align, ctx.node().Int("align_corners", 0));
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") return ctx.Error("unknown mode '{}'", mode);
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return ctx.Error("unknown padding_mode '{}'", padding);
  }
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), ho = grid.dim(1), wo = grid.dim(2);
  const Array xd = x.CastTo(ElemType::kDouble), gd = grid.CastTo(ElemType::kDouble);
  Array y(ElemType::kDouble, {n, c, ho, wo});
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      GridSampler s{xd.data<double>() + (b * c + ch) * h * w, h, w, padding, align != 0};
      for (int64_t i = 0; i < ho * wo; ++i) {
        const double* g = gd.data<double>() + (b * ho * wo + i) * 2;
        double ix = Unnormalize(g[0], w, s.align), iy = Unnormalize(g[1], h, s.align);
        double v = 0;
        if (mode == "bicubic") {
          const double x0 = std::floor(ix), y0 = std::floor(iy), tx = ix - x0, ty = iy - y0;
          const double cx[4] = {Cubic2(tx + 1, -0.75), Cubic1(tx, -0.75), Cubic1(1 - tx, -0.75), Cubic2(2 - tx, -0.75)};
          const double cy[4] = {Cubic2(ty + 1, -0.75), Cubic1(ty, -0.75), Cubic1(1 - ty, -0.75), Cubic2(2 - ty, -0.75)};
          for (int r = 0; r < 4; ++r) {
            for (int q = 0; q < 4; ++q) v += cy[r] * cx[q] * s.AtPadded(y0 - 1 + r, x0 - 1 + q);
          }
        } else {
          ix = s.Pad(ix, w);
          iy = s.Pad(iy, h);
          if (mode == "nearest") {
            const double rx = std::nearbyint(ix), ry = std::nearbyint(iy);
            if (rx >= 0 && rx < static_cast<double>(w) && ry >= 0 && ry < static_cast<double>(h)) {
              v = s.At(static_cast<int64_t>(ry), static_cast<int64_t>(rx));
            }
          } else if (std::isfinite(ix) && std::isfinite(iy) && std::fabs(ix) < 1e15 && std::fabs(iy) < 1e15) {
            const double x0 = std::floor(ix), y0 = std::floor(iy), tx = ix - x0, ty = iy - y0;
            const int64_t xi = static_cast<int64_t>(x0), yi = static_cast<int64_t>(y0);
            v = s.At(yi, xi) * (1 - tx) * (1 - ty) + s.At(yi, xi + 1) * tx * (1 - ty) +
                s.At(yi + 1, xi) * (1 - tx) * ty + s.At(yi + 1, xi + 1) * tx * ty;
          }
        }
        y.data<double>()[(b * c + ch) * ho * wo + i] = v;
      }
    }
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

Status RoiAlignKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array rois, ctx.tensor(1));
  TESSERA_ASSIGN_OR_RETURN(Array bidx, ctx.tensor(2));
  if (!IsFloatType(x.type()) || x.rank() != 4) return ctx.Error("X must be a float N x C x H x W tensor");
  if (!IsFloatType(rois.type()) || rois.rank() != 2 || rois.dim(1) != 4) return ctx.Error("rois must be R x 4");
  if (!IsIntegerType(bidx.type()) || bidx.rank() != 1 || bidx.dim(0) != rois.dim(0)) {
    return ctx.Error("batch_indices must be an integer vector of {} entries", rois.dim(0));
  }
  const Node& node = ctx.node();
  TESSERA_ASSIGN_OR_RETURN(std::string mode, node.String("mode", "avg"));
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, node.Int("output_height", 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, node.Int("output_width", 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t sampling, node.Int("sampling_ratio", 0));
  TESSERA_ASSIGN_OR_RETURN(double scale, node.Float("spatial_scale", 1.0f));
  TESSERA_ASSIGN_OR_RETURN(std::string ctm, node.String("coordinate_transformation_mode",
                                                        ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  if (oh <= 0 || ow <= 0 || sampling < 0) return ctx.Error("invalid output size or sampling_ratio");
  if (mode != "avg" && mode != "max") return ctx.Error("unknown mode '{}'", mode);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), nr = rois.dim(0);
  const double off = ctm == "half_pixel" ? 0.5 : 0.0;
  const Array xd = x.CastTo(ElemType::kDouble);
  Array y(ElemType::kDouble, {nr, c, oh, ow});
  for (int64_t r = 0; r < nr; ++r) {
    const int64_t b = bidx.GetInt(r);
    if (b < 0 || b >= n) return ctx.Error("batch index {} out of range [0, {})", b, n);
    const double x1 = rois.GetDouble(r * 4) * scale - off, y1 = rois.GetDouble(r * 4 + 1) * scale - off;
    double rw = rois.GetDouble(r * 4 + 2) * scale - off - x1, rh = rois.GetDouble(r * 4 + 3) * scale - off - y1;
    if (ctm != "half_pixel") {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    const double gh_d = sampling > 0 ? static_cast<double>(sampling) : std::ceil(rh / static_cast<double>(oh));
    const double gw_d = sampling > 0 ? static_cast<double>(sampling) : std::ceil(rw / static_cast<double>(ow));
    if (!(gh_d < 1e6 && gw_d < 1e6)) return ctx.Error("roi {} is too large", r);
    const int64_t gh = static_cast<int64_t>(std::max(gh_d, 0.0)), gw = static_cast<int64_t>(std::max(gw_d, 0.0));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < c; ++ch) {
      const double* plane = xd.data<double>() + (b * c + ch) * h * w;
      for (int64_t ph = 0; ph < oh; ++ph) {
        for (int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            double yy =
                y1 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              double xx =
                  x1 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
              double v = 0;
              if (yy >= -1.0 && yy <= static_cast<double>(h) && xx >= -1.0 && xx <= static_cast<double>(w)) {
                double sy = std::max(yy, 0.0), sx = std::max(xx, 0.0);
                int64_t y0 = static_cast<int64_t>(sy), x0 = static_cast<int64_t>(sx), y1i, x1i;
                if (y0 >= h - 1) {
                  y0 = y1i = h - 1;
                  sy = static_cast<double>(y0);
                } else {
                  y1i = y0 + 1;
                }
                if (x0 >= w - 1) {
                  x0 = x1i = w - 1;
                  sx = static_cast<double>(x0);
                } else {
                  x1i = x0 + 1;
                }
                const double ly = sy - static_cast<double>(y0), lx = sx - static_cast<double>(x0);
                const double w1 = (1 - ly) * (1 - lx), w2 = (1 - ly) * lx, w3 = ly * (1 - lx), w4 = ly * lx;
                const double v1 = plane[y0 * w + x0], v2 = plane[y0 * w + x1i], v3 = plane[y1i * w + x0],
                             v4 = plane[y1i * w + x1i];
                if (mode == "avg") {
                  v = w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4;
                } else {
                  v = std::max(std::max(w1 * v1, w2 * v2), std::max(w3 * v3, w4 * v4));
                }
              }
              if (mode == "avg") {
                acc += v;
              } else {
                acc = first ? v : std::max(acc, v);
              }
              first = false;
            }
          }
          y.data<double>()[((r * c + ch) * oh + ph) * ow + pw] = mode == "avg" ? acc / count : acc;
        }
      }
    }
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

}  // namespace

void RegisterSampleKernels(OpRegistry& r) {
  r.Register("GridSample", GridSampleKernel);
  r.Register("RoiAlign", RoiAlignKernel);
}

}  // namespace tessera::onnx::nn
