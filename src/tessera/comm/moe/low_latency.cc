#include "tessera/comm/moe/low_latency.h"

#include <algorithm>
#include <cstring>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/moe/shm_path.h"

namespace tessera::comm::moe {
namespace {

// A block: [int64 token count, padded to 64 bytes][per token k ChoiceMeta
// (padded to 64 bytes for max_tokens)][per token its row (payload)] for a
// dispatch; [int64 count, padded][partial sums, one row each] for a combine.
struct ChoiceMeta {
  int32_t expert;  // global id, -1: none
  float weight;
};
constexpr size_t kHeader = 64;
size_t Pad64(size_t n) { return (n + 63) & ~size_t{63}; }

int64_t CountOf(const uint8_t* block) {
  int64_t n = 0;
  std::memcpy(&n, block, sizeof(n));
  return n;
}
void SetCount(uint8_t* block, int64_t n) { std::memcpy(block, &n, sizeof(n)); }

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
  owner->in_flight_ = false;
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
  b->back_ = payload == Payload::kFp8E4m3 ? Payload::kBFloat16 : payload;
  b->row_bytes_ = RowBytes(payload, hidden);
  b->meta_bytes_ = Pad64(sizeof(ChoiceMeta) * static_cast<size_t>(top_k) * max_tokens);
  const size_t dispatch_bytes = kHeader + b->meta_bytes_ + static_cast<size_t>(max_tokens) * b->row_bytes_;
  const size_t combine_bytes = kHeader + static_cast<size_t>(max_tokens) * RowBytes(b->back_, hidden);
  b->block_bytes_ = Pad64(std::max(dispatch_bytes, combine_bytes));
  b->zero_copy_ = comm != nullptr && ranks > 1 && comm->zero_copy();
  b->send_.set_shared(b->zero_copy_);
  // Registered once: every later exchange reuses these.
  TESSERA_ASSIGN_OR_RETURN(b->send_data_, b->send_.Get(b->block_bytes_ * ranks));
  if (!b->zero_copy_) {
    TESSERA_ASSIGN_OR_RETURN(b->recv_data_, b->recv_.Get(b->block_bytes_ * ranks));
  }
  b->counts_.assign(b->num_local_experts(), 0);
  return b;
}

LowLatencyBuffer::~LowLatencyBuffer() {
  if (pending_.valid()) (void)pending_.Wait();  // bounded by the communicator's timeout
}

size_t LowLatencyBuffer::recv_bytes(DataType dtype) const {
  return static_cast<size_t>(num_local_experts()) * slab_rows() * hidden_ * DataTypeSize(dtype);
}

const uint8_t* LowLatencyBuffer::From(int peer, int block, const std::vector<const uint8_t*>& views) const {
  if (!views.empty()) return views[peer] + static_cast<size_t>(block) * block_bytes_;
  return recv_data_ + static_cast<size_t>(peer) * block_bytes_;
}

StatusOr<ReceiveHook> LowLatencyBuffer::Dispatch(const void* x, DataType dtype, std::span<const int64_t> topk_idx,
                                                 std::span<const float> topk_weights, void* recv_x) {
  if (in_flight_) return FailedPrecondition("MoE low-latency dispatch: the last exchange's hook was not waited on");
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
  for (size_t c = 0; c < topk_idx.size(); ++c) {
    if (topk_idx[c] < -1 || topk_idx[c] >= num_experts_) {
      return InvalidArgument("MoE low-latency dispatch: token {} choice {} names expert {}, outside [0, {})",
                             c / top_k_, c % top_k_, topk_idx[c], num_experts_);
    }
  }
  const int local = num_local_experts();
  tokens_ = tokens;
  dtype_ = dtype;
  recv_x_ = recv_x;
  sent_.assign(ranks_, {});
  const size_t elem_row = static_cast<size_t>(hidden_) * DataTypeSize(dtype);
  const auto* xb = static_cast<const uint8_t*>(x);
  // A token goes to block 0 (zero copy: every rank reads it there) or to
  // the block of each rank it has an expert on.
  std::vector<char> on_rank(ranks_);
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(on_rank.begin(), on_rank.end(), 0);
    for (int j = 0; j < top_k_; ++j) {
      const int64_t e = topk_idx[t * top_k_ + j];
      if (e >= 0) on_rank[e / local] = 1;
    }
    for (int r = 0; r < ranks_; ++r) {
      if (on_rank[r]) sent_[r].push_back(t);
    }
    for (int r = 0; r < (zero_copy_ ? 1 : ranks_); ++r) {
      if (!zero_copy_ && !on_rank[r]) continue;
      uint8_t* block = send_data_ + static_cast<size_t>(r) * block_bytes_;
      const int64_t i = zero_copy_ ? t : static_cast<int64_t>(sent_[r].size()) - 1;
      EncodeRow(payload_, xb + t * elem_row, dtype, hidden_, block + kHeader + meta_bytes_ + i * row_bytes_);
      auto* meta = reinterpret_cast<ChoiceMeta*>(block + kHeader) + i * top_k_;
      for (int j = 0; j < top_k_; ++j) {
        meta[j] = {static_cast<int32_t>(topk_idx[t * top_k_ + j]),
                   topk_weights.empty() ? 1.0f : topk_weights[t * top_k_ + j]};
      }
    }
  }
  if (zero_copy_) {
    SetCount(send_data_, tokens);
  } else {
    for (int r = 0; r < ranks_; ++r) {
      SetCount(send_data_ + static_cast<size_t>(r) * block_bytes_, static_cast<int64_t>(sent_[r].size()));
    }
  }
  ReceiveHook hook;
  hook.owner_ = this;
  hook.work_ = pending_ = Start("moe_ll_dispatch", /*combine=*/false);
  in_flight_ = true;
  return hook;
}

Work LowLatencyBuffer::Start(const char* label, bool combine) {
  if (ranks_ == 1) {
    std::memcpy(recv_data_, send_data_, block_bytes_);
    return Work();
  }
  if (zero_copy_) {  // read the peers' blocks in place, inside the operation
    return comm_->SubmitCustom(label, [this, combine](algo::AlgoEnv& env) {
      shm_path::PeerViews views(env);
      TESSERA_RETURN_IF_ERROR(views.Open(send_data_, block_bytes_ * ranks_));
      std::vector<const uint8_t*> bases(ranks_);
      for (int r = 0; r < ranks_; ++r) bases[r] = views.at(r);
      TESSERA_RETURN_IF_ERROR(combine ? Accumulate(bases) : Receive(bases));
      return views.Close();
    });
  }
  return comm_->AllToAllAsync(send_data_, recv_data_, block_bytes_, DataType::kUint8);
}

Status LowLatencyBuffer::Receive(const std::vector<const uint8_t*>& views) {
  const int local = num_local_experts();
  const int64_t first_expert = static_cast<int64_t>(rank_) * local;
  const size_t elem_row = static_cast<size_t>(hidden_) * DataTypeSize(dtype_);
  const bool exact = IsExact(payload_, dtype_);
  std::fill(counts_.begin(), counts_.end(), 0);
  recv_token_rows_offsets_.assign(1, 0);
  recv_token_rows_.clear();
  recv_row_weights_.assign(static_cast<size_t>(local) * slab_rows(), 0.0f);
  recv_tokens_from_.assign(ranks_, 0);
  auto* out = static_cast<uint8_t*>(recv_x_);
  // Large outputs are written with streaming stores (algo::StreamOutput):
  // count the rows first.
  int64_t rows_here = 0;
  for (int s = 0; s < ranks_; ++s) {
    const uint8_t* block = From(s, 0, views);
    const int64_t n = CountOf(block);
    if (n < 0 || n > max_tokens_) {
      return Internal("MoE low-latency dispatch: rank {} announced {} tokens (max {})", s, n, max_tokens_);
    }
    const auto* meta = reinterpret_cast<const ChoiceMeta*>(block + kHeader);
    for (int64_t c = 0; c < n * top_k_; ++c)
      rows_here += meta[c].expert >= first_expert && meta[c].expert < first_expert + local;
  }
  const bool stream = algo::StreamOutput(static_cast<size_t>(rows_here) * elem_row);
  for (int s = 0; s < ranks_; ++s) {
    const uint8_t* block = From(s, 0, views);
    const int64_t n = CountOf(block);
    const auto* meta = reinterpret_cast<const ChoiceMeta*>(block + kHeader);
    const uint8_t* rows = block + kHeader + meta_bytes_;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* src = rows + static_cast<size_t>(i) * row_bytes_;
      int64_t first_row = -1;
      for (int j = 0; j < top_k_; ++j) {
        const int64_t e = meta[i * top_k_ + j].expert;
        if (e < -1 || e >= num_experts_) return Internal("MoE low-latency dispatch: rank {} sent expert {}", s, e);
        if (e < first_expert || e >= first_expert + local) continue;
        const int64_t le = e - first_expert;
        const int64_t row = le * slab_rows() + counts_[le]++;
        if (exact) {
          algo::CopyOut(out + row * elem_row, src, elem_row, stream);
        } else if (first_row < 0) {
          DecodeRow(payload_, src, hidden_, dtype_, out + row * elem_row);
          first_row = row;
        } else {
          std::memcpy(out + row * elem_row, out + first_row * elem_row, elem_row);
        }
        recv_token_rows_.push_back(row);
        recv_row_weights_[row] = meta[i * top_k_ + j].weight;
      }
      if (static_cast<int64_t>(recv_token_rows_.size()) == recv_token_rows_offsets_.back()) continue;  // none here
      recv_token_rows_offsets_.push_back(static_cast<int64_t>(recv_token_rows_.size()));
      ++recv_tokens_from_[s];
    }
  }
  return Status::Ok();
}

Status LowLatencyBuffer::FinishDispatch() {
  if (zero_copy_ && ranks_ > 1) return Status::Ok();  // received inside the operation
  return Receive({});
}

StatusOr<ReceiveHook> LowLatencyBuffer::Combine(const void* y, DataType dtype, void* out) {
  if (in_flight_) return FailedPrecondition("MoE low-latency combine: the last exchange's hook was not waited on");
  TESSERA_RETURN_IF_ERROR(CheckDtype(dtype, back_));
  if (dtype != dtype_) {
    return InvalidArgument("MoE low-latency combine: y is {}, the dispatch was {}", DataTypeName(dtype),
                           DataTypeName(dtype_));
  }
  // Expert side: per source, one partial sum per received token (its rows
  // in choice order), into the block going back to that source.
  const size_t row = RowBytes(back_, hidden_);
  const size_t elem_row = static_cast<size_t>(hidden_) * DataTypeSize(dtype);
  const auto* yb = static_cast<const uint8_t*>(y);
  partial_.resize(static_cast<size_t>(hidden_));
  int64_t token = 0;
  for (int s = 0; s < ranks_; ++s) {
    uint8_t* block = send_data_ + static_cast<size_t>(s) * block_bytes_;
    SetCount(block, recv_tokens_from_[s]);
    for (int64_t i = 0; i < recv_tokens_from_[s]; ++i, ++token) {
      uint8_t* dst = block + kHeader + static_cast<size_t>(i) * row;
      float* partial = back_ == Payload::kFloat32 ? reinterpret_cast<float*>(dst) : partial_.data();
      std::fill(partial, partial + hidden_, 0.0f);
      for (int64_t k = recv_token_rows_offsets_[token]; k < recv_token_rows_offsets_[token + 1]; ++k) {
        const int64_t r = recv_token_rows_[k];
        AccumulateWeighted(yb + r * elem_row, dtype, recv_row_weights_[r], hidden_, partial);
      }
      if (back_ != Payload::kFloat32) EncodeRow(back_, partial, DataType::kFloat32, hidden_, dst);
    }
  }
  out_ = out;
  ReceiveHook hook;
  hook.owner_ = this;
  hook.combine_ = true;
  hook.work_ = pending_ = Start("moe_ll_combine", /*combine=*/true);
  in_flight_ = true;
  return hook;
}

Status LowLatencyBuffer::Accumulate(const std::vector<const uint8_t*>& views) {
  const size_t row = RowBytes(back_, hidden_);
  sum_.resize(static_cast<size_t>(tokens_ * hidden_));
  stored_.assign(static_cast<size_t>(tokens_), 0);
  for (int r = 0; r < ranks_; ++r) {  // rank order: the summation order of normal mode
    const uint8_t* block = From(r, rank_, views);
    const int64_t n = CountOf(block);
    if (n != static_cast<int64_t>(sent_[r].size())) {
      return Internal("MoE low-latency combine: rank {} returned {} tokens, {} were sent", r, n, sent_[r].size());
    }
    for (int64_t i = 0; i < n; ++i) {
      StoreOrAccumulate(back_, block + kHeader + static_cast<size_t>(i) * row, hidden_, sent_[r][i], stored_,
                        sum_.data());
    }
  }
  FillUnstored(stored_, hidden_, sum_.data());
  return Status::Ok();
}

Status LowLatencyBuffer::FinishCombine() {
  if (!zero_copy_ || ranks_ == 1) TESSERA_RETURN_IF_ERROR(Accumulate({}));
  StoreFloats(sum_.data(), tokens_ * hidden_, dtype_, out_);
  return Status::Ok();
}

}  // namespace tessera::comm::moe
