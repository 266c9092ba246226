// Pooling: MaxPool (with Indices), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool and MaxUnpool, N-d over N x C x D1... inputs.
#include <cmath>
#include <limits>
#include <string>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"
#include "tessera/onnx/ops/nn/nn_util.h"

namespace tessera::onnx::nn {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

StatusOr<Array> PoolInput(const OpContext& ctx, bool allow_int) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.rank() < 3) return ctx.Error("input must be N x C x D1..., got {}", x.ShapeString());
  const bool ok = IsFloatType(x.type()) || (allow_int && IsIntegerType(x.type()));
  if (!ok) return ctx.Error("unsupported element type {}", ElemName(x.type()));
  return x;
}

// Row-major spatial offset -> column-major one (MaxPool storage_order = 1).
int64_t ColumnMajor(int64_t off, const std::vector<int64_t>& shape) {
  int64_t col = 0, stride = 1;
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = off % shape[d];
    off /= shape[d];
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    col += c[d] * stride;
    stride *= shape[d];
  }
  return col;
}

// LpPool's p: a float attribute in opset 1, an int from opset 2.
StatusOr<double> ReadP(const OpContext& ctx) {
  auto it = ctx.node().attrs.find("p");
  if (it == ctx.node().attrs.end()) return 2.0;
  const double p = it->second.type == Attribute::Type::kInt ? static_cast<double>(it->second.i) : it->second.f;
  if (!(p > 0)) return ctx.Error("p must be positive, got {}", p);
  return p;
}

template <typename T>
bool Greater(T a, T b) {
  if constexpr (std::is_same_v<T, fp16> || std::is_same_v<T, bf16>) {
    return a.ToFloat() > b.ToFloat();
  } else {
    return a > b;
  }
}

Status Pool(OpContext& ctx, PoolKind kind) {
  TESSERA_ASSIGN_OR_RETURN(Array x, PoolInput(ctx, kind == PoolKind::kMax));
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  TESSERA_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, in, {}, kind != PoolKind::kLp || ctx.opset() >= 18));
  TESSERA_ASSIGN_OR_RETURN(int64_t storage_order, ctx.node().Int("storage_order", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t include_pad, ctx.node().Int("count_include_pad", 0));
  TESSERA_ASSIGN_OR_RETURN(double p, ReadP(ctx));
  const int64_t planes = x.dim(0) * x.dim(1), in_size = Numel(in), out_size = Numel(w.out);
  std::vector<int64_t> out_shape = {x.dim(0), x.dim(1)};
  out_shape.insert(out_shape.end(), w.out.begin(), w.out.end());
  Array y(x.type(), out_shape), idx(ElemType::kInt64, out_shape);
  std::vector<int64_t> coord(w.in.size(), 0), offs;
  Status st = VisitNumeric(x.type(), "pool", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    int64_t* pi = idx.data<int64_t>();
    for (int64_t op = 0; op < out_size && out_size > 0; ++op, NextCoord(coord, w.out)) {
      TapOffsets(w, coord, offs);
      int64_t padded_count = 1;
      for (size_t d = 0; d < w.in.size(); ++d) {
        int64_t cnt = 0;
        for (int64_t k = 0; k < w.kernel[d]; ++k) {
          const int64_t pos = coord[d] * w.strides[d] - w.pads_begin[d] + k * w.dilations[d];
          if (pos >= -w.pads_begin[d] && pos < w.in[d] + w.pads_end[d]) ++cnt;
        }
        padded_count *= cnt;
      }
      for (int64_t pl = 0; pl < planes; ++pl) {
        const T* src = px + pl * in_size;
        if (kind == PoolKind::kMax) {
          int64_t best = -1;
          for (int64_t o : offs) {
            if (o >= 0 && (best < 0 || Greater(src[o], src[best]))) best = o;
          }
          py[pl * out_size + op] = best >= 0 ? src[best] : FromDouble<T>(0);
          const int64_t b = best < 0 ? 0 : (storage_order ? ColumnMajor(best, in) : best);
          pi[pl * out_size + op] = pl * in_size + b;
        } else {
          double sum = 0;
          int64_t valid = 0;
          for (int64_t o : offs) {
            if (o < 0) continue;
            const double v = ToDouble(src[o]);
            sum += kind == PoolKind::kLp ? std::pow(std::fabs(v), p) : v;
            ++valid;
          }
          double r;
          if (kind == PoolKind::kLp) {
            r = std::pow(sum, 1.0 / p);
          } else {
            const int64_t cnt = include_pad ? padded_count : valid;
            r = cnt > 0 ? sum / static_cast<double>(cnt) : 0.0;
          }
          py[pl * out_size + op] = FromDouble<T>(r);
        }
      }
    }
  });
  TESSERA_RETURN_IF_ERROR(st);
  ctx.set_output(0, y);
  if (kind == PoolKind::kMax && ctx.num_outputs() > 1 && ctx.output_wanted(1)) ctx.set_output(1, idx);
  return Status::Ok();
}

Status GlobalPool(OpContext& ctx, PoolKind kind) {
  TESSERA_ASSIGN_OR_RETURN(Array x, PoolInput(ctx, false));
  TESSERA_ASSIGN_OR_RETURN(double p, ReadP(ctx));
  const int64_t planes = x.dim(0) * x.dim(1), in_size = Numel({x.shape().begin() + 2, x.shape().end()});
  std::vector<int64_t> out_shape(x.rank(), 1);
  out_shape[0] = x.dim(0);
  out_shape[1] = x.dim(1);
  Array y(ElemType::kDouble, out_shape);
  for (int64_t pl = 0; pl < planes; ++pl) {
    double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < in_size; ++i) {
      const double v = x.GetDouble(pl * in_size + i);
      if (kind == PoolKind::kMax) {
        acc = std::max(acc, v);
      } else {
        acc += kind == PoolKind::kLp ? std::pow(std::fabs(v), p) : v;
      }
    }
    if (kind == PoolKind::kAverage) acc = in_size > 0 ? acc / static_cast<double>(in_size) : 0.0;
    if (kind == PoolKind::kLp) acc = std::pow(acc, 1.0 / p);
    y.data<double>()[pl] = acc;
  }
  ctx.set_output(0, y.CastTo(x.type()));
  return Status::Ok();
}

Status MaxUnpoolKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, PoolInput(ctx, false));
  TESSERA_ASSIGN_OR_RETURN(Array ind, ctx.tensor(1));
  if (ind.type() != ElemType::kInt64 || ind.shape() != x.shape()) {
    return ctx.Error("I must be int64 of X's shape {}, got {} {}", x.ShapeString(), ElemName(ind.type()),
                     ind.ShapeString());
  }
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  TESSERA_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, in, {}, false));
  std::vector<int64_t> out_shape = {x.dim(0), x.dim(1)};
  for (size_t d = 0; d < in.size(); ++d) {
    out_shape.push_back((in[d] - 1) * w.strides[d] + w.kernel[d] - w.pads_begin[d] - w.pads_end[d]);
  }
  // Indices address the default-shaped output; an explicit output_shape keeps their coordinates.
  const std::vector<int64_t> dflt = out_shape;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> os, IntsInput(ctx, 2));
    if (os.size() != out_shape.size()) return ctx.Error("output_shape must have {} entries", out_shape.size());
    out_shape = os;
  }
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (dflt[d] < 0 || out_shape[d] < 0) return ctx.Error("negative output dimension");
  }
  Array y(x.type(), out_shape);
  const int64_t dflt_numel = Numel(dflt);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t t = ind.data<int64_t>()[i];
    if (t < 0 || t >= dflt_numel) return ctx.Error("index {} out of range for {} elements", t, dflt_numel);
    int64_t flat = 0, stride = 1;
    for (size_t d = dflt.size(); d-- > 0;) {
      const int64_t c = t % dflt[d];
      t /= dflt[d];
      if (c >= out_shape[d]) return ctx.Error("index {} does not fit output_shape", ind.data<int64_t>()[i]);
      flat += c * stride;
      stride *= out_shape[d];
    }
    y.SetDouble(flat, x.GetDouble(i));
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterPoolKernels(OpRegistry& r) {
  r.Register("MaxPool", [](OpContext& ctx) { return Pool(ctx, PoolKind::kMax); });
  r.Register("AveragePool", [](OpContext& ctx) { return Pool(ctx, PoolKind::kAverage); });
  r.Register("LpPool", [](OpContext& ctx) { return Pool(ctx, PoolKind::kLp); });
  r.Register("GlobalMaxPool", [](OpContext& ctx) { return GlobalPool(ctx, PoolKind::kMax); });
  r.Register("GlobalAveragePool", [](OpContext& ctx) { return GlobalPool(ctx, PoolKind::kAverage); });
  r.Register("GlobalLpPool", [](OpContext& ctx) { return GlobalPool(ctx, PoolKind::kLp); });
  r.Register("MaxUnpool", MaxUnpoolKernel);
}

}  // namespace tessera::onnx::nn
