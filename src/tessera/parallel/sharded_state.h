// The training state one rank holds (parameters, AdamW moments and step
// counts in a ZeroOptimizer's flat buffers) as slices of a checkpoint's
// global tensors, and back — the heart of resharding.
//
// Global tensors are named as the single-process Trainer names them
// (train/checkpointing.h), so either loads the other's checkpoints:
//   model/<param>                 the single-process model's tensor (fp32)
//   optim/<param>.exp_avg         same shape
//   optim/<param>.exp_avg_sq      same shape
//   optim/<param>.step            I64 scalar: AdamW's count for it
//   optim/optimizer.steps         I64 scalar: optimizer steps taken
// A rank's tensor of a parameter is a box of the global one (a tensor-
// parallel block: ZeroParam::global_offset); ZeRO splits a bucket's flat
// buffer into element ranges, which cut a box into at most 2·rank − 1
// smaller boxes (RangeToBoxes). Saving, each rank writes its canonical
// ZeRO shard of every parameter it is the designated holder of
// (ZeroParam::count_in_norm: one tensor-parallel replica, not the tied
// copy) — every element of the model once over the whole mesh, spread
// evenly. Loading, each rank reads exactly the boxes it holds, from
// whichever shards of whatever layout cover them.
// Functions, no state; the reader is thread-safe, the optimizer is not.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/checkpoint_writer.h"
#include "tessera/parallel/zero.h"

namespace tessera::parallel {

// A box of a row-major tensor whose elements are contiguous in memory,
// starting at flat index `first`.
struct ElementBox {
  std::vector<int64_t> offset;
  std::vector<int64_t> shape;
  int64_t first = 0;
};

// The elements [begin, end) of a row-major tensor of `shape` as boxes, in
// order (none when begin == end; a scalar is one empty box).
std::vector<ElementBox> RangeToBoxes(std::span<const int64_t> shape, int64_t begin, int64_t end);

// A host copy of this rank's part of the state; `slices` point into it.
struct StateSnapshot {
  std::vector<checkpoint::SliceToSave> slices;
  std::vector<float> values;  // parameters and moments, packed
  std::vector<int64_t> ints;  // step counts
  int64_t bytes() const { return static_cast<int64_t>(values.size() * 4 + ints.size() * 8); }
};

// Copies the state this rank saves (see above). `with_global` adds
// optim/optimizer.steps (exactly one rank of the job passes true).
StateSnapshot SnapshotShardedState(ZeroOptimizer& zero, bool with_global);

// Fills every element this rank holds (values, moments, step counts) from
// `reader`. Errors name the tensor and the checkpoint: NotFound for a
// missing tensor, InvalidArgument for another model (shape, dtype), DataLoss
// for damaged shards. On error the optimizer's state is partly overwritten:
// load again (another checkpoint) before training.
Status LoadShardedState(const checkpoint::CheckpointReader& reader, ZeroOptimizer& zero);

}  // namespace tessera::parallel
