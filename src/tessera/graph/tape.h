// Tape-based reverse-mode automatic differentiation (eager, define-by-run).
//
// Differentiable functions (graph/functional.h, through graph::Apply in
// graph/apply.h) run their forward kernel and,
// when grad mode is on and some input requires grad, append one TapeEntry to
// the calling thread's tape: the input and output tensors and a closure that
// maps the outputs' gradients to the inputs' gradients. Outputs of recorded
// ops get requires_grad = true.
//
// Several tapes per thread: a Tape is an object holding recorded entries.
// Each thread has a default tape; TapeScope makes another Tape the thread's
// current one for its lifetime (scopes nest), so a pipeline stage can keep
// one tape per in-flight micro-batch and backpropagate exactly that one later
// (Tape::Backward). The free functions Record / Backward / ClearTape /
// TapeSize act on the current tape. A tensor produced on another tape is a
// leaf here: its gradient is accumulated into its .grad() (the way pipeline
// stages hand gradients of received activations upstream).
//
// Backward(loss) walks the tape in reverse. Gradients of intermediate tensors
// live in a map keyed by tensor identity and are dropped as soon as their
// producing entry has consumed them; each entry is released right after its
// closure ran, so activation memory shrinks as the walk proceeds. Gradients
// of leaves (tensors with requires_grad that no recorded op produced, i.e.
// parameters) are ACCUMULATED into their .grad(), in the leaf's own dtype
// (fp32 leaves get fp32 gradients). Calling forward + Backward for several
// micro-batches therefore sums their gradients (gradient accumulation); call
// ZeroGrad on the parameters to start afresh. Backward clears the tape.
//
// The tape holds strong references to every tensor it records until Backward
// or ClearTape. A forward whose result is not differentiated (evaluation)
// should run under NoGradGuard, or be abandoned with ClearTape().
//
// Views made with Tensor's own view methods (Tensor::Transpose, ...) are not
// recorded and do not carry requires_grad: use the graph:: versions.
//
// Thread-safety: the current tape and the grad mode are thread-local; every
// thread differentiates its own computations independently. A Tape object is
// not thread-safe; it may be recorded on one thread and backpropagated on
// another, not concurrently. A leaf shared between threads must not be the
// target of concurrent Backward calls.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::graph {

// Maps the gradients of an entry's outputs (all defined: missing ones are
// zero-filled by Backward) to the gradients of its inputs (one per input, in
// order; undefined = no gradient). `needs_grad[i]` says whether input i
// requires a gradient; closures may skip computing the others.
using BackwardFn =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs, const std::vector<bool>& needs_grad)>;

// Whether recording is on for this thread (default: on).
bool GradEnabled();

// Disables recording on this thread for its lifetime (evaluation, optimizer
// updates, the backward pass itself). Nests; restores the previous mode.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool saved_;
};

// Sets the grad mode for its lifetime (like torch.set_grad_enabled).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool saved_;
};

// True when grad mode is on and any defined input requires grad: the test
// every differentiable function makes before recording.
bool ShouldRecord(const std::vector<Tensor>& inputs);

// One recorded op (Tape's storage; not used directly elsewhere).
struct TapeEntry {
  const char* op = nullptr;
  std::vector<Tensor> inputs;
  std::vector<bool> input_is_leaf;
  std::vector<Tensor> outputs;
  BackwardFn backward;
};

// A list of recorded entries (see the header comment). Movable, not copyable.
class Tape {
 public:
  Tape();
  ~Tape();
  Tape(Tape&&) noexcept;
  Tape& operator=(Tape&&) noexcept;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  // Appends an entry (see the free Record below).
  void Record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, BackwardFn backward);
  // Backpropagates from `roots` seeded with `grads` (one per root; an
  // undefined grad means ones), accumulating into leaves' .grad(); clears the
  // tape, also when a closure throws. Roots must require grad; a root this
  // tape did not produce is itself a leaf and gets its seed accumulated.
  void Backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads);
  void Backward(const Tensor& loss, const Tensor& grad = {}) { Backward(std::vector<Tensor>{loss}, {grad}); }
  // Whether `t` is an output of an entry recorded on this tape.
  bool Produced(const Tensor& t) const;
  void Clear();
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<TapeEntry> entries_;
  // Impls produced by recorded ops. The entries hold strong references to
  // them, so an address in this set cannot be reused while it is there.
  std::unordered_set<const TensorImpl*> produced_;
};

// Makes `tape` this thread's current tape for the scope's lifetime, then
// restores the previous one. Nests. `tape` must outlive the scope.
class TapeScope {
 public:
  explicit TapeScope(Tape& tape);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* saved_;
};

// This thread's current tape (its default tape outside any TapeScope).
Tape& CurrentTape();

// Appends an entry to this thread's current tape and marks `outputs` as requiring
// grad. `op` must be a string literal (kept by pointer, used in messages).
// Callers check ShouldRecord first; inputs that do not require grad are kept
// but get no gradient.
void Record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, BackwardFn backward);

// Backpropagates from `loss` (any shape; `grad` defaults to ones, i.e. d loss
// / d loss = 1 for a scalar) through this thread's current tape, accumulating into
// leaves' .grad(), then clears the tape. CHECKs that `loss` requires grad and
// that `grad` (if given) has loss's shape.
void Backward(const Tensor& loss, const Tensor& grad = {});

// Drops every recorded entry of the current tape (abandons a forward).
void ClearTape();

// Number of entries on the current tape (tests, diagnostics).
size_t TapeSize();

}  // namespace tessera::graph
