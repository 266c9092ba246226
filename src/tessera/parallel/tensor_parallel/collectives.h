// Collectives on tensors for tensor (and sequence) parallelism, plain and
// differentiable (Megatron-LM's f/g operators).
//
// Plain (not recorded on the tape): TensorAllReduce, TensorAllGather,
// TensorReduceScatter, TensorShard work on whole tensors along any axis
// (a non-leading axis is handled by permuting blocks, so rank r's block along
// `axis` is always [r·s/tp, (r+1)·s/tp)).
//
// Differentiable (through graph::Apply, graph/apply.h: recorded on the tape
// and captured by graph mode as communication nodes that the passes never
// remove, merge or reorder), over a tensor-parallel group `tp`:
//   CopyToTensorParallel     f: fwd identity,              bwd all-reduce sum
//   ReduceFromTensorParallel g: fwd all-reduce sum,        bwd identity
//   GatherFromTensorParallel    fwd all-gather along axis, bwd take own slice
//   ScatterToTensorParallel     fwd take own slice,        bwd all-gather
//   AllGatherSequence        (sequence parallel) fwd all-gather, bwd reduce-scatter
//   ReduceScatterSequence    (sequence parallel) fwd reduce-scatter, bwd all-gather
// A null or size-1 `tp` makes every function the identity (no copy, nothing
// recorded). Floating dtypes only (fp32, bf16, fp16; sums in the
// communicator's arithmetic for that dtype). The axis being split must be
// divisible by tp, else OpError. A failed communication throws OpError
// carrying the communicator's Status text (also from inside Backward).
// Every rank of `tp` must call the same functions in the same order, and
// backpropagate through them (the backward collectives run in Backward).
// Thread-safety: as Communicator and the tape (per thread; one thread per rank).
#pragma once

#include <string_view>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/tensor/tensor.h"

namespace tessera::parallel {

// Communicator element type of a tensor dtype (all tensor dtypes have one).
comm::DataType CommDataType(DType dtype);
// Throws OpError "<op>: <status>" when `status` is not OK.
void ThrowIfFailed(const Status& status, std::string_view op);
// True when `group` is null or has one rank (the collectives are identities).
inline bool IsTrivialGroup(const comm::Communicator* group) { return group == nullptr || group->size() == 1; }
inline int GroupRank(const comm::Communicator* group) { return group == nullptr ? 0 : group->rank(); }
inline int GroupSize(const comm::Communicator* group) { return group == nullptr ? 1 : group->size(); }

// ---- Plain collectives (fresh contiguous results; not recorded) ----
Tensor TensorAllReduce(const Tensor& x, comm::Communicator* group);
Tensor TensorAllGather(const Tensor& x, int axis, comm::Communicator* group);
Tensor TensorReduceScatter(const Tensor& x, int axis, comm::Communicator* group);
// Block `rank` of `size` along `axis` (a fresh contiguous copy).
Tensor TensorShard(const Tensor& x, int axis, int rank, int size);

// ---- Differentiable collectives ----
Tensor CopyToTensorParallel(const Tensor& x, comm::Communicator* tp);
Tensor ReduceFromTensorParallel(const Tensor& x, comm::Communicator* tp);
Tensor GatherFromTensorParallel(const Tensor& x, int axis, comm::Communicator* tp);
Tensor ScatterToTensorParallel(const Tensor& x, int axis, comm::Communicator* tp);
Tensor AllGatherSequence(const Tensor& x, int axis, comm::Communicator* tp);
Tensor ReduceScatterSequence(const Tensor& x, int axis, comm::Communicator* tp);

// Sums the gradients of `params` over `group` in place (parameters that are
// replicated across tp but see only part of the sequence under sequence
// parallelism, e.g. RowParallelLinear's bias; see PartialGradParameters()).
// Every rank must pass the same list; an undefined gradient counts as zero.
// One all-reduce per gradient dtype (the gradients are packed together).
void AllReduceGradients(const std::vector<Tensor>& params, comm::Communicator* group);

}  // namespace tessera::parallel
