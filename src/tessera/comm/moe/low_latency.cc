#include "tessera/comm/moe/low_latency.h"

#include <algorithm>
#include <cstring>

#include "tessera/base/float16.h"
#include "tessera/comm/moe/shm_path.h"

namespace tessera::comm::moe {
namespace {

struct ChoiceMeta {
  int32_t local_expert;
  float weight;
};

size_t ElemBytes(DataType dtype) { return dtype == DataType::kFloat32 ? 4 : 2; }

float LoadElem(const void* y, DataType dtype, int64_t i) {
  if (dtype == DataType::kFloat32) return static_cast<const float*>(y)[i];
  const uint16_t b = static_cast<const uint16_t*>(y)[i];
  return dtype == DataType::kBFloat16 ? bf16::FromBits(b).ToFloat() : fp16::FromBits(b).ToFloat();
}

void StoreRow(const float* v, int64_t n, DataType dtype, void* dst) {
  if (dtype == DataType::kFloat32) {
    std::memcpy(dst, v, static_cast<size_t>(n) * 4);
    return;
  }
  auto* o = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) o[i] = dtype == DataType::kBFloat16 ? bf16::FromFloat(v[i]) : fp16::FromFloat(v[i]);
}

Status CheckDtype(DataType dtype, Payload payload) {
  if (dtype != DataType::kFloat32 && dtype != DataType::kBFloat16 && dtype != DataType::kFloat16) {
    return InvalidArgument("MoE low-latency: dtype {} is not float32, bfloat16 or float16", DataTypeName(dtype));
  }
  if (payload == Payload::kFloat32 && dtype != DataType::kFloat32) {
    return InvalidArgument("MoE low-latency: an fp32 payload needs float32 input, got {}", DataTypeName(dtype));
  }
  return Status::Ok();
}

}  // namespace

Status ReceiveHook::Wait() {
  if (owner_ == nullptr) return FailedPrecondition("MoE low-latency: this hook was already waited on");
  LowLatencyBuffer* owner = owner_;
  owner_ = nullptr;
  if (work_.valid()) TESSERA_RETURN_IF_ERROR(work_.Wait());
  return combine_ ? owner->FinishCombine() : owner->FinishDispatch();
}

StatusOr<std::unique_ptr<LowLatencyBuffer>> LowLatencyBuffer::Create(Communicator* comm, int num_experts,
                                                                     int64_t hidden, int64_t max_tokens, int top_k,
                                                                     Payload payload) {
  const int ranks = comm == nullptr ? 1 : comm->size();
  if (num_experts < 1 || num_experts % ranks != 0) {
    return InvalidArgument("MoE low-latency: {} experts cannot be sharded over {} ranks", num_experts, ranks);
  }
  if (hidden < 1 || max_tokens < 1 || top_k < 1 || top_k > num_experts) {
    return InvalidArgument("MoE low-latency: hidden {}, max_tokens {}, top_k {} (of {} experts) must be positive",
                           hidden, max_tokens, top_k, num_experts);
  }
  std::unique_ptr<LowLatencyBuffer> b(new LowLatencyBuffer());
  b->comm_ = comm;
  b->rank_ = comm == nullptr ? 0 : comm->rank();
  b->ranks_ = ranks;
  b->num_experts_ = num_experts;
  b->top_k_ = top_k;
  b->hidden_ = hidden;
  b->max_tokens_ = max_tokens;
  b->payload_ = payload;
  b->row_bytes_ = RowBytes(payload, hidden);
  // A record holds a dispatched token (row + choices) or a combined one
  // (fp8 dispatches combine in bf16, which can be the larger).
  const Payload back = payload == Payload::kFp8E4m3 ? Payload::kBFloat16 : payload;
  b->record_bytes_ = std::max(b->row_bytes_ + ((sizeof(ChoiceMeta) * top_k + 15) & ~size_t{15}), RowBytes(back, hidden));
  b->block_bytes_ = 16 + static_cast<size_t>(max_tokens) * b->record_bytes_;
  b->fused_ = comm != nullptr && ranks > 1 && comm->direct_peer_reads();
  const bool shared = comm != nullptr && ranks > 1 && comm->zero_copy() && !b->fused_;
  b->send_.set_shared(shared);
  b->recv_.set_shared(shared);
  // Registered once: every later exchange reuses these.
  TESSERA_ASSIGN_OR_RETURN(b->send_data_, b->send_.Get(b->block_bytes_ * ranks));
  TESSERA_ASSIGN_OR_RETURN(b->recv_data_, b->recv_.Get(b->block_bytes_ * ranks));
  b->counts_.assign(b->num_local_experts(), 0);
  return b;
}

size_t LowLatencyBuffer::recv_bytes(DataType dtype) const {
  return static_cast<size_t>(num_local_experts()) * slab_rows() * hidden_ * ElemBytes(dtype);
}

StatusOr<ReceiveHook> LowLatencyBuffer::Dispatch(const void* x, DataType dtype, std::span<const int64_t> topk_idx,
                                                 std::span<const float> topk_weights, void* recv_x) {
  TESSERA_RETURN_IF_ERROR(CheckDtype(dtype, payload_));
  if (topk_idx.size() % top_k_ != 0 || (!topk_weights.empty() && topk_weights.size() != topk_idx.size())) {
    return InvalidArgument("MoE low-latency dispatch: {} expert ids and {} weights for top_k {}", topk_idx.size(),
                           topk_weights.size(), top_k_);
  }
  const int64_t tokens = static_cast<int64_t>(topk_idx.size() / top_k_);
  if (tokens > max_tokens_) {
    return InvalidArgument("MoE low-latency dispatch: {} tokens exceed the buffer's max_tokens {}", tokens,
                           max_tokens_);
  }
  const int local = num_local_experts();
  tokens_ = tokens;
  dtype_ = dtype;
  recv_x_ = recv_x;
  sent_.assign(ranks_, {});
  const size_t elem_row = static_cast<size_t>(hidden_) * ElemBytes(dtype);
  const auto* xb = static_cast<const uint8_t*>(x);
  std::vector<int32_t> local_of(top_k_);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int r = 0; r < ranks_; ++r) {
      bool here = false;
      for (int j = 0; j < top_k_; ++j) {
        const int64_t e = topk_idx[t * top_k_ + j];
        if (e < -1 || e >= num_experts_) {
          return InvalidArgument("MoE low-latency dispatch: token {} choice {} names expert {}, outside [0, {})", t,
                                 j, e, num_experts_);
        }
        local_of[j] = e >= 0 && e / local == r ? static_cast<int32_t>(e % local) : -1;
        here |= local_of[j] >= 0;
      }
      if (!here) continue;
      uint8_t* block = send_data_ + static_cast<size_t>(r) * block_bytes_;
      uint8_t* rec = block + 16 + sent_[r].size() * record_bytes_;
      EncodeRow(payload_, xb + t * elem_row, dtype, hidden_, rec);
      auto* meta = reinterpret_cast<ChoiceMeta*>(rec + row_bytes_);
      for (int j = 0; j < top_k_; ++j) meta[j] = {local_of[j], topk_weights.empty() ? 1.0f : topk_weights[t * top_k_ + j]};
      sent_[r].push_back(t);
    }
  }
  for (int r = 0; r < ranks_; ++r) {
    const int64_t n = static_cast<int64_t>(sent_[r].size());
    std::memcpy(send_data_ + static_cast<size_t>(r) * block_bytes_, &n, sizeof(n));
  }
  ReceiveHook hook;
  hook.owner_ = this;
  hook.work_ = Start("moe_ll_dispatch", record_bytes_);
  return hook;
}

Work LowLatencyBuffer::Start(const char* label, size_t record_bytes) {
  if (ranks_ == 1) {
    int64_t n = 0;
    std::memcpy(&n, send_data_, sizeof(n));
    std::memcpy(recv_data_, send_data_, 16 + static_cast<size_t>(n) * record_bytes);
    return Work();
  }
  if (fused_) {  // pull only the filled part of each block
    return comm_->SubmitCustom(label, [this, record_bytes](algo::AlgoEnv& env) {
      return shm_path::PullBlocks(env, send_data_, block_bytes_, record_bytes, max_tokens_, recv_data_);
    });
  }
  return comm_->AllToAllAsync(send_data_, recv_data_, block_bytes_, DataType::kUint8);
}

Status LowLatencyBuffer::FinishDispatch() {
  const int local = num_local_experts();
  const size_t elem_row = static_cast<size_t>(hidden_) * ElemBytes(dtype_);
  std::fill(counts_.begin(), counts_.end(), 0);
  recv_token_rows_offsets_.assign(1, 0);
  recv_token_rows_.clear();
  recv_row_weights_.assign(static_cast<size_t>(local) * slab_rows(), 0.0f);
  recv_tokens_from_.assign(ranks_, 0);
  auto* out = static_cast<uint8_t*>(recv_x_);
  for (int s = 0; s < ranks_; ++s) {
    const uint8_t* block = recv_data_ + static_cast<size_t>(s) * block_bytes_;
    int64_t n = 0;
    std::memcpy(&n, block, sizeof(n));
    if (n < 0 || n > max_tokens_) {
      return Internal("MoE low-latency dispatch: rank {} announced {} tokens (max {})", s, n, max_tokens_);
    }
    recv_tokens_from_[s] = n;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* rec = block + 16 + static_cast<size_t>(i) * record_bytes_;
      const auto* meta = reinterpret_cast<const ChoiceMeta*>(rec + row_bytes_);
      int64_t first_row = -1;
      for (int j = 0; j < top_k_; ++j) {
        const int32_t le = meta[j].local_expert;
        if (le < 0) continue;
        if (le >= local) return Internal("MoE low-latency dispatch: rank {} sent local expert {}", s, le);
        const int64_t row = le * slab_rows() + counts_[le]++;
        if (first_row < 0) {
          DecodeRow(payload_, rec, hidden_, dtype_, out + row * elem_row);
          first_row = row;
        } else {
          std::memcpy(out + row * elem_row, out + first_row * elem_row, elem_row);
        }
        recv_token_rows_.push_back(row);
        recv_row_weights_[row] = meta[j].weight;
      }
      recv_token_rows_offsets_.push_back(static_cast<int64_t>(recv_token_rows_.size()));
    }
  }
  return Status::Ok();
}

StatusOr<ReceiveHook> LowLatencyBuffer::Combine(const void* y, DataType dtype, void* out) {
  TESSERA_RETURN_IF_ERROR(CheckDtype(dtype, payload_ == Payload::kFp8E4m3 ? Payload::kBFloat16 : payload_));
  if (dtype != dtype_) {
    return InvalidArgument("MoE low-latency combine: y is {}, the dispatch was {}", DataTypeName(dtype),
                           DataTypeName(dtype_));
  }
  // Combine travels in the dispatch payload's precision (fp8: bf16).
  const Payload back = payload_ == Payload::kFp8E4m3 ? Payload::kBFloat16 : payload_;
  const size_t row = RowBytes(back, hidden_);
  acc_.resize(static_cast<size_t>(hidden_));
  int64_t token = 0;
  for (int s = 0; s < ranks_; ++s) {
    uint8_t* block = send_data_ + static_cast<size_t>(s) * block_bytes_;
    std::memcpy(block, &recv_tokens_from_[s], sizeof(int64_t));
    for (int64_t i = 0; i < recv_tokens_from_[s]; ++i, ++token) {
      std::fill(acc_.begin(), acc_.end(), 0.0f);
      for (int64_t k = recv_token_rows_offsets_[token]; k < recv_token_rows_offsets_[token + 1]; ++k) {
        const int64_t r = recv_token_rows_[k];
        const float w = recv_row_weights_[r];
        for (int64_t c = 0; c < hidden_; ++c) {
          const float prod = LoadElem(y, dtype, r * hidden_ + c) * w;
          acc_[c] += prod;
        }
      }
      EncodeRow(back, acc_.data(), DataType::kFloat32, hidden_, block + 16 + static_cast<size_t>(i) * row);
    }
  }
  out_ = out;
  ReceiveHook hook;
  hook.owner_ = this;
  hook.combine_ = true;
  hook.work_ = Start("moe_ll_combine", row);
  return hook;
}

Status LowLatencyBuffer::FinishCombine() {
  const Payload back = payload_ == Payload::kFp8E4m3 ? Payload::kBFloat16 : payload_;
  const size_t row = RowBytes(back, hidden_);
  std::vector<float> sum(static_cast<size_t>(tokens_ * hidden_), 0.0f);
  for (int r = 0; r < ranks_; ++r) {
    const uint8_t* block = recv_data_ + static_cast<size_t>(r) * block_bytes_;
    int64_t n = 0;
    std::memcpy(&n, block, sizeof(n));
    if (n != static_cast<int64_t>(sent_[r].size())) {
      return Internal("MoE low-latency combine: rank {} returned {} tokens, {} were sent", r, n, sent_[r].size());
    }
    for (int64_t i = 0; i < n; ++i) {
      DecodeAccumulate(back, block + 16 + static_cast<size_t>(i) * row, hidden_, &sum[sent_[r][i] * hidden_]);
    }
  }
  const size_t elem_row = static_cast<size_t>(hidden_) * ElemBytes(dtype_);
  for (int64_t t = 0; t < tokens_; ++t) StoreRow(&sum[t * hidden_], hidden_, dtype_, static_cast<uint8_t*>(out_) + t * elem_row);
  return Status::Ok();
}

}  // namespace tessera::comm::moe
