// Pooling: argument checks, dispatch and the reference kernels (scalar
// loops over PyTorch's window rule, double accumulators). Optimized kernels:
// pool_kernels.cc.
#include "tessera/ops/pool/pool.h"

#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/pool/pool_kernels.h"

namespace tessera::ops {
namespace {

using pool_internal::PoolGeom;
using pool_internal::Window;
using pool_internal::WindowAt;

std::string_view DTypeOrUndefined(const Tensor& t) { return t.defined() ? DTypeName(t.dtype()) : "undefined"; }
std::string ShapeOrUndefined(const Tensor& t) { return t.defined() ? ShapeString(t.shape()) : "undefined"; }

// N, C, H, W of a 4-d image shape in `layout`.
void ImageDims(const char* op, const Shape& s, ImageLayout layout, int64_t* n, int64_t* c, int64_t* h, int64_t* w) {
  TESSERA_OP_CHECK(s.size() == 4, "{}: x must be 4-d ({}), got shape {}", op,
                   layout == ImageLayout::kNCHW ? "[N, C, H, W]" : "[N, H, W, C]", ShapeString(s));
  for (int64_t d : s) {
    TESSERA_OP_CHECK(d > 0, "{}: x must not be empty, got shape {}", op, ShapeString(s));
  }
  *n = s[0];
  if (layout == ImageLayout::kNCHW) {
    *c = s[1], *h = s[2], *w = s[3];
  } else {
    *h = s[1], *w = s[2], *c = s[3];
  }
}

Shape ImageShape(ImageLayout layout, int64_t n, int64_t c, int64_t h, int64_t w) {
  return layout == ImageLayout::kNCHW ? Shape{n, c, h, w} : Shape{n, h, w, c};
}

PoolGeom CheckGeometry(const char* op, const Shape& x_shape, const Pool2dOptions& o) {
  PoolGeom g{};
  g.o = o;
  ImageDims(op, x_shape, o.layout, &g.N, &g.C, &g.H, &g.W);
  TESSERA_OP_CHECK(o.kernel_h >= 1 && o.kernel_w >= 1, "{}: kernel must be >= 1, got {}x{}", op, o.kernel_h,
                   o.kernel_w);
  TESSERA_OP_CHECK(o.stride_h >= 1 && o.stride_w >= 1, "{}: stride must be >= 1, got {}x{}", op, o.stride_h,
                   o.stride_w);
  TESSERA_OP_CHECK(o.pad_h >= 0 && o.pad_w >= 0 && o.pad_h <= o.kernel_h / 2 && o.pad_w <= o.kernel_w / 2,
                   "{}: padding must be in [0, kernel/2], got pad {}x{} for kernel {}x{}", op, o.pad_h, o.pad_w,
                   o.kernel_h, o.kernel_w);
  g.OH = WindowOutputSize(g.H, o.kernel_h, o.stride_h, o.pad_h, 1, o.ceil_mode);
  g.OW = WindowOutputSize(g.W, o.kernel_w, o.stride_w, o.pad_w, 1, o.ceil_mode);
  TESSERA_OP_CHECK(g.OH > 0 && g.OW > 0,
                   "{}: empty output ({}x{}) for x {} {} with kernel {}x{}, stride {}x{}, pad {}x{}", op, g.OH, g.OW,
                   ImageLayoutName(o.layout), ShapeString(x_shape), o.kernel_h, o.kernel_w, o.stride_h, o.stride_w,
                   o.pad_h, o.pad_w);
  return g;
}

void CheckInput(const char* op, const Tensor& x) {
  TESSERA_OP_CHECK(x.defined() && x.dtype() == DType::kF32, "{}: x must be fp32, got {}", op, DTypeOrUndefined(x));
}

// grad_y must be fp32 with the output's shape.
void CheckGradY(const char* op, const Tensor& grad_y, const Shape& expected, const Shape& x_shape) {
  TESSERA_OP_CHECK(grad_y.defined() && grad_y.dtype() == DType::kF32 && grad_y.shape() == expected,
                   "{}: grad_y must be fp32 {} (the output shape for x {}), got {} {}", op, ShapeString(expected),
                   ShapeString(x_shape), DTypeOrUndefined(grad_y), ShapeOrUndefined(grad_y));
}

Shape OutShape(const PoolGeom& g) { return ImageShape(g.o.layout, g.N, g.C, g.OH, g.OW); }

// Flat element offsets in the call's layout.
int64_t XAt(const PoolGeom& g, int64_t n, int64_t c, int64_t h, int64_t w) {
  return g.nhwc() ? ((n * g.H + h) * g.W + w) * g.C + c : ((n * g.C + c) * g.H + h) * g.W + w;
}
int64_t YAt(const PoolGeom& g, int64_t n, int64_t c, int64_t oh, int64_t ow) {
  return g.nhwc() ? ((n * g.OH + oh) * g.OW + ow) * g.C + c : ((n * g.C + c) * g.OH + oh) * g.OW + ow;
}

// Calls f(n, c, oh, ow, window) for every output element.
template <typename F>
void ForEachOutput(const PoolGeom& g, F&& f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) f(n, c, oh, ow, WindowAt(g, oh, ow));
}

void MaxForwardReference(const PoolGeom& g, const float* x, float* y, int64_t* idx) {
  ForEachOutput(g, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win) {
    float best = -std::numeric_limits<float>::infinity();
    int64_t arg = win.h0 * g.W + win.w0;
    for (int64_t h = win.h0; h < win.h1; ++h) {
      for (int64_t w = win.w0; w < win.w1; ++w) {
        const float v = x[XAt(g, n, c, h, w)];
        if (v > best || std::isnan(v)) {  // first maximum wins; NaN propagates (PyTorch)
          best = v;
          arg = h * g.W + w;
        }
      }
    }
    y[YAt(g, n, c, oh, ow)] = best;
    idx[YAt(g, n, c, oh, ow)] = arg;
  });
}

bool MaxBackwardReference(const PoolGeom& g, const float* dy, const int64_t* idx, float* dx) {
  std::vector<double> acc(static_cast<size_t>(g.N * g.C * g.H * g.W), 0.0);
  bool ok = true;
  ForEachOutput(g, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window&) {
    const int64_t k = idx[YAt(g, n, c, oh, ow)];
    if (k < 0 || k >= g.H * g.W) {
      ok = false;
      return;
    }
    acc[XAt(g, n, c, k / g.W, k % g.W)] += dy[YAt(g, n, c, oh, ow)];
  });
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = static_cast<float>(acc[i]);
  return ok;
}

void AvgForwardReference(const PoolGeom& g, const float* x, float* y) {
  ForEachOutput(g, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win) {
    double sum = 0;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) sum += x[XAt(g, n, c, h, w)];
    y[YAt(g, n, c, oh, ow)] = static_cast<float>(sum / static_cast<double>(win.divisor(g.o.count_include_pad)));
  });
}

void AvgBackwardReference(const PoolGeom& g, const float* dy, float* dx) {
  std::vector<double> acc(static_cast<size_t>(g.N * g.C * g.H * g.W), 0.0);
  ForEachOutput(g, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, const Window& win) {
    const double v = dy[YAt(g, n, c, oh, ow)] / static_cast<double>(win.divisor(g.o.count_include_pad));
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) acc[XAt(g, n, c, h, w)] += v;
  });
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = static_cast<float>(acc[i]);
}

// Global average pooling is average pooling with the whole plane as window.
PoolGeom GlobalGeometry(const char* op, const Shape& x_shape, ImageLayout layout) {
  PoolGeom g{};
  g.o.layout = layout;
  ImageDims(op, x_shape, layout, &g.N, &g.C, &g.H, &g.W);
  g.o.kernel_h = g.H, g.o.kernel_w = g.W, g.o.stride_h = g.H, g.o.stride_w = g.W;
  g.OH = g.OW = 1;
  return g;
}

}  // namespace

MaxPool2dResult MaxPool2d(const Tensor& x_in, const Pool2dOptions& options) {
  CheckInput("max_pool2d", x_in);
  PoolGeom g = CheckGeometry("max_pool2d", x_in.shape(), options);
  Tensor x = x_in.Contiguous();
  MaxPool2dResult r;
  r.y = Tensor::Empty(OutShape(g), DType::kF32);
  r.indices = Tensor::Empty(OutShape(g), DType::kI64);
  if (UseReference()) {
    MaxForwardReference(g, x.data<float>(), r.y.data<float>(), r.indices.data<int64_t>());
  } else {
    kern::MaxPoolForwardOptimized(g, x.data<float>(), r.y.data<float>(), r.indices.data<int64_t>());
  }
  return r;
}

Tensor MaxPool2dBackward(const Tensor& grad_y, const Tensor& indices, const Shape& x_shape,
                         const Pool2dOptions& options) {
  const char* op = "max_pool2d backward";
  PoolGeom g = CheckGeometry(op, x_shape, options);
  CheckGradY(op, grad_y, OutShape(g), x_shape);
  TESSERA_OP_CHECK(indices.defined() && indices.dtype() == DType::kI64 && indices.shape() == grad_y.shape(),
                   "{}: indices must be int64 {} (grad_y's shape), got {} {}", op, ShapeString(grad_y.shape()),
                   DTypeOrUndefined(indices), ShapeOrUndefined(indices));
  Tensor dy = grad_y.Contiguous(), idx = indices.Contiguous();
  Tensor dx = Tensor::Empty(x_shape, DType::kF32);
  const bool ok = UseReference() ? MaxBackwardReference(g, dy.data<float>(), idx.data<int64_t>(), dx.data<float>())
                                 : kern::MaxPoolBackwardOptimized(g, dy.data<float>(), idx.data<int64_t>(),
                                                                  dx.data<float>());
  TESSERA_OP_CHECK(ok, "{}: indices must lie in [0, H*W = {}) (flat positions within a plane of x {})", op,
                   g.H * g.W, ShapeString(x_shape));
  return dx;
}

Tensor AvgPool2d(const Tensor& x_in, const Pool2dOptions& options) {
  CheckInput("avg_pool2d", x_in);
  PoolGeom g = CheckGeometry("avg_pool2d", x_in.shape(), options);
  Tensor x = x_in.Contiguous();
  Tensor y = Tensor::Empty(OutShape(g), DType::kF32);
  if (UseReference()) {
    AvgForwardReference(g, x.data<float>(), y.data<float>());
  } else {
    kern::AvgPoolForwardOptimized(g, x.data<float>(), y.data<float>());
  }
  return y;
}

Tensor AvgPool2dBackward(const Tensor& grad_y, const Shape& x_shape, const Pool2dOptions& options) {
  const char* op = "avg_pool2d backward";
  PoolGeom g = CheckGeometry(op, x_shape, options);
  CheckGradY(op, grad_y, OutShape(g), x_shape);
  Tensor dy = grad_y.Contiguous();
  Tensor dx = Tensor::Empty(x_shape, DType::kF32);
  if (UseReference()) {
    AvgBackwardReference(g, dy.data<float>(), dx.data<float>());
  } else {
    kern::AvgPoolBackwardOptimized(g, dy.data<float>(), dx.data<float>());
  }
  return dx;
}

Tensor GlobalAvgPool2d(const Tensor& x_in, ImageLayout layout) {
  CheckInput("global_avg_pool2d", x_in);
  PoolGeom g = GlobalGeometry("global_avg_pool2d", x_in.shape(), layout);
  Tensor x = x_in.Contiguous();
  Tensor y = Tensor::Empty({g.N, g.C}, DType::kF32);
  if (UseReference()) {
    AvgForwardReference(g, x.data<float>(), y.data<float>());  // [N, C, 1, 1] and [N, 1, 1, C] are both [N, C]
  } else {
    kern::GlobalAvgPoolForwardOptimized(g, x.data<float>(), y.data<float>());
  }
  return y;
}

Tensor GlobalAvgPool2dBackward(const Tensor& grad_y, const Shape& x_shape, ImageLayout layout) {
  const char* op = "global_avg_pool2d backward";
  PoolGeom g = GlobalGeometry(op, x_shape, layout);
  CheckGradY(op, grad_y, Shape{g.N, g.C}, x_shape);
  Tensor dy = grad_y.Contiguous();
  Tensor dx = Tensor::Empty(x_shape, DType::kF32);
  if (UseReference()) {
    AvgBackwardReference(g, dy.data<float>(), dx.data<float>());
  } else {
    kern::GlobalAvgPoolBackwardOptimized(g, dy.data<float>(), dx.data<float>());
  }
  return dx;
}

}  // namespace tessera::ops
