// LowLatencyBuffer: MoE dispatch / combine for decoding-sized batches
// (DeepEP's low-latency mode). Differences from MoeBuffer's normal mode:
//   - buffers are sized once, at creation, for at most `max_tokens` tokens
//     per rank;
//   - no layout round trip. On one host with mappable shared memory
//     (Communicator::zero_copy) each rank writes its tokens once into its
//     own shared table (a token count, per token its k expert ids and
//     weights, then its row) and every rank copies the rows of its experts
//     straight from the peers' tables into its slabs (shm_path::PeerViews):
//     one pass over the received bytes plus the senders' own rows.
//     Elsewhere each rank fills one block of the same format per peer (the
//     tokens it sends there) and one all-to-all moves the whole blocks;
//   - a receive hook: Dispatch / Combine start the exchange on the
//     communicator's progress thread and return at once; the caller
//     computes meanwhile and calls hook.Wait() to finish (waits, bounded by
//     the communicator's timeout; the exchange path unpacks there). x and
//     recv_x (dispatch), y and out (combine) stay untouched until then.
// Output layout (DeepEP's packed_recv_x): expert j's rows are
// recv_x[j · R · max_tokens .. + count(j)) rows of `hidden` (R ranks),
// by source rank then token order; a token with several choices on this
// rank fills one row per choice. Combine takes y in the same layout and
// gives out[t] = Σ weight · y over t's rows on every rank, as MoeBuffer.
// Errors: more than max_tokens tokens, bad ids or dtypes → InvalidArgument;
// a second exchange while one is in flight → FailedPrecondition; a failed
// exchange → the communicator's error. Thread-safety: one thread;
// collective (every rank calls the same sequence); one exchange in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/api/work.h"
#include "tessera/comm/moe/payload.h"
#include "tessera/comm/moe/staging.h"

namespace tessera::comm::moe {

class LowLatencyBuffer;

// Finishes a started exchange; Wait() once.
class ReceiveHook {
 public:
  Status Wait();

 private:
  friend class LowLatencyBuffer;
  LowLatencyBuffer* owner_ = nullptr;
  Work work_;
  bool combine_ = false;
};

class LowLatencyBuffer {
 public:
  // Waits for an exchange still in flight (its hook dropped unwaited): the
  // progress thread may be writing into this buffer.
  ~LowLatencyBuffer();
  LowLatencyBuffer(const LowLatencyBuffer&) = delete;
  LowLatencyBuffer& operator=(const LowLatencyBuffer&) = delete;

  static StatusOr<std::unique_ptr<LowLatencyBuffer>> Create(Communicator* comm, int num_experts, int64_t hidden,
                                                            int64_t max_tokens, int top_k, Payload payload);

  int num_local_experts() const { return num_experts_ / ranks_; }
  int64_t slab_rows() const { return static_cast<int64_t>(ranks_) * max_tokens_; }  // rows per expert slab
  size_t recv_bytes(DataType dtype) const;  // size of recv_x / y

  // x [T, hidden] (T ≤ max_tokens) of dtype (fp32 | bf16 | fp16);
  // topk_idx / topk_weights [T·k]. recv_x must hold recv_bytes(dtype) and
  // stay untouched until the hook returns.
  StatusOr<ReceiveHook> Dispatch(const void* x, DataType dtype, std::span<const int64_t> topk_idx,
                                 std::span<const float> topk_weights, void* recv_x);
  // After a dispatch's hook: rows of local expert j.
  int64_t count(int j) const { return counts_[j]; }
  // y in the dispatch's layout and dtype -> out [T, hidden] of dtype (T of
  // the last dispatch); weighted by the dispatched weights.
  StatusOr<ReceiveHook> Combine(const void* y, DataType dtype, void* out);

 private:
  friend class ReceiveHook;
  LowLatencyBuffer() = default;
  // The data `peer` sent this rank: its send buffer's block `block`, read
  // in place (zero copy: `views` holds the peers' mapped send buffers), or
  // the received block from `peer` (the exchange path: views empty).
  const uint8_t* From(int peer, int block, const std::vector<const uint8_t*>& views) const;
  // Dispatch: the rows of this rank's experts from every source, in rank
  // then token order, into recv_x_ (and what Combine needs to send back).
  Status Receive(const std::vector<const uint8_t*>& views);
  // Combine: every rank's partial sums of this rank's tokens into sum_.
  Status Accumulate(const std::vector<const uint8_t*>& views);
  // Starts the exchange: zero copy, an operation that reads the peers'
  // blocks in place (Receive / Accumulate inside it); else a whole-block
  // all-to-all (unpacked by the Finish functions).
  Work Start(const char* label, bool combine);
  Status FinishDispatch();
  Status FinishCombine();

  Communicator* comm_ = nullptr;
  int rank_ = 0, ranks_ = 1, num_experts_ = 0, top_k_ = 0;
  int64_t hidden_ = 0, max_tokens_ = 0;
  Payload payload_ = Payload::kBFloat16;
  Payload back_ = Payload::kBFloat16;  // combine's payload (fp8 dispatches combine in bf16)
  size_t row_bytes_ = 0, meta_bytes_ = 0, block_bytes_ = 0;
  bool zero_copy_ = false;
  // One block per peer (dispatch, exchange path: the tokens sent there;
  // combine: the partial sums sent back there); zero copy: shared, read in
  // place by the peers, and a dispatch writes all tokens into block 0.
  Staging send_, recv_;
  uint8_t* send_data_ = nullptr;
  uint8_t* recv_data_ = nullptr;
  bool in_flight_ = false;
  Work pending_;  // the last exchange started
  // The last dispatch: tokens, dtype, output, per destination its tokens,
  // per received token (by source) its rows and weights.
  int64_t tokens_ = 0;
  DataType dtype_ = DataType::kFloat32;
  void* recv_x_ = nullptr;
  void* out_ = nullptr;
  std::vector<std::vector<int64_t>> sent_;
  std::vector<int64_t> counts_;
  std::vector<int64_t> recv_token_rows_offsets_, recv_token_rows_;
  std::vector<float> recv_row_weights_;
  std::vector<int64_t> recv_tokens_from_;  // received tokens per source
  std::vector<float> partial_, sum_;
  std::vector<uint8_t> stored_;
};

}  // namespace tessera::comm::moe
