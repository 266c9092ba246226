// Apply: the one way a differentiable function runs an operator, so that the
// same description serves eager autograd and graph capture.
//
// An operator is given as an OpSpec (name, fusion kind, printable attributes,
// which inputs/outputs its backward reads) and two functions that read
// tensors only from their arguments (they may capture attributes: scalars,
// shapes, dtypes, never tensors):
//   forward(inputs)                          -> outputs (the visible ones
//                                               first, then saved extras such
//                                               as a norm's rstd)
//   grad(grad_outputs, inputs, outputs, needs) -> one gradient per input
// Apply runs forward now. When grad mode is on and an input requires grad it
// records one tape entry (graph/tape.h) whose closure keeps only the saved
// inputs/outputs; when a graph capture is active on this thread
// (graph/trace.h) it also appends the node to the trace, where the same two
// functions later re-run on other tensors.
// Because both functions are pure in their tensor arguments, a captured
// graph replays them on new inputs with identical results.
// Thread-safety: as the tape (per thread).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::graph {

// Fusion kinds, as in TVM's operator patterns.
enum class OpKind {
  kElementwise,    // out[i] = f(in[i]) over same-shaped (or scalar) operands
  kInjective,      // each output element reads one input element (reshape, transpose, slice, gather, cast)
  kReduction,      // reduces axes (sum, softmax, norms, losses)
  kOutFusable,     // GEMM/convolution-like: an element-wise epilogue can fuse into its output
  kOpaque,         // anything else (attention, embedding, scatter)
  kCommunication,  // talks to other ranks: never removed, merged or reordered
};
const char* OpKindName(OpKind kind);

using ForwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
using GradFn =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs, const std::vector<Tensor>& inputs,
                                      const std::vector<Tensor>& outputs, const std::vector<bool>& needs)>;

constexpr uint32_t kSaveNone = 0;
constexpr uint32_t kSaveAll = ~0u;
constexpr uint32_t SaveBit(int i) { return 1u << i; }

struct OpSpec {
  const char* name = "op";  // a string literal
  OpKind kind = OpKind::kOpaque;
  std::string attrs;                   // printable; equal attrs + equal inputs = same result (CSE)
  uint32_t saved_inputs = kSaveAll;    // bit i: the backward reads input i (others arrive undefined)
  uint32_t saved_outputs = kSaveNone;  // bit o: the backward reads output o (incl. extras)
  int visible_outputs = -1;            // outputs returned and differentiated; the rest are saved extras (-1 = all)
  bool side_effects = false;           // never removed or merged (collectives, in-place updates)
  // The grad function computes each input's gradient alone (from `needs`)
  // at no extra cost; graph mode then gives each its own backward node.
  bool separable_grad = false;
};

// Runs `forward(inputs)`, records it for autograd and capture (see above),
// and returns all outputs (visible ones first). `grad` may be null for
// functions that are never differentiated (integer outputs).
std::vector<Tensor> Apply(const OpSpec& spec, const std::vector<Tensor>& inputs, const ForwardFn& forward,
                          const GradFn& grad);

// Apply for a single visible output.
Tensor Apply1(const OpSpec& spec, const std::vector<Tensor>& inputs, const ForwardFn& forward, const GradFn& grad);

// A new tensor (its own autograd identity, not recorded) viewing x's data
// without a copy: for forward functions that pass an input through under a
// fresh identity (Detach, the tensor-parallel identity regions).
Tensor AliasOf(const Tensor& x);

// True while Apply is recording its own tape entry on this thread (the
// tracer uses it to tell Apply's entries from direct Record calls).
bool InsideApply();

}  // namespace tessera::graph
