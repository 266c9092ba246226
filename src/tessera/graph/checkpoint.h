// Activation recompute (like torch.utils.checkpoint): trade compute for
// activation memory.
//
// Checkpoint(fn, inputs) runs fn(inputs) WITHOUT recording, so none of fn's
// intermediate activations stay alive; when grad mode is on it records one
// entry on the current tape that keeps only the inputs (and the outputs'
// identities). When Backward reaches that entry it re-runs fn on a fresh
// tape with recording on, on detached copies of the inputs, and
// backpropagates the outputs' gradients through it: gradients flow into the
// inputs (returned to the outer walk) and into every leaf fn uses (its
// parameters' .grad() accumulate exactly as without checkpointing).
//
// fn must be deterministic — the recompute must reproduce the forward
// bit for bit (dropout in models is seeded by (seed, offset), so it is) —
// and must not mutate its inputs. Outputs that are not floating point (or
// that fn returns undefined) get no gradient. Nested checkpoints work.
// Thread-safety: as the tape (per thread); fn runs on the thread that calls
// Checkpoint and, later, on the thread that runs Backward.
#pragma once

#include <functional>
#include <vector>

#include "tessera/tensor/tensor.h"

namespace tessera::graph {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> Checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs);

}  // namespace tessera::graph
