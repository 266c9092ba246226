// Conv and ConvTranspose (N-d, groups, dilations, auto_pad / pads,
// output_shape / output_padding). float32 2-d Conv runs on ops::Conv2d; other
// ranks and dtypes use the reference loops of nn_util.h.
#include <exception>
#include <string>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"
#include "tessera/onnx/ops/nn/nn_util.h"
#include "tessera/ops/conv/conv.h"

namespace tessera::onnx::nn {
namespace {

// x padded with zeros by (pb, pe) on the two spatial axes of an NCHW float array.
Array PadSpatial2d(const Array& x, const Window& w) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t ph = h + w.pads_begin[0] + w.pads_end[0], pw = wd + w.pads_begin[1] + w.pads_end[1];
  Array out(ElemType::kFloat, {n, c, ph, pw});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t p = 0; p < n * c; ++p) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < wd; ++j) {
        dst[(p * ph + i + w.pads_begin[0]) * pw + j + w.pads_begin[1]] = src[(p * h + i) * wd + j];
      }
    }
  }
  return out;
}

StatusOr<Array> Conv2dFast(const OpContext& ctx, const ConvShape& s, const Array& x, const Array& w, const Array* b) {
  ops::Conv2dOptions o;
  o.stride_h = s.win.strides[0];
  o.stride_w = s.win.strides[1];
  o.dilation_h = s.win.dilations[0];
  o.dilation_w = s.win.dilations[1];
  o.groups = s.group;
  Array xin = x;
  if (s.win.pads_begin == s.win.pads_end) {
    o.pad_h = s.win.pads_begin[0];
    o.pad_w = s.win.pads_begin[1];
  } else {
    xin = PadSpatial2d(x, s.win);
  }
  try {
    Tensor y = ops::Conv2d(ToTensor(xin), ToTensor(w), b ? ToTensor(*b) : Tensor(), o);
    return FromTensor(y);
  } catch (const std::exception& e) {
    return ctx.Error("{}", e.what());
  }
}

Status ConvKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array w, ctx.tensor(1));
  if (!IsFloatType(x.type()) || w.type() != x.type()) {
    return ctx.Error("X and W must be float tensors of one type, got {} and {}", ElemName(x.type()),
                     ElemName(w.type()));
  }
  TESSERA_ASSIGN_OR_RETURN(ConvShape s, ReadConvShape(ctx, x.shape(), w.shape()));
  Array b;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(b, ctx.tensor(2));
    if (b.type() != x.type() || b.rank() != 1 || b.dim(0) != s.m) {
      return ctx.Error("B must be a {} vector of {} elements, got {}", ElemName(x.type()), s.m, b.ShapeString());
    }
  }
  const std::vector<int64_t> out_shape = ConvOutShape(s);
  if (x.type() == ElemType::kFloat && x.rank() == 4 && Numel(out_shape) > 0) {
    TESSERA_ASSIGN_OR_RETURN(Array y, Conv2dFast(ctx, s, x, w, b.defined() ? &b : nullptr));
    ctx.set_output(0, y);
    return Status::Ok();
  }
  std::vector<double> acc(static_cast<size_t>(Numel(out_shape)));
  const Array xd = x.CastTo(ElemType::kDouble), wd = w.CastTo(ElemType::kDouble);
  const double* px = xd.data<double>();
  const double* pw = wd.data<double>();
  ConvLoop<double>(
      s, [&](int64_t i) { return px[i]; }, [&](int64_t i, int64_t) { return pw[i]; }, acc.data());
  Array y(ElemType::kDouble, out_shape);
  const int64_t per = Numel(s.win.out);
  for (int64_t i = 0; i < y.numel(); ++i) {
    y.data<double>()[i] = acc[static_cast<size_t>(i)] + (b.defined() ? b.GetDouble((i / per) % s.m) : 0.0);
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

Status ConvTransposeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array w, ctx.tensor(1));
  if (!IsFloatType(x.type()) || w.type() != x.type()) {
    return ctx.Error("X and W must be float tensors of one type, got {} and {}", ElemName(x.type()),
                     ElemName(w.type()));
  }
  if (x.rank() < 3 || w.rank() != x.rank()) return ctx.Error("X must be N x C x D... and W of the same rank");
  const Node& node = ctx.node();
  const size_t r = x.rank() - 2;
  TESSERA_ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
  const int64_t n = x.dim(0), c = x.dim(1);
  if (group <= 0 || c % group != 0 || w.dim(0) != c) {
    return ctx.Error("W's first dim {} must equal C {}, divisible by group {}", w.dim(0), c, group);
  }
  const int64_t mg = w.dim(1), m = mg * group, cg = c / group;
  std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end()), k(w.shape().begin() + 2, w.shape().end());
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> ks, node.Ints("kernel_shape", k));
  if (ks != k) return ctx.Error("kernel_shape does not match the weight's spatial shape");
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> strides, node.Ints("strides", std::vector<int64_t>(r, 1)));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> dil, node.Ints("dilations", std::vector<int64_t>(r, 1)));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.Ints("pads", std::vector<int64_t>(2 * r, 0)));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> opad, node.Ints("output_padding", std::vector<int64_t>(r, 0)));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> oshape, node.Ints("output_shape", {}));
  TESSERA_ASSIGN_OR_RETURN(std::string auto_pad, node.String("auto_pad", "NOTSET"));
  if (strides.size() != r || dil.size() != r || pads.size() != 2 * r || opad.size() != r) {
    return ctx.Error("strides / dilations / pads / output_padding do not match {} spatial axes", r);
  }
  if (oshape.size() == r + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (!oshape.empty() && oshape.size() != r) return ctx.Error("output_shape has {} entries", oshape.size());
  Window win;
  win.in = in;
  win.kernel = k;
  win.strides = strides;
  win.dilations = dil;
  win.out.resize(r);
  win.pads_begin.resize(r);
  win.pads_end.resize(r);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  for (size_t i = 0; i < r; ++i) {
    if (strides[i] <= 0 || dil[i] <= 0 || k[i] <= 0 || opad[i] < 0 || pads[i] < 0 || pads[i + r] < 0) {
      return ctx.Error("invalid window on axis {}", i);
    }
    const int64_t full = strides[i] * (in[i] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1;
    if (!oshape.empty() || same) {
      const int64_t out = oshape.empty() ? in[i] * strides[i] : oshape[i];
      const int64_t total = std::max<int64_t>(0, full - out);
      const bool upper = auto_pad != "SAME_LOWER";
      win.pads_begin[i] = upper ? total / 2 : total - total / 2;
      win.pads_end[i] = total - win.pads_begin[i];
      win.out[i] = out;
    } else if (auto_pad == "VALID") {
      win.out[i] = full;
    } else {
      win.pads_begin[i] = pads[i];
      win.pads_end[i] = pads[i + r];
      win.out[i] = full - pads[i] - pads[i + r];
    }
    if (win.out[i] < 0) return ctx.Error("negative output size on axis {}", i);
  }
  Array b;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(b, ctx.tensor(2));
    if (b.type() != x.type() || b.rank() != 1 || b.dim(0) != m) {
      return ctx.Error("B must be a {} vector of {} elements, got {}", ElemName(x.type()), m, b.ShapeString());
    }
  }
  std::vector<int64_t> out_shape = {n, m};
  out_shape.insert(out_shape.end(), win.out.begin(), win.out.end());
  const int64_t in_size = Numel(in), out_size = Numel(win.out), k_size = Numel(k);
  Array y(ElemType::kDouble, out_shape);
  double* py = y.data<double>();
  const Array xd = x.CastTo(ElemType::kDouble), wd = w.CastTo(ElemType::kDouble);
  const double* px = xd.data<double>();
  const double* pw = wd.data<double>();
  // Scatter: input position i, tap t lands on o = i * stride + t * dilation - pad_begin.
  std::vector<int64_t> ic(r, 0), offs(static_cast<size_t>(k_size));
  for (int64_t ip = 0; ip < in_size; ++ip, NextCoord(ic, in)) {
    std::vector<int64_t> kc(r, 0);
    for (int64_t t = 0; t < k_size; ++t, NextCoord(kc, k)) {
      int64_t off = 0;
      for (size_t d = 0; d < r && off >= 0; ++d) {
        const int64_t o = ic[d] * strides[d] + kc[d] * dil[d] - win.pads_begin[d];
        off = (o < 0 || o >= win.out[d]) ? -1 : off * win.out[d] + o;
      }
      offs[static_cast<size_t>(t)] = off;
    }
    for (int64_t b_i = 0; b_i < n; ++b_i) {
      for (int64_t ci = 0; ci < c; ++ci) {
        const double xv = px[(b_i * c + ci) * in_size + ip];
        const int64_t g = ci / cg;
        for (int64_t mm = 0; mm < mg; ++mm) {
          double* yo = py + (b_i * m + g * mg + mm) * out_size;
          const double* wk = pw + (ci * mg + mm) * k_size;
          for (int64_t t = 0; t < k_size; ++t) {
            if (offs[static_cast<size_t>(t)] >= 0) yo[offs[static_cast<size_t>(t)]] += xv * wk[t];
          }
        }
      }
    }
  }
  if (b.defined()) {
    for (int64_t i = 0; i < y.numel(); ++i) py[i] += b.GetDouble((i / std::max<int64_t>(out_size, 1)) % m);
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

}  // namespace

void RegisterConvKernels(OpRegistry& r) {
  r.Register("Conv", ConvKernel);
  r.Register("ConvTranspose", ConvTransposeKernel);
}

}  // namespace tessera::onnx::nn
