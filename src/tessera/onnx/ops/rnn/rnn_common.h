// Shared machinery of the recurrent operators (RNN, GRU, LSTM): activation
// functions with their alpha / beta, reading and checking the common inputs
// and attributes (direction, layout, hidden_size, clip, sequence_lens,
// initial states), the time / direction / batch driver and the outputs.
// Everything computes in double and writes outputs in the input's type.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"

namespace tessera::onnx::rnn {

struct Activation {
  enum class Kind {
    kRelu,
    kTanh,
    kSigmoid,
    kAffine,
    kLeakyRelu,
    kThresholdedRelu,
    kScaledTanh,
    kHardSigmoid,
    kElu,
    kSoftsign,
    kSoftplus
  };
  Kind kind = Kind::kTanh;
  double alpha = 0, beta = 0;
  double operator()(double x) const;
};

// The operator's inputs and attributes, checked, in a direction-major form:
// x is [seq][batch][input] whatever the layout; w is [dirs][gates*hidden][input],
// r is [dirs][gates*hidden][hidden], b is [dirs][2*gates*hidden] (zeros when absent),
// h0 / c0 are [dirs][batch][hidden] (zeros when absent), p is [dirs][3*hidden].
struct RnnProblem {
  ElemType type = ElemType::kFloat;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1, layout = 0;
  bool reverse_only = false;  // direction = "reverse"
  std::vector<double> x, w, r, b, h0, c0, p;
  bool has_p = false;
  std::vector<int64_t> lens;     // per batch entry, each in [0, seq]
  double clip = 0;               // 0: no clipping
  std::vector<Activation> acts;  // per direction, `acts_per_dir` each
  size_t acts_per_dir = 0;

  bool reversed(int64_t dir) const { return dir == 1 || reverse_only; }
  double Clip(double v) const { return clip > 0 ? (v < -clip ? -clip : v > clip ? clip : v) : v; }
  const Activation& act(int64_t dir, size_t k) const { return acts[static_cast<size_t>(dir) * acts_per_dir + k]; }
};

// Reads inputs X, W, R, B, sequence_lens, initial_h (and initial_c, P when
// `lstm`) and the common attributes. `gates` is 1 (RNN), 3 (GRU) or 4 (LSTM);
// `default_acts` the per-direction default activation names.
StatusOr<RnnProblem> ReadProblem(const OpContext& ctx, int64_t gates, bool lstm,
                                 const std::vector<std::string>& default_acts);

// One time step of one batch entry in direction `dir`: reads x_t (input
// values) and updates h (and c for LSTM; hidden values each) in place.
using StepFn = std::function<void(int64_t dir, const double* x, double* h, double* c)>;

// Runs every direction and batch entry over its sequence and sets outputs
// Y, Y_h (and Y_c when `lstm`) in the problem's layout.
void RunAndSetOutputs(OpContext& ctx, const RnnProblem& pb, bool lstm, const StepFn& step);

// out[j] = sum_k m[(row0 + j) * cols + k] * v[k] for j < n (a block of rows of m times v), added to out.
void AddMatVec(const double* m, int64_t row0, int64_t n, int64_t cols, const double* v, double* out);

// The kernels (registered in register.cc).
Status RnnKernel(OpContext& ctx);
Status GruKernel(OpContext& ctx);
Status LstmKernel(OpContext& ctx);

}  // namespace tessera::onnx::rnn
