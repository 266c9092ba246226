#include "tessera/comm/moe/buffer.h"

#include <algorithm>
#include <cstring>

#include "tessera/comm/moe/shm_path.h"

namespace tessera::comm::moe {
namespace {

Status CheckDtype(DataType dtype, Payload payload, const char* op) {
  if (dtype != DataType::kFloat32 && dtype != DataType::kBFloat16 && dtype != DataType::kFloat16) {
    return InvalidArgument("MoE {}: dtype {} is not float32, bfloat16 or float16", op, DataTypeName(dtype));
  }
  if (payload == Payload::kFloat32 && dtype != DataType::kFloat32) {
    return InvalidArgument("MoE {}: an fp32 payload needs float32 input, got {}", op, DataTypeName(dtype));
  }
  return Status::Ok();
}

// Per-token metadata of the layout exchange: per choice, the local expert
// on the destination (-1: elsewhere or none) and the weight.
struct ChoiceMeta {
  int32_t local_expert;
  float weight;
};

}  // namespace

StatusOr<std::unique_ptr<MoeBuffer>> MoeBuffer::Create(Communicator* comm, int num_experts, int64_t hidden) {
  const int ranks = comm == nullptr ? 1 : comm->size();
  if (num_experts < 1 || num_experts % ranks != 0) {
    return InvalidArgument("MoeBuffer: {} experts cannot be sharded over {} ranks (need a positive multiple)",
                           num_experts, ranks);
  }
  if (hidden < 1) return InvalidArgument("MoeBuffer: hidden = {} must be positive", hidden);
  return std::unique_ptr<MoeBuffer>(new MoeBuffer(comm, num_experts, hidden));
}

MoeBuffer::MoeBuffer(Communicator* comm, int num_experts, int64_t hidden)
    : comm_(comm),
      rank_(comm == nullptr ? 0 : comm->rank()),
      ranks_(comm == nullptr ? 1 : comm->size()),
      num_experts_(num_experts),
      hidden_(hidden) {
  // One host with mappable shared memory: the zero-copy path (shm_path.h),
  // whose send staging peers read in place.
  fused_ = comm != nullptr && ranks_ > 1 && comm->zero_copy();
  send_stage_.set_shared(fused_);
}

Status MoeBuffer::Exchange(const uint8_t* send, const std::vector<int64_t>& send_offsets, uint8_t* recv,
                           const std::vector<int64_t>& recv_offsets, size_t record_bytes, const char* what) {
  std::vector<size_t> sc(ranks_), sd(ranks_), rc(ranks_), rd(ranks_);
  for (int r = 0; r < ranks_; ++r) {
    sd[r] = static_cast<size_t>(send_offsets[r]) * record_bytes;
    sc[r] = static_cast<size_t>(send_offsets[r + 1] - send_offsets[r]) * record_bytes;
    rd[r] = static_cast<size_t>(recv_offsets[r]) * record_bytes;
    rc[r] = static_cast<size_t>(recv_offsets[r + 1] - recv_offsets[r]) * record_bytes;
    if (r != rank_) bytes_sent_ += sc[r];
  }
  if (ranks_ == 1) {
    if (sc[0] > 0) std::memcpy(recv, send, sc[0]);
    return Status::Ok();
  }
  Status st = comm_->AllToAllV(send, std::move(sc), std::move(sd), recv, std::move(rc), std::move(rd),
                               DataType::kUint8);
  if (!st.ok()) return st.WithContext(fmt::format("MoE {} (rank {} of {})", what, rank_, ranks_));
  return Status::Ok();
}

Status MoeBuffer::CheckHandle(const DispatchHandle& h) const {
  if (h.num_ranks != ranks_ || h.rank != rank_ || h.num_experts != num_experts_) {
    return InvalidArgument("MoE: the handle belongs to another group (rank {}/{}, {} experts; this buffer: {}/{}, {})",
                           h.rank, h.num_ranks, h.num_experts, rank_, ranks_, num_experts_);
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const DispatchHandle>> MoeBuffer::Layout(std::span<const int64_t> topk_idx, int top_k,
                                                                  std::span<const float> topk_weights) {
  if (top_k < 1 || topk_idx.size() % static_cast<size_t>(top_k) != 0) {
    return InvalidArgument("MoE layout: topk_idx has {} entries, not a multiple of top_k {}", topk_idx.size(), top_k);
  }
  if (!topk_weights.empty() && topk_weights.size() != topk_idx.size()) {
    return InvalidArgument("MoE layout: topk_weights has {} entries, topk_idx {}", topk_weights.size(),
                           topk_idx.size());
  }
  const int64_t tokens = static_cast<int64_t>(topk_idx.size() / top_k);
  TESSERA_ASSIGN_OR_RETURN(DispatchLayout layout,
                           GetDispatchLayout(topk_idx, tokens, top_k, num_experts_, ranks_));
  auto h = std::make_shared<DispatchHandle>();
  h->rank = rank_;
  h->num_ranks = ranks_;
  h->num_experts = num_experts_;
  h->local_experts = num_experts_ / ranks_;
  h->top_k = top_k;
  h->num_tokens = tokens;
  const int local = h->local_experts;

  // Send side: tokens per destination, in token order.
  h->send_offsets.assign(ranks_ + 1, 0);
  for (int r = 0; r < ranks_; ++r) h->send_offsets[r + 1] = h->send_offsets[r] + layout.tokens_per_rank[r];
  h->send_tokens.resize(static_cast<size_t>(h->send_offsets[ranks_]));
  {
    std::vector<int64_t> cursor(h->send_offsets.begin(), h->send_offsets.end() - 1);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int r = 0; r < ranks_; ++r) {
        if (layout.token_in_rank[static_cast<size_t>(t) * ranks_ + r]) h->send_tokens[cursor[r]++] = t;
      }
    }
  }

  // Round trip 1: how many tokens every rank sends every rank, and how
  // many choices of every expert it makes.
  const size_t per_rank = static_cast<size_t>(ranks_ + num_experts_);
  std::vector<int64_t> mine(per_rank), all(per_rank * ranks_);
  std::copy(layout.tokens_per_rank.begin(), layout.tokens_per_rank.end(), mine.begin());
  std::copy(layout.tokens_per_expert.begin(), layout.tokens_per_expert.end(), mine.begin() + ranks_);
  if (ranks_ == 1) {
    all = mine;
  } else {
    Status st = comm_->AllGather(mine.data(), all.data(), per_rank, DataType::kInt64);
    if (!st.ok()) return st.WithContext(fmt::format("MoE layout counts (rank {} of {})", rank_, ranks_));
  }
  h->counts_to.resize(static_cast<size_t>(ranks_) * ranks_);
  h->expert_choices.resize(static_cast<size_t>(ranks_) * num_experts_);
  for (int s = 0; s < ranks_; ++s) {
    std::copy_n(&all[s * per_rank], ranks_, &h->counts_to[static_cast<size_t>(s) * ranks_]);
    std::copy_n(&all[s * per_rank + ranks_], num_experts_, &h->expert_choices[static_cast<size_t>(s) * num_experts_]);
  }
  // Where each of this rank's choices lands: expert e's rows on its rank
  // start after the lower local experts' rows (from every source), then
  // the lower sources' choices of e, then this rank's earlier ones.
  {
    std::vector<int64_t> next(num_experts_);
    for (int e = 0; e < num_experts_; ++e) {
      const int r = e / local;
      int64_t at = 0;
      for (int e2 = r * local; e2 < e; ++e2) {
        for (int s = 0; s < ranks_; ++s) at += h->expert_choices[static_cast<size_t>(s) * num_experts_ + e2];
      }
      for (int s = 0; s < rank_; ++s) at += h->expert_choices[static_cast<size_t>(s) * num_experts_ + e];
      next[e] = at;
    }
    h->remote_rows.assign(topk_idx.size(), -1);
    for (size_t c = 0; c < topk_idx.size(); ++c) {
      if (topk_idx[c] >= 0) h->remote_rows[c] = next[topk_idx[c]]++;
    }
    h->topk_idx.assign(topk_idx.begin(), topk_idx.end());
    h->topk_weights.assign(topk_weights.begin(), topk_weights.end());
    if (h->topk_weights.empty()) h->topk_weights.assign(topk_idx.size(), 1.0f);
  }
  h->recv_offsets.assign(ranks_ + 1, 0);
  for (int s = 0; s < ranks_; ++s) {
    h->recv_offsets[s + 1] = h->recv_offsets[s] + h->counts_to[static_cast<size_t>(s) * ranks_ + rank_];
  }

  // Round trip 2: each sent token's index and choices as its destination
  // sees them: [int64 token][top_k x ChoiceMeta].
  const size_t meta_bytes = 8 + sizeof(ChoiceMeta) * static_cast<size_t>(top_k);
  TESSERA_ASSIGN_OR_RETURN(uint8_t * send_meta, send_stage_.Get(h->num_sent_tokens() * meta_bytes));
  TESSERA_ASSIGN_OR_RETURN(uint8_t * recv_meta, recv_stage_.Get(h->num_recv_tokens() * meta_bytes));
  for (int r = 0; r < ranks_; ++r) {
    for (int64_t i = h->send_offsets[r]; i < h->send_offsets[r + 1]; ++i) {
      const int64_t t = h->send_tokens[i];
      std::memcpy(send_meta + i * meta_bytes, &t, 8);
      auto* m = reinterpret_cast<ChoiceMeta*>(send_meta + i * meta_bytes + 8);
      for (int j = 0; j < top_k; ++j) {
        const int64_t e = topk_idx[t * top_k + j];
        m[j].local_expert = e >= 0 && e / local == r ? static_cast<int32_t>(e % local) : -1;
        m[j].weight = topk_weights.empty() ? 1.0f : topk_weights[t * top_k + j];
      }
    }
  }
  TESSERA_RETURN_IF_ERROR(Exchange(send_meta, h->send_offsets, recv_meta, h->recv_offsets, meta_bytes, "layout"));

  // Rows: grouped by local expert, then source, then the source's order.
  const int64_t received = h->num_recv_tokens();
  std::vector<int64_t> per_expert_source(static_cast<size_t>(local) * ranks_, 0);
  for (int s = 0; s < ranks_; ++s) {
    for (int64_t i = h->recv_offsets[s]; i < h->recv_offsets[s + 1]; ++i) {
      const auto* m = reinterpret_cast<const ChoiceMeta*>(recv_meta + i * meta_bytes + 8);
      for (int j = 0; j < top_k; ++j) {
        const int32_t le = m[j].local_expert;
        if (le < -1 || le >= local) {
          return Internal("MoE layout: rank {} sent local expert {} (of {})", s, le, local);
        }
        if (le >= 0) ++per_expert_source[static_cast<size_t>(le) * ranks_ + s];
      }
    }
  }
  h->expert_offsets.assign(local + 1, 0);
  std::vector<int64_t> cursor(per_expert_source.size());
  int64_t at = 0;
  for (int j = 0; j < local; ++j) {
    for (int s = 0; s < ranks_; ++s) {
      cursor[static_cast<size_t>(j) * ranks_ + s] = at;
      at += per_expert_source[static_cast<size_t>(j) * ranks_ + s];
    }
    h->expert_offsets[j + 1] = at;
  }
  h->row_weights.resize(static_cast<size_t>(at));
  h->row_offsets.assign(received + 1, 0);
  h->recv_src_tokens.resize(static_cast<size_t>(received));
  h->rows_of.reserve(static_cast<size_t>(at));
  h->choice_of.reserve(static_cast<size_t>(at));
  for (int s = 0; s < ranks_; ++s) {
    for (int64_t i = h->recv_offsets[s]; i < h->recv_offsets[s + 1]; ++i) {
      std::memcpy(&h->recv_src_tokens[i], recv_meta + i * meta_bytes, 8);
      if (h->recv_src_tokens[i] < 0) return Internal("MoE layout: rank {} sent token index {}", s, h->recv_src_tokens[i]);
      const auto* m = reinterpret_cast<const ChoiceMeta*>(recv_meta + i * meta_bytes + 8);
      for (int j = 0; j < top_k; ++j) {
        if (m[j].local_expert < 0) continue;
        const int64_t row = cursor[static_cast<size_t>(m[j].local_expert) * ranks_ + s]++;
        h->rows_of.push_back(row);
        h->choice_of.push_back(j);
        h->row_weights[row] = m[j].weight;
      }
      h->row_offsets[i + 1] = static_cast<int64_t>(h->rows_of.size());
    }
  }
  h->layout = std::move(layout);
  return std::shared_ptr<const DispatchHandle>(std::move(h));
}

Status MoeBuffer::Dispatch(const DispatchHandle& h, const void* x, DataType dtype, Payload payload, void* recv_x) {
  TESSERA_RETURN_IF_ERROR(CheckHandle(h));
  TESSERA_RETURN_IF_ERROR(CheckDtype(dtype, payload, "dispatch"));
  const size_t row_bytes = RowBytes(payload, hidden_);
  const size_t elem_row = static_cast<size_t>(hidden_) * DataTypeSize(dtype);
  if (Fused()) {
    // Each token written once into the shared staging (as is, or encoded),
    // however many ranks read it.
    const bool exact = IsExact(payload, dtype);
    const size_t stride = exact ? elem_row : row_bytes;
    const size_t stage_bytes = std::max<size_t>(1, static_cast<size_t>(h.num_tokens) * stride);
    TESSERA_ASSIGN_OR_RETURN(uint8_t * stage, send_stage_.Get(stage_bytes));
    const auto* xb = static_cast<const uint8_t*>(x);
    if (exact) {
      if (h.num_tokens > 0) std::memcpy(stage, xb, static_cast<size_t>(h.num_tokens) * stride);
    } else {
      std::vector<uint8_t> done(static_cast<size_t>(h.num_tokens), 0);
      for (int64_t t : h.send_tokens) {
        if (done[t]) continue;
        done[t] = 1;
        EncodeRow(payload, xb + t * elem_row, dtype, hidden_, stage + t * row_bytes);
      }
    }
    for (int r = 0; r < ranks_; ++r) {
      if (r != rank_) bytes_sent_ += static_cast<uint64_t>(h.send_offsets[r + 1] - h.send_offsets[r]) * row_bytes;
    }
    auto* out = static_cast<uint8_t*>(recv_x);
    Status st = comm_->RunCustom("moe_dispatch", [&](algo::AlgoEnv& env) {
      return shm_path::Dispatch(env, h, stage, stride, stage_bytes, exact, payload, dtype, hidden_, out);
    });
    if (!st.ok()) return st.WithContext(fmt::format("MoE dispatch (rank {} of {})", rank_, ranks_));
    return Status::Ok();
  }
  TESSERA_ASSIGN_OR_RETURN(uint8_t * send, send_stage_.Get(h.num_sent_tokens() * row_bytes));
  TESSERA_ASSIGN_OR_RETURN(uint8_t * recv, recv_stage_.Get(h.num_recv_tokens() * row_bytes));
  const auto* xb = static_cast<const uint8_t*>(x);
  for (int64_t i = 0; i < h.num_sent_tokens(); ++i) {
    EncodeRow(payload, xb + h.send_tokens[i] * elem_row, dtype, hidden_, send + i * row_bytes);
  }
  TESSERA_RETURN_IF_ERROR(Exchange(send, h.send_offsets, recv, h.recv_offsets, row_bytes, "dispatch"));
  auto* out = static_cast<uint8_t*>(recv_x);
  for (int64_t i = 0; i < h.num_recv_tokens(); ++i) {
    const int64_t first = h.row_offsets[i], last = h.row_offsets[i + 1];
    if (first == last) continue;
    uint8_t* row0 = out + h.rows_of[first] * elem_row;
    DecodeRow(payload, recv + i * row_bytes, hidden_, dtype, row0);
    for (int64_t k = first + 1; k < last; ++k) std::memcpy(out + h.rows_of[k] * elem_row, row0, elem_row);
  }
  return Status::Ok();
}

Status MoeBuffer::Combine(const DispatchHandle& h, const void* y, DataType dtype, const float* row_weights,
                          Payload payload, void* out) {
  TESSERA_RETURN_IF_ERROR(CheckHandle(h));
  TESSERA_RETURN_IF_ERROR(CheckDtype(dtype, payload, "combine"));
  const size_t row_bytes = RowBytes(payload, hidden_);
  const size_t h_sz = static_cast<size_t>(hidden_);
  const size_t elem_row = h_sz * DataTypeSize(dtype);
  TESSERA_ASSIGN_OR_RETURN(uint8_t * send, send_stage_.Get(h.num_recv_tokens() * row_bytes));
  acc_.resize(std::max(h_sz, static_cast<size_t>(h.num_tokens) * h_sz));
  partial_.resize(h_sz);
  // Expert side: one partial sum per received token, its rows in choice
  // order (with an fp32 payload summed straight into the staging).
  const auto* yb = static_cast<const uint8_t*>(y);
  for (int64_t i = 0; i < h.num_recv_tokens(); ++i) {
    uint8_t* dst = send + i * row_bytes;
    float* partial = payload == Payload::kFloat32 ? reinterpret_cast<float*>(dst) : partial_.data();
    std::fill(partial, partial + h_sz, 0.0f);
    for (int64_t k = h.row_offsets[i]; k < h.row_offsets[i + 1]; ++k) {
      const int64_t row = h.rows_of[k];
      AccumulateWeighted(yb + row * elem_row, dtype, row_weights != nullptr ? row_weights[row] : 1.0f, hidden_,
                         partial);
    }
    if (payload != Payload::kFloat32) EncodeRow(payload, partial, DataType::kFloat32, hidden_, dst);
  }
  // Source side: partial sums in rank order.
  float* sum = dtype == DataType::kFloat32 ? static_cast<float*>(out) : acc_.data();
  stored_.assign(static_cast<size_t>(h.num_tokens), 0);
  if (Fused()) {
    for (int r = 0; r < ranks_; ++r) {
      if (r != rank_) bytes_sent_ += static_cast<uint64_t>(h.recv_offsets[r + 1] - h.recv_offsets[r]) * row_bytes;
    }
    Status st = comm_->RunCustom("moe_combine", [&](algo::AlgoEnv& env) {
      return shm_path::Combine(env, h, send, payload, hidden_, stored_, sum);
    });
    if (!st.ok()) return st.WithContext(fmt::format("MoE combine (rank {} of {})", rank_, ranks_));
  } else {
    TESSERA_ASSIGN_OR_RETURN(uint8_t * recv, recv_stage_.Get(h.num_sent_tokens() * row_bytes));
    TESSERA_RETURN_IF_ERROR(Exchange(send, h.recv_offsets, recv, h.send_offsets, row_bytes, "combine"));
    for (int64_t i = 0; i < h.num_sent_tokens(); ++i) {
      StoreOrAccumulate(payload, recv + i * row_bytes, hidden_, h.send_tokens[i], stored_, sum);
    }
  }
  FillUnstored(stored_, hidden_, sum);
  StoreFloats(sum, h.num_tokens * hidden_, dtype, out);
  return Status::Ok();
}

Status MoeBuffer::CombineGated(const DispatchHandle& h, const void* y, DataType dtype, bool gates, Payload payload,
                               void* out) {
  return Combine(h, y, dtype, gates ? h.row_weights.data() : nullptr, payload, out);
}

Status MoeBuffer::ReturnScalars(const DispatchHandle& h, const float* per_row, float* out) {
  TESSERA_RETURN_IF_ERROR(CheckHandle(h));
  const size_t record = sizeof(float) * static_cast<size_t>(h.top_k);
  TESSERA_ASSIGN_OR_RETURN(uint8_t * send, send_stage_.Get(h.num_recv_tokens() * record));
  TESSERA_ASSIGN_OR_RETURN(uint8_t * recv, recv_stage_.Get(h.num_sent_tokens() * record));
  for (int64_t i = 0; i < h.num_recv_tokens(); ++i) {
    auto* v = reinterpret_cast<float*>(send + i * record);
    std::fill(v, v + h.top_k, 0.0f);
    for (int64_t k = h.row_offsets[i]; k < h.row_offsets[i + 1]; ++k) v[h.choice_of[k]] = per_row[h.rows_of[k]];
  }
  TESSERA_RETURN_IF_ERROR(Exchange(send, h.recv_offsets, recv, h.send_offsets, record, "return scalars"));
  std::fill(out, out + h.num_tokens * h.top_k, 0.0f);
  for (int64_t i = 0; i < h.num_sent_tokens(); ++i) {
    const auto* v = reinterpret_cast<const float*>(recv + i * record);
    float* o = out + h.send_tokens[i] * h.top_k;
    for (int j = 0; j < h.top_k; ++j) o[j] += v[j];
  }
  return Status::Ok();
}

}  // namespace tessera::comm::moe
