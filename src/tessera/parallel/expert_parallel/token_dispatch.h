// Differentiable MoE token dispatch and combine: comm::moe::MoeBuffer's
// Layout / Dispatch / Combine recorded on the autograd tape.
//
//   DispatchTokens(buf, x [N, d], topk_idx [N·k] (-1: none), gates [N, k])
//     -> rows [R, d] grouped by local expert (handle->expert_offsets), and
//        weights [R] (fp32): each row's gate, differentiable w.r.t. gates.
//   CombineTokens(buf, dispatched, y [R, d], weights [R]) -> [N, d]:
//        out[t] = Σ over t's rows of weights[row] · y[row].
// Backward: dispatch's is a combine with weights 1 (the rows' gradients
// summed back to their tokens) plus ReturnScalars for the gates; combine's
// is a cached dispatch of the output gradient g, then locally
// grad_y = weights · g_rows and grad_weights = rowwise <g_rows, y>.
// Payloads: the activations' own precision (fp32 or bf16: exact) unless
// `payload` asks for fp8 (dispatch forward only; gradients travel in the
// activations' precision).
// Recorded whenever grad mode is on (even if nothing needs a gradient), so
// every rank of the group joins the backward exchanges: every rank must
// backpropagate through each output. Failures throw OpError with the
// communicator's status. Thread-safety: as MoeBuffer (one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/comm/moe/buffer.h"
#include "tessera/tensor/tensor.h"

namespace tessera::parallel {

// The payload that carries `dtype` exactly (fp32, bf16 or fp16).
comm::moe::Payload ExactPayload(DType dtype);

struct DispatchedTokens {
  Tensor rows;
  Tensor weights;
  std::shared_ptr<const comm::moe::DispatchHandle> handle;
};

DispatchedTokens DispatchTokens(comm::moe::MoeBuffer& buf, const Tensor& x, const std::vector<int64_t>& topk_idx,
                                const Tensor& gates, comm::moe::Payload payload);

Tensor CombineTokens(comm::moe::MoeBuffer& buf, const DispatchedTokens& dispatched, const Tensor& y,
                     const Tensor& weights);

}  // namespace tessera::parallel
