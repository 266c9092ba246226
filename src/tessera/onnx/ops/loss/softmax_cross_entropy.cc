// SoftmaxCrossEntropyLoss: log-softmax of the scores along the class axis
// (axis 1), then the negative log-likelihood loss of nll.h; the optional
// second output is the log-probabilities. Computed in double.
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/onnx/ops/loss/kernels.h"
#include "tessera/onnx/ops/loss/nll.h"

namespace tessera::onnx {

Status SoftmaxCrossEntropyLossKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array scores, ctx.tensor(0));
  if (!IsFloatType(scores.type())) return ctx.Error("scores must be floating-point, got {}", ElemName(scores.type()));
  if (scores.rank() < 2) return ctx.Error("scores must have rank >= 2 (N, C, ...), has shape {}", scores.ShapeString());
  TESSERA_ASSIGN_OR_RETURN(Array labels, ctx.tensor(1));
  Array weight;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(weight, ctx.tensor(2));
  }
  TESSERA_ASSIGN_OR_RETURN(NllOptions opts, ReadNllOptions(ctx));

  // log_softmax over the class axis of [N, C, D].
  const int64_t n_batch = scores.dim(0), classes = scores.dim(1);
  const int64_t d_size = n_batch * classes > 0 ? scores.numel() / (n_batch * classes) : 0;
  std::vector<double> log_prob(static_cast<size_t>(scores.numel()));
  for (int64_t i = 0; i < scores.numel(); ++i) log_prob[static_cast<size_t>(i)] = scores.GetDouble(i);
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t d = 0; d < d_size; ++d) {
      double* base = log_prob.data() + n * classes * d_size + d;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, base[c * d_size]);
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(base[c * d_size] - mx);
      const double shift = mx + std::log(sum);
      for (int64_t c = 0; c < classes; ++c) base[c * d_size] -= shift;
    }
  }

  TESSERA_ASSIGN_OR_RETURN(Array out, NllLoss(ctx, log_prob, scores.shape(), labels,
                                              ctx.has_input(2) ? &weight : nullptr, opts, scores.type()));
  ctx.set_output(0, std::move(out));
  if (ctx.num_outputs() > 1 && ctx.output_wanted(1)) {
    Array lp(scores.type(), scores.shape());
    for (size_t i = 0; i < log_prob.size(); ++i) lp.SetDouble(static_cast<int64_t>(i), log_prob[i]);
    ctx.set_output(1, std::move(lp));
  }
  return Status::Ok();
}

}  // namespace tessera::onnx
