// DFT and STFT (opset 17): real ([..., 1]) or complex ([..., 2]) signals,
// transformed in double through Fft (fft.cc).
#include <complex>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {
namespace {

// An optional scalar integer input; `dflt` when absent.
StatusOr<int64_t> OptionalIntScalar(const OpContext& ctx, size_t i, int64_t dflt) {
  if (!ctx.has_input(i)) return dflt;
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
  if (!IsIntegerType(a.type()) || a.numel() != 1) {
    return ctx.Error("input {} must be one integer, got {}{}", i, ElemName(a.type()), a.ShapeString());
  }
  return a.GetInt(0);
}

}  // namespace

Status DftKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("input must be a float tensor, got {}", ElemName(x.type()));
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank < 2 || (x.dim(rank - 1) != 1 && x.dim(rank - 1) != 2)) {
    return ctx.Error("input must be [batch, ..., 1 or 2], got {}", x.ShapeString());
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, ctx.node().Int("axis", 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t inverse, ctx.node().Int("inverse", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t onesided, ctx.node().Int("onesided", 0));
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank - 2) return ctx.Error("axis {} is out of range for input {}", axis, x.ShapeString());
  const int64_t len = x.dim(axis);
  TESSERA_ASSIGN_OR_RETURN(int64_t n, OptionalIntScalar(ctx, 1, len));
  if (n < 1 || n > kMaxDerivedSize) return ctx.Error("dft_length must be in [1, 2^31], got {}", n);
  const bool complex_in = x.dim(rank - 1) == 2;
  const int64_t n_out = onesided != 0 ? n / 2 + 1 : n;
  std::vector<int64_t> out_shape = x.shape();
  out_shape[axis] = n_out;
  out_shape[rank - 1] = 2;
  Array out(x.type(), out_shape);
  // Lines along `axis`: outer dims before it, inner dims after it (without the complex dim).
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= x.dim(d);
  const int64_t c_in = x.dim(rank - 1);
  std::vector<std::complex<double>> line(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t k = 0; k < n; ++k) {
        if (k < len) {
          const int64_t base = ((o * len + k) * inner + i) * c_in;
          line[k] = {x.GetDouble(base), complex_in ? x.GetDouble(base + 1) : 0.0};
        } else {
          line[k] = 0;
        }
      }
      Fft(line, inverse != 0);
      for (int64_t k = 0; k < n_out; ++k) {
        const int64_t base = ((o * n_out + k) * inner + i) * 2;
        out.SetDouble(base, line[k].real());
        out.SetDouble(base + 1, line[k].imag());
      }
    }
  }
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

Status StftKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array sig, ctx.tensor(0));
  if (!IsFloatType(sig.type())) return ctx.Error("signal must be a float tensor, got {}", ElemName(sig.type()));
  if (sig.rank() != 3 || (sig.dim(2) != 1 && sig.dim(2) != 2)) {
    return ctx.Error("signal must be [batch, length, 1 or 2], got {}", sig.ShapeString());
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t step, OptionalIntScalar(ctx, 1, 0));
  if (!ctx.has_input(1) || step < 1) return ctx.Error("frame_step must be a positive integer, got {}", step);
  Array window;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(window, ctx.tensor(2));
    if (window.rank() != 1 || window.type() == ElemType::kString) {
      return ctx.Error("window must be a 1-D numeric tensor, got {}", window.ShapeString());
    }
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t n, OptionalIntScalar(ctx, 3, window.defined() ? window.numel() : -1));
  if (n < 1) return ctx.Error("frame_length (or the window's size) must be given and positive");
  if (window.defined() && window.numel() != n) {
    return ctx.Error("window has {} values but frame_length is {}", window.numel(), n);
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t onesided, ctx.node().Int("onesided", 1));
  const int64_t batch = sig.dim(0), len = sig.dim(1), c_in = sig.dim(2);
  if (n > len) return ctx.Error("frame length {} exceeds the signal length {}", n, len);
  const bool complex_in = c_in == 2;
  const int64_t frames = (len - n) / step + 1;
  const int64_t bins = onesided != 0 && !complex_in ? n / 2 + 1 : n;
  Array out(sig.type(), {batch, frames, bins, 2});
  std::vector<std::complex<double>> line(static_cast<size_t>(n));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t k = 0; k < n; ++k) {
        const int64_t base = (b * len + f * step + k) * c_in;
        const double w = window.defined() ? window.GetDouble(k) : 1.0;
        line[k] = {sig.GetDouble(base) * w, complex_in ? sig.GetDouble(base + 1) * w : 0.0};
      }
      Fft(line, false);
      for (int64_t k = 0; k < bins; ++k) {
        const int64_t base = ((b * frames + f) * bins + k) * 2;
        out.SetDouble(base, line[k].real());
        out.SetDouble(base + 1, line[k].imag());
      }
    }
  }
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
