// MoeBuffer: DeepEP-style MoE token dispatch and combine over an
// expert-parallel Communicator (normal mode; low_latency.h has the
// decoding-sized mode).
//
//   auto h = buf.Layout(topk_idx, top_k, topk_weights);   // the layout round trip
//   recv_x.resize(h->num_recv_rows() * hidden);
//   buf.Dispatch(*h, x, DataType::kBFloat16, Payload::kFp8E4m3, recv_x.data());
//   ... expert j computes rows [h->expert_offsets[j], h->expert_offsets[j+1]) ...
//   buf.CombineGated(*h, y, DataType::kBFloat16, /*gates=*/true, Payload::kBFloat16, out);
//
// Layout: GetDispatchLayout, then an all-to-all of per-rank token counts and
// an all-to-all-v of each sent token's per-choice local expert and weight:
// afterwards both sides know every row's place (layout.h, DispatchHandle).
// Dispatch: each token's hidden vector crosses to a rank once, however many
//   of its experts live there (encoded in `payload`), and is decoded into
//   one row per choice, grouped by local expert. A handle can be reused
//   (DeepEP's cached dispatch: the backward of combine).
// Combine: out[t] = Σ over t's rows of weight[row]·y[row] (weights null: 1).
//   The expert side sums a token's local rows first (fp32), so one vector
//   per (token, rank) travels back; the source adds the ranks' partial sums
//   in rank order (= expert order: experts are sharded contiguously) into
//   fp32 and writes `dtype`. Tokens routed nowhere get zeros. Payload fp32
//   (input fp32 only) or bf16 (fp8 accepted; lossy).
// ReturnScalars: the adjoint of the weights' dispatch: per_row[row] goes
//   back to the (token, choice) it came from (0 where no row).
// Dispatch's adjoint is Combine with weights 1; Combine's adjoint is a
// cached Dispatch of the output gradient (parallel/expert_parallel wraps
// both for the autograd).
// Same host with mappable shared memory (Communicator::zero_copy): the
// zero-copy path of shm_path.h, DeepEP's registered buffers — each rank
// writes a token row once into its shared staging (as is, or encoded) and
// every rank copies the rows it receives straight from the peers' stagings
// into its expert rows; combine's partial sums go the same way, straight
// into the accumulator. Otherwise (tcp, or no shared mappings) pack /
// all-to-all-v / unpack through staging buffers. Both paths give the same
// bits (one summation order, one partial-sum kernel). Staging is reused
// across calls. Errors: bad arguments → InvalidArgument naming the
// argument; a failed exchange → the communicator's error (the group fails together).
// Thread-safety: one thread per MoeBuffer; collective (every rank of the
// communicator calls the same sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/moe/layout.h"
#include "tessera/comm/moe/payload.h"
#include "tessera/comm/moe/staging.h"

namespace tessera::comm::moe {

class MoeBuffer {
 public:
  // `comm` must outlive the buffer (nullptr: a group of one rank);
  // num_experts % comm->size() == 0.
  static StatusOr<std::unique_ptr<MoeBuffer>> Create(Communicator* comm, int num_experts, int64_t hidden);

  int rank() const { return rank_; }
  int num_ranks() const { return ranks_; }
  int num_experts() const { return num_experts_; }
  int num_local_experts() const { return num_experts_ / ranks_; }
  int64_t hidden() const { return hidden_; }

  // topk_idx [T·k]; topk_weights [T·k] or empty (weights 1).
  StatusOr<std::shared_ptr<const DispatchHandle>> Layout(std::span<const int64_t> topk_idx, int top_k,
                                                         std::span<const float> topk_weights = {});
  // x [T, hidden] of dtype (fp32 | bf16 | fp16) -> recv_x [num_recv_rows, hidden] of dtype.
  Status Dispatch(const DispatchHandle& h, const void* x, DataType dtype, Payload payload, void* recv_x);
  // y [num_recv_rows, hidden] of dtype -> out [T, hidden] of dtype: each
  // token's sum of row_weights[row] · y[row] over its rows (row_weights
  // null: 1), weighted on the expert side. Summation order: per token and
  // expert rank, the rows in the token's choice order, then those partial
  // sums in rank order, on every path (results do not depend on the
  // transport).
  Status Combine(const DispatchHandle& h, const void* y, DataType dtype, const float* row_weights, Payload payload,
                 void* out);
  // The same sum with the weights given to Layout (`gates`: DeepEP's
  // combine(x, handle, topk_weights)) or with weights 1.
  Status CombineGated(const DispatchHandle& h, const void* y, DataType dtype, bool gates, Payload payload, void* out);
  // per_row [num_recv_rows] -> out [T·k].
  Status ReturnScalars(const DispatchHandle& h, const float* per_row, float* out);

  // Bytes this rank sent in exchanges so far (payload, layout metadata).
  uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  MoeBuffer(Communicator* comm, int num_experts, int64_t hidden);
  Status Exchange(const uint8_t* send, const std::vector<int64_t>& send_offsets, uint8_t* recv,
                  const std::vector<int64_t>& recv_offsets, size_t record_bytes, const char* what);
  Status CheckHandle(const DispatchHandle& h) const;
  // The zero-copy same-host path (shm_path.h) instead of pack / exchange / unpack.
  bool Fused() const { return fused_; }

  Communicator* comm_;
  int rank_;
  int ranks_;
  int num_experts_;
  int64_t hidden_;
  Staging send_stage_, recv_stage_;
  std::vector<float> acc_, partial_;
  std::vector<uint8_t> stored_;
  bool fused_ = false;
  uint64_t bytes_sent_ = 0;
};

}  // namespace tessera::comm::moe
