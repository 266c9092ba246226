// Kernels of the misc family (Einsum, Det, signal ops, NonMaxSuppression,
// training optimizers, string ops), declared for register.cc and the unit
// tests, plus small helpers shared inside the family.
#pragma once

#include <complex>
#include <vector>

#include "tessera/onnx/op.h"

namespace tessera::onnx {

// Upper bound on sizes a kernel derives from input values or attributes
// (window / DFT lengths, output dims), so that bad values are errors, not
// overflows or huge allocations.
inline constexpr int64_t kMaxDerivedSize = int64_t{1} << 31;

// einsum.cc
Status EinsumKernel(OpContext& ctx);

// det.cc
Status DetKernel(OpContext& ctx);

// signal.cc
Status DftKernel(OpContext& ctx);
Status StftKernel(OpContext& ctx);

// windows.cc
Status BlackmanWindowKernel(OpContext& ctx);
Status HammingWindowKernel(OpContext& ctx);
Status HannWindowKernel(OpContext& ctx);
Status MelWeightMatrixKernel(OpContext& ctx);

// nms.cc
Status NonMaxSuppressionKernel(OpContext& ctx);

// training.cc (domain ai.onnx.preview.training)
Status AdagradKernel(OpContext& ctx);
Status AdamKernel(OpContext& ctx);
Status MomentumKernel(OpContext& ctx);

// string_normalizer.cc
Status StringNormalizerKernel(OpContext& ctx);

// tfidf.cc
Status TfIdfVectorizerKernel(OpContext& ctx);

// fft.cc: in-place discrete Fourier transform of x (any length; radix-2 FFT
// when the length is a power of two). `inverse` uses e^{+i...} and divides by n.
void Fft(std::vector<std::complex<double>>& x, bool inverse);

}  // namespace tessera::onnx
