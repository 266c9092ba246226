// Dropout: identity (all-true mask) in inference; with training_mode true
// and ratio > 0 keeps each element with probability 1 - ratio and scales the
// kept ones by 1 / (1 - ratio). A node with a `seed` attribute draws from
// MT19937 seeded as numpy's legacy RandomState(seed) and turns pairs of
// draws into doubles as numpy's random_sample does, so a seeded Dropout
// reproduces the ONNX reference (np.random.seed(seed); uniform(0, 1) >= ratio).
#include <random>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/nn/kernels.h"

namespace tessera::onnx::nn {
namespace {

Status DropoutKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("data must be a float tensor, got {}", ElemName(x.type()));
  TESSERA_ASSIGN_OR_RETURN(double ratio, ctx.node().Float("ratio", 0.5f));
  bool training = false;
  if (ctx.opset() >= 12) {
    if (ctx.has_input(1)) {
      TESSERA_ASSIGN_OR_RETURN(ratio, ScalarInput(ctx, 1));
    }
    if (ctx.has_input(2)) {
      TESSERA_ASSIGN_OR_RETURN(double t, ScalarInput(ctx, 2));
      training = t != 0;
    }
  }
  if (!(ratio >= 0 && ratio < 1)) return ctx.Error("ratio must be in [0, 1), got {}", ratio);
  // Mask: bool from opset 10, the data's type before.
  const ElemType mask_type = ctx.opset() >= 10 ? ElemType::kBool : x.type();
  Array mask(ElemType::kBool, x.shape());
  Array y = x;
  if (!training || ratio == 0) {
    for (int64_t i = 0; i < x.numel(); ++i) mask.data<bool>()[i] = true;
  } else {
    y = Array(x.type(), x.shape());
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const bool seeded = ctx.node().Has("seed");
    TESSERA_ASSIGN_OR_RETURN(const int64_t seed, ctx.node().Int("seed", 0));
    std::mt19937 numpy_gen(static_cast<uint32_t>(seed));
    auto draw = [&]() -> double {
      if (!seeded) return u(ctx.rng());
      const uint32_t a = numpy_gen() >> 5, b = numpy_gen() >> 6;
      return (a * 67108864.0 + b) / 9007199254740992.0;
    };
    const double scale = 1.0 / (1.0 - ratio);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const bool keep = draw() >= ratio;
      mask.data<bool>()[i] = keep;
      y.SetDouble(i, keep ? x.GetDouble(i) * scale : 0.0);
    }
  }
  ctx.set_output(0, y);
  if (ctx.num_outputs() > 1 && ctx.output_wanted(1)) ctx.set_output(1, mask.CastTo(mask_type));
  return Status::Ok();
}

}  // namespace

void RegisterDropoutKernels(OpRegistry& r) { r.Register("Dropout", DropoutKernel); }

}  // namespace tessera::onnx::nn
