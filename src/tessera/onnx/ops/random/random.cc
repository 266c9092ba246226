// Random generators: RandomUniform / RandomNormal (and their *Like forms),
// Bernoulli and Multinomial. A node with a `seed` attribute draws from its own
// generator seeded by it (reproducible); others from the interpreter's.
#include <algorithm>
#include <bit>
#include <cmath>
#include <random>

#include "tessera/onnx/ops/random/random_kernels.h"

namespace tessera::onnx {
namespace {

// The generator a node draws from.
class NodeRng {
 public:
  static StatusOr<NodeRng> Make(const OpContext& ctx) {
    NodeRng r;
    if (ctx.node().Has("seed")) {
      TESSERA_ASSIGN_OR_RETURN(float seed, ctx.node().Float("seed", 0.0f));
      r.local_.seed(std::bit_cast<uint32_t>(seed));
      r.use_local_ = true;
    }
    return r;
  }
  std::mt19937_64& get(const OpContext& ctx) { return use_local_ ? local_ : ctx.rng(); }

 private:
  std::mt19937_64 local_;
  bool use_local_ = false;
};

// The `dtype` attribute as a float element type; `dflt` when absent.
StatusOr<ElemType> FloatDtype(const OpContext& ctx, ElemType dflt) {
  if (!ctx.node().Has("dtype")) {
    if (!IsFloatType(dflt)) return ctx.Error("output type {} is not a float type; set dtype", ElemName(dflt));
    return dflt;
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t dt, ctx.node().Int("dtype", 1));
  auto t = ElemTypeFromProto(static_cast<int32_t>(dt));
  if (!t.ok() || !IsFloatType(*t)) return ctx.Error("dtype {} is not a float type", dt);
  return *t;
}

StatusOr<std::vector<int64_t>> ShapeAttr(const OpContext& ctx) {
  if (!ctx.node().Has("shape")) return ctx.Error("attribute 'shape' is required");
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.node().Ints("shape", {}));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("shape has a negative dim {}", d);
  }
  return shape;
}

Status FillUniform(OpContext& ctx, ElemType type, std::vector<int64_t> shape) {
  TESSERA_ASSIGN_OR_RETURN(float low, ctx.node().Float("low", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(float high, ctx.node().Float("high", 1.0f));
  if (!(std::isfinite(low) && std::isfinite(high) && low <= high)) {
    return ctx.Error("need finite low <= high, got {} and {}", low, high);
  }
  TESSERA_ASSIGN_OR_RETURN(NodeRng rng, NodeRng::Make(ctx));
  std::uniform_real_distribution<double> dist(low, high);
  Array out(type, std::move(shape));
  for (int64_t i = 0; i < out.numel(); ++i) out.SetDouble(i, dist(rng.get(ctx)));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

Status FillNormal(OpContext& ctx, ElemType type, std::vector<int64_t> shape) {
  TESSERA_ASSIGN_OR_RETURN(float mean, ctx.node().Float("mean", 0.0f));
  TESSERA_ASSIGN_OR_RETURN(float scale, ctx.node().Float("scale", 1.0f));
  if (!(std::isfinite(mean) && std::isfinite(scale) && scale >= 0)) {
    return ctx.Error("need a finite mean and scale >= 0, got {} and {}", mean, scale);
  }
  TESSERA_ASSIGN_OR_RETURN(NodeRng rng, NodeRng::Make(ctx));
  std::normal_distribution<double> dist(mean, scale > 0 ? scale : 1.0);
  Array out(type, std::move(shape));
  for (int64_t i = 0; i < out.numel(); ++i) out.SetDouble(i, scale > 0 ? dist(rng.get(ctx)) : mean);
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

Status RandomUniformKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(ElemType type, FloatDtype(ctx, ElemType::kFloat));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ShapeAttr(ctx));
  return FillUniform(ctx, type, std::move(shape));
}

Status RandomNormalKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(ElemType type, FloatDtype(ctx, ElemType::kFloat));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ShapeAttr(ctx));
  return FillNormal(ctx, type, std::move(shape));
}

Status RandomUniformLikeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(ElemType type, FloatDtype(ctx, x.type()));
  return FillUniform(ctx, type, x.shape());
}

Status RandomNormalLikeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(ElemType type, FloatDtype(ctx, x.type()));
  return FillNormal(ctx, type, x.shape());
}

Status BernoulliKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array p, ctx.tensor(0));
  if (!IsFloatType(p.type())) return ctx.Error("input must be a float tensor, got {}", ElemName(p.type()));
  ElemType type = p.type();
  if (ctx.node().Has("dtype")) {
    TESSERA_ASSIGN_OR_RETURN(int64_t dt, ctx.node().Int("dtype", 1));
    auto t = ElemTypeFromProto(static_cast<int32_t>(dt));
    if (!t.ok() || *t == ElemType::kString || *t == ElemType::kUndefined) return ctx.Error("bad dtype {}", dt);
    type = *t;
  }
  TESSERA_ASSIGN_OR_RETURN(NodeRng rng, NodeRng::Make(ctx));
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  Array out(type, p.shape());
  for (int64_t i = 0; i < out.numel(); ++i) out.SetDouble(i, dist(rng.get(ctx)) < p.GetDouble(i) ? 1.0 : 0.0);
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

// Input [batch, classes] of unnormalized log-probabilities; output
// [batch, sample_size] class indices (int32 or int64).
Status MultinomialKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type()) || x.rank() != 2) {
    return ctx.Error("input must be a 2-D float tensor, got {}{}", ElemName(x.type()), x.ShapeString());
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t dt, ctx.node().Int("dtype", 6));
  if (dt != 6 && dt != 7) return ctx.Error("dtype must be int32 (6) or int64 (7), got {}", dt);
  TESSERA_ASSIGN_OR_RETURN(int64_t samples, ctx.node().Int("sample_size", 1));
  if (samples < 0 || samples > (int64_t{1} << 31))
    return ctx.Error("sample_size must be in [0, 2^31], got {}", samples);
  const int64_t batch = x.dim(0), classes = x.dim(1);
  if (classes < 1 && batch * samples > 0) return ctx.Error("input has no classes");
  TESSERA_ASSIGN_OR_RETURN(NodeRng rng, NodeRng::Make(ctx));
  Array out(dt == 6 ? ElemType::kInt32 : ElemType::kInt64, {batch, samples});
  std::vector<double> cdf(static_cast<size_t>(classes));
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  for (int64_t b = 0; b < batch && samples > 0; ++b) {
    double mx = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x.GetDouble(b * classes + c));
    if (!std::isfinite(mx)) return ctx.Error("row {} has no finite log-probability maximum", b);
    double total = 0;
    for (int64_t c = 0; c < classes; ++c) {
      const double v = x.GetDouble(b * classes + c);
      total += std::isnan(v) ? 0.0 : std::exp(v - mx);
      cdf[static_cast<size_t>(c)] = total;
    }
    for (int64_t s = 0; s < samples; ++s) {
      const double u = dist(rng.get(ctx)) * total;
      const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
      const int64_t cls = std::min<int64_t>(it - cdf.begin(), classes - 1);
      if (dt == 6) {
        out.data<int32_t>()[b * samples + s] = static_cast<int32_t>(cls);
      } else {
        out.data<int64_t>()[b * samples + s] = cls;
      }
    }
  }
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
