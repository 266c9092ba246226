// LowLatencyBuffer: MoE dispatch / combine for decoding-sized batches
// (DeepEP's low-latency mode). Differences from MoeBuffer's normal mode:
//   - buffers are sized once, at creation, for at most `max_tokens` tokens
//     per rank (shared memory when the communicator runs zero copy: the
//     exchange reads peers' buffers in place);
//   - no layout round trip: each rank fills one fixed-size block per peer
//     (a token count, then per token its row and per-choice local expert
//     and weight); on one host with direct peer reads each rank pulls the
//     filled part of its block from every peer (shm_path.h), elsewhere one
//     all-to-all moves the whole blocks;
//   - a receive hook: Dispatch / Combine start the exchange on the
//     communicator's progress thread and return at once; the caller
//     computes meanwhile and calls hook.Wait() to finish (waits, bounded by
//     the communicator's timeout, then unpacks).
// Output layout (DeepEP's packed_recv_x): expert j's rows are
// recv_x[j · R · max_tokens .. + count(j)) rows of `hidden` (R ranks),
// by source rank then token order; a token with several choices on this
// rank fills one row per choice. Combine takes y in the same layout and
// gives out[t] = Σ weight · y over t's rows on every rank, as MoeBuffer.
// Errors: more than max_tokens tokens, bad ids or dtypes → InvalidArgument;
// a failed exchange → the communicator's error. Thread-safety: one thread;
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
  // Starts the exchange of the filled send blocks (records of
  // `record_bytes`): the fused pull on one host, else a whole-block
  // all-to-all.
  Work Start(const char* label, size_t record_bytes);
  Status FinishDispatch();
  Status FinishCombine();

  Communicator* comm_ = nullptr;
  int rank_ = 0, ranks_ = 1, num_experts_ = 0, top_k_ = 0;
  int64_t hidden_ = 0, max_tokens_ = 0;
  Payload payload_ = Payload::kBFloat16;
  size_t row_bytes_ = 0, record_bytes_ = 0, block_bytes_ = 0;
  bool fused_ = false;
  Staging send_, recv_;
  uint8_t* send_data_ = nullptr;
  uint8_t* recv_data_ = nullptr;
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
  std::vector<float> acc_;
};

}  // namespace tessera::comm::moe
