// Signal generators (opset 17): the Blackman, Hamming and Hann windows
// (periodic or symmetric) and MelWeightMatrix (triangular mel filterbanks).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {
namespace {

// The output element type from the `output_datatype` attribute (numeric only).
StatusOr<ElemType> OutputType(const OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(int64_t dt, ctx.node().Int("output_datatype", 1));
  auto t = ElemTypeFromProto(static_cast<int32_t>(dt));
  if (!t.ok() || *t == ElemType::kString || *t == ElemType::kUndefined || *t == ElemType::kBool) {
    return ctx.Error("unsupported output_datatype {}", dt);
  }
  return *t;
}

StatusOr<int64_t> IntScalar(const OpContext& ctx, size_t i, const char* name) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
  if (!IsIntegerType(a.type()) || a.numel() != 1) {
    return ctx.Error("{} must be one integer, got {}{}", name, ElemName(a.type()), a.ShapeString());
  }
  return a.GetInt(0);
}

// y[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1.
Status CosineWindow(OpContext& ctx, double a0, double a1, double a2) {
  TESSERA_ASSIGN_OR_RETURN(int64_t size, IntScalar(ctx, 0, "size"));
  if (size < 0 || size > kMaxDerivedSize) return ctx.Error("size must be in [0, 2^31], got {}", size);
  TESSERA_ASSIGN_OR_RETURN(int64_t periodic, ctx.node().Int("periodic", 1));
  TESSERA_ASSIGN_OR_RETURN(ElemType type, OutputType(ctx));
  const int64_t denom = std::max<int64_t>(periodic != 0 ? size : size - 1, 1);
  Array out(type, {size});
  for (int64_t n = 0; n < size; ++n) {
    const double t = 2 * std::numbers::pi * static_cast<double>(n) / static_cast<double>(denom);
    out.SetDouble(n, a0 - a1 * std::cos(t) + a2 * std::cos(2 * t));
  }
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

Status BlackmanWindowKernel(OpContext& ctx) { return CosineWindow(ctx, 0.42, 0.5, 0.08); }
Status HammingWindowKernel(OpContext& ctx) { return CosineWindow(ctx, 25.0 / 46.0, 21.0 / 46.0, 0); }
Status HannWindowKernel(OpContext& ctx) { return CosineWindow(ctx, 0.5, 0.5, 0); }

// As ONNX 1.12's reference: num_mel_bins + 2 points evenly spaced on the mel
// scale (step = range / (num_mel_bins + 2)), mapped to spectrogram bins
// floor((dft_length + 1) * f / sample_rate); output [dft_length / 2 + 1, num_mel_bins].
Status MelWeightMatrixKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(int64_t num_mel_bins, IntScalar(ctx, 0, "num_mel_bins"));
  TESSERA_ASSIGN_OR_RETURN(int64_t dft_length, IntScalar(ctx, 1, "dft_length"));
  TESSERA_ASSIGN_OR_RETURN(int64_t sample_rate, IntScalar(ctx, 2, "sample_rate"));
  TESSERA_ASSIGN_OR_RETURN(double lower, ScalarInput(ctx, 3));
  TESSERA_ASSIGN_OR_RETURN(double upper, ScalarInput(ctx, 4));
  TESSERA_ASSIGN_OR_RETURN(ElemType type, OutputType(ctx));
  if (num_mel_bins < 1 || dft_length < 1 || sample_rate < 1 || num_mel_bins > (int64_t{1} << 20) ||
      dft_length > (int64_t{1} << 20)) {
    return ctx.Error("num_mel_bins, dft_length and sample_rate must be positive (and <= 2^20), got {}, {}, {}",
                     num_mel_bins, dft_length, sample_rate);
  }
  if (!(lower >= 0 && lower <= upper && std::isfinite(upper))) {
    return ctx.Error("need 0 <= lower_edge_hertz <= upper_edge_hertz, got {} and {}", lower, upper);
  }
  const int64_t n_spec = dft_length / 2 + 1;
  const auto mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  const double low_mel = mel(lower), high_mel = mel(upper);
  const double step = (high_mel - low_mel) / static_cast<double>(num_mel_bins + 2);
  std::vector<int64_t> bin(static_cast<size_t>(num_mel_bins + 2));
  for (size_t i = 0; i < bin.size(); ++i) {
    const double m = static_cast<double>(i) * step + low_mel;
    const double hz = 700.0 * (std::pow(10.0, m / 2595.0) - 1.0);
    const double b = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    bin[i] = static_cast<int64_t>(std::min(std::max(b, 0.0), static_cast<double>(n_spec + 1)));
  }
  Array out(type, {n_spec, num_mel_bins});
  const auto set = [&](int64_t row, int64_t col, double v) {
    if (row >= 0 && row < n_spec) out.SetDouble(row * num_mel_bins + col, v);
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t lo = bin[i], center = bin[i + 1], hi = bin[i + 2];
    if (center == lo) {
      set(center, i, 1);
    } else {
      for (int64_t j = lo; j <= center; ++j) set(j, i, static_cast<double>(j - lo) / static_cast<double>(center - lo));
    }
    for (int64_t j = center; j < hi; ++j) set(j, i, static_cast<double>(hi - j) / static_cast<double>(hi - center));
  }
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
