// NegativeLogLikelihoodLoss and the loss computation it shares with
// SoftmaxCrossEntropyLoss (nll.h). Computed in double.
#include "tessera/onnx/ops/loss/nll.h"

#include <algorithm>
#include <limits>

#include "tessera/onnx/ops/loss/kernels.h"

namespace tessera::onnx {
namespace {

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s.push_back(',');
    s.append(std::to_string(dims[i]));
  }
  return s + "]";
}

}  // namespace

StatusOr<NllOptions> ReadNllOptions(const OpContext& ctx) {
  NllOptions opts;
  TESSERA_ASSIGN_OR_RETURN(std::string reduction, ctx.node().String("reduction", "mean"));
  if (reduction == "none") {
    opts.reduction = NllOptions::Reduction::kNone;
  } else if (reduction == "sum") {
    opts.reduction = NllOptions::Reduction::kSum;
  } else if (reduction == "mean") {
    opts.reduction = NllOptions::Reduction::kMean;
  } else {
    return ctx.Error("reduction must be none, sum or mean, got '{}'", reduction);
  }
  opts.has_ignore_index = ctx.node().Has("ignore_index");
  TESSERA_ASSIGN_OR_RETURN(opts.ignore_index, ctx.node().Int("ignore_index", 0));
  return opts;
}

StatusOr<Array> NllLoss(const OpContext& ctx, const std::vector<double>& input, const std::vector<int64_t>& in_shape,
                        const Array& target, const Array* weight, const NllOptions& opts, ElemType out_type) {
  if (in_shape.size() < 2)
    return ctx.Error("input must have rank >= 2 (N, C, ...), has shape {}", DimsString(in_shape));
  if (target.type() != ElemType::kInt32 && target.type() != ElemType::kInt64) {
    return ctx.Error("target must be int32 or int64, got {}", ElemName(target.type()));
  }
  std::vector<int64_t> expected_target{in_shape[0]};
  expected_target.insert(expected_target.end(), in_shape.begin() + 2, in_shape.end());
  if (target.shape() != expected_target) {
    return ctx.Error("target shape {} does not match the input's (N, d1..dk) {}", target.ShapeString(),
                     DimsString(expected_target));
  }
  const int64_t n_batch = in_shape[0], classes = in_shape[1];
  const int64_t d_size = Numel(expected_target) / std::max<int64_t>(n_batch, 1);
  if (weight != nullptr) {
    if (!IsFloatType(weight->type()))
      return ctx.Error("weight must be floating-point, got {}", ElemName(weight->type()));
    if (weight->rank() != 1 || weight->dim(0) != classes) {
      return ctx.Error("weight must have shape [{}], has {}", classes, weight->ShapeString());
    }
  }

  const std::vector<int64_t> labels = target.ToInts();
  std::vector<double> loss(labels.size(), 0.0);
  double loss_sum = 0, weight_sum = 0;
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t d = 0; d < d_size; ++d) {
      const size_t k = static_cast<size_t>(n * d_size + d);
      const int64_t t = labels[k];
      if (opts.has_ignore_index && t == opts.ignore_index) continue;
      if (t < 0 || t >= classes) return ctx.Error("target {} is out of range [0, {})", t, classes);
      const double w = weight != nullptr ? weight->GetDouble(t) : 1.0;
      loss[k] = -input[static_cast<size_t>((n * classes + t) * d_size + d)] * w;
      loss_sum += loss[k];
      weight_sum += w;
    }
  }

  if (opts.reduction == NllOptions::Reduction::kNone) {
    Array out(out_type, target.shape());
    for (size_t k = 0; k < loss.size(); ++k) out.SetDouble(static_cast<int64_t>(k), loss[k]);
    return out;
  }
  Array out(out_type, {});
  if (opts.reduction == NllOptions::Reduction::kSum) {
    out.SetDouble(0, loss_sum);
  } else {
    // Every target ignored (or zero weights): 0 / 0, as numpy gives.
    out.SetDouble(0, weight_sum != 0 ? loss_sum / weight_sum : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

Status NegativeLogLikelihoodLossKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array input, ctx.tensor(0));
  if (!IsFloatType(input.type())) return ctx.Error("input must be floating-point, got {}", ElemName(input.type()));
  TESSERA_ASSIGN_OR_RETURN(Array target, ctx.tensor(1));
  Array weight;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(weight, ctx.tensor(2));
  }
  TESSERA_ASSIGN_OR_RETURN(NllOptions opts, ReadNllOptions(ctx));
  std::vector<double> values(static_cast<size_t>(input.numel()));
  for (int64_t i = 0; i < input.numel(); ++i) values[static_cast<size_t>(i)] = input.GetDouble(i);
  TESSERA_ASSIGN_OR_RETURN(
      Array out, NllLoss(ctx, values, input.shape(), target, ctx.has_input(2) ? &weight : nullptr, opts, input.type()));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
