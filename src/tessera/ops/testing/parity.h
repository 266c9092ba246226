// The operator parity harness (in the spirit of ggml's test-backend-ops).
// Every operator registers ParityCases; CheckParity runs one case for one
// dtype and checks:
//   1. forward: optimized kernels vs reference kernels, per-dtype tolerance;
//   2. backward: optimized vs reference backward, per-dtype tolerance;
//   3. gradients: reference backward vs central finite differences of the
//      reference forward (fp32 only; bf16/fp16 are too coarse for FD), on a
//      deterministic sample of input elements, for the scalar
//      L = sum_i <out_i, gout_i> with random gout.
// Non-floating inputs (indices) are never perturbed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops::testing {

using Tensors = std::vector<Tensor>;

struct ParityCase {
  std::string op;    // operator name, e.g. "softmax" (coverage is checked by name)
  std::string name;  // case detail, e.g. "axis=-1 [4, 33]"
  // Builds the inputs for a floating dtype and seed (indices stay int64).
  std::function<Tensors(DType dtype, uint64_t seed)> make_inputs;
  // Forward with the current Impl: inputs -> outputs.
  std::function<Tensors(const Tensors& inputs)> forward;
  // Backward with the current Impl: (inputs, outputs, grad of each output)
  // -> grad of each input (undefined Tensor for non-differentiable inputs).
  // Leave empty for operators without a gradient (e.g. top-k indices only).
  std::function<Tensors(const Tensors& inputs, const Tensors& outputs, const Tensors& grad_outputs)> backward;
  // Which outputs carry gradient (default: all floating outputs).
  std::vector<bool> differentiable_outputs;
  std::vector<DType> dtypes = {DType::kF32, DType::kBF16};
  double fd_eps = 1e-2;        // finite-difference step (fp32)
  double fd_tolerance = 2e-2;  // relative-to-scale tolerance for FD checks
  int fd_samples = 12;         // input elements checked by FD per input
  bool random_op = false;      // forward uses RNG; FD still valid if seeded
};

struct Tolerance {
  double atol;
  double rtol;
};
Tolerance DefaultTolerance(DType dtype);

// Compares two tensors elementwise: |a - b| <= atol + rtol * |b|.
Status AllClose(const Tensor& actual, const Tensor& expected, Tolerance tol, const std::string& what);

Status CheckParity(const ParityCase& c, DType dtype, uint64_t seed = 1234);

// Process-wide registry of cases, filled by TESSERA_PARITY_CASES blocks.
std::vector<ParityCase>& Registry();
struct Registrar {
  explicit Registrar(std::function<std::vector<ParityCase>()> make);
};

// Random inputs helpers.
Tensor RandomTensor(const Shape& shape, DType dtype, uint64_t seed, float low = -1.0f, float high = 1.0f);
Tensor RandomIndices(const Shape& shape, int64_t high, uint64_t seed);  // int64 in [0, high)

}  // namespace tessera::ops::testing

#define TESSERA_PARITY_CONCAT_INNER(a, b) a##b
#define TESSERA_PARITY_CONCAT(a, b) TESSERA_PARITY_CONCAT_INNER(a, b)
// TESSERA_PARITY_CASES { return std::vector<ParityCase>{...}; }
#define TESSERA_PARITY_CASES                                                                      \
  static std::vector<::tessera::ops::testing::ParityCase> TESSERA_PARITY_CONCAT(MakeCases, __LINE__)(); \
  static ::tessera::ops::testing::Registrar TESSERA_PARITY_CONCAT(g_registrar, __LINE__)(           \
      &TESSERA_PARITY_CONCAT(MakeCases, __LINE__));                                               \
  static std::vector<::tessera::ops::testing::ParityCase> TESSERA_PARITY_CONCAT(MakeCases, __LINE__)()
