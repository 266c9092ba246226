#include "tessera/comm/moe/shm_path.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "tessera/base/float16.h"
#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/transport/shm/context.h"

namespace tessera::comm::moe::shm_path {
namespace {

using transport::shm::Context;

struct Published {
  uint64_t addr = 0;
  uint64_t stride = 0;
};

// One LL step publishing (addr, stride); returns everyone's.
StatusOr<std::vector<Published>> Publish(algo::AlgoEnv& env, const void* addr, size_t stride) {
  Context& shm = *env.shm;
  const Published mine{reinterpret_cast<uintptr_t>(addr), stride};
  shm.ExposeBuffers();  // withdrawn by the executor when the operation ends
  TESSERA_RETURN_IF_ERROR(shm.LlStep(&mine, sizeof(mine), *env.ctx));
  std::vector<Published> all(env.size);
  for (int r = 0; r < env.size; ++r) std::memcpy(&all[r], shm.LlData(r), sizeof(Published));
  return all;
}

void* At(uint64_t addr, size_t offset) { return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(addr)) + offset; }

}  // namespace

Status Dispatch(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* src, size_t src_row_bytes, bool exact,
                Payload payload, DataType dtype, int64_t hidden, uint8_t* out, std::vector<uint8_t>& tmp) {
  Context& shm = *env.shm;
  TESSERA_ASSIGN_OR_RETURN(std::vector<Published> pub, Publish(env, src, src_row_bytes));
  const size_t elem_row = static_cast<size_t>(hidden) * (dtype == DataType::kFloat32 ? 4 : 2);
  const size_t row_bytes = src_row_bytes;
  constexpr int64_t kChunk = 256;  // rows decoded per gather (encoded payloads)
  std::vector<iovec> local, remote;
  for (int k = 0; k < env.size; ++k) {
    const int s = (env.rank + k) % env.size;
    const int64_t first = h.recv_offsets[s], last = h.recv_offsets[s + 1];
    for (int64_t i0 = first; i0 < last; i0 += exact ? (last - first) : kChunk) {
      const int64_t i1 = exact ? last : std::min(last, i0 + kChunk);
      if (!exact) tmp.resize(static_cast<size_t>(i1 - i0) * row_bytes);
      local.clear();
      remote.clear();
      for (int64_t i = i0; i < i1; ++i) {
        if (h.row_offsets[i] == h.row_offsets[i + 1]) continue;
        uint8_t* dst = exact ? out + h.rows_of[h.row_offsets[i]] * elem_row : tmp.data() + (i - i0) * row_bytes;
        local.push_back({dst, exact ? elem_row : row_bytes});
        remote.push_back({At(pub[s].addr, static_cast<size_t>(h.recv_src_tokens[i]) * row_bytes), local.back().iov_len});
      }
      if (s == env.rank) {
        for (size_t p = 0; p < local.size(); ++p) std::memcpy(local[p].iov_base, remote[p].iov_base, local[p].iov_len);
      } else {
        TESSERA_RETURN_IF_ERROR(shm.ReadPeerGather(s, local, remote, *env.ctx));
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t a = h.row_offsets[i], b = h.row_offsets[i + 1];
        if (a == b) continue;
        uint8_t* row0 = out + h.rows_of[a] * elem_row;
        if (!exact) DecodeRow(payload, tmp.data() + (i - i0) * row_bytes, hidden, dtype, row0);
        for (int64_t m = a + 1; m < b; ++m) std::memcpy(out + h.rows_of[m] * elem_row, row0, elem_row);
      }
    }
  }
  return shm.LlStep(nullptr, 0, *env.ctx);
}

Status Combine(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* partials, Payload payload,
               int64_t hidden, float* sum, std::vector<uint8_t>& tmp) {
  Context& shm = *env.shm;
  const size_t row_bytes = RowBytes(payload, hidden);
  TESSERA_ASSIGN_OR_RETURN(std::vector<Published> pub, Publish(env, partials, row_bytes));
  const int n = env.size, me = env.rank;
  constexpr size_t kChunkBytes = 1 << 20;
  const int64_t chunk_rows = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / row_bytes));
  for (int r = 0; r < n; ++r) {  // rank order: the summation order of every path
    // This rank's block in r's receive order: after the lower sources' tokens.
    int64_t offset = 0;
    for (int s = 0; s < me; ++s) offset += h.counts_to[static_cast<size_t>(s) * n + r];
    const int64_t count = h.send_offsets[r + 1] - h.send_offsets[r];
    for (int64_t i0 = 0; i0 < count; i0 += chunk_rows) {
      const int64_t i1 = std::min(count, i0 + chunk_rows);
      const uint8_t* rows = nullptr;
      const void* remote = At(pub[r].addr, static_cast<size_t>(offset + i0) * row_bytes);
      const size_t bytes = static_cast<size_t>(i1 - i0) * row_bytes;
      if (r == me) {
        rows = static_cast<const uint8_t*>(remote);
      } else {
        tmp.resize(bytes);
        TESSERA_RETURN_IF_ERROR(shm.ReadPeer(r, tmp.data(), remote, bytes, *env.ctx));
        rows = tmp.data();
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = h.send_tokens[h.send_offsets[r] + i];
        DecodeAccumulate(payload, rows + (i - i0) * row_bytes, hidden, sum + t * hidden);
      }
    }
  }
  return shm.LlStep(nullptr, 0, *env.ctx);
}

Status CombineRows(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* y, DataType dtype,
                   const float* weights, int64_t hidden, float* sum, std::vector<uint8_t>& tmp) {
  Context& shm = *env.shm;
  const size_t elem = dtype == DataType::kFloat32 ? 4 : 2;
  const size_t elem_row = static_cast<size_t>(hidden) * elem;
  TESSERA_ASSIGN_OR_RETURN(std::vector<Published> pub, Publish(env, y, elem_row));
  const int k = h.top_k, local = h.local_experts;
  const size_t chunk_rows = std::max<size_t>(1, (256u << 10) / elem_row);
  // A token's picks on one rank, in its choice order: the grouping of the
  // sums is the one of the exchange path and of the low-latency mode (a
  // partial sum per token and rank, then the partials in rank order), so
  // every path gives the same bits.
  struct Pick {
    int64_t token, row;
    float weight;
  };
  std::vector<Pick> picks;
  std::vector<size_t> token_start;  // picks of the i-th token: [token_start[i], token_start[i+1])
  std::vector<iovec> li, ri;
  std::vector<float> partial(static_cast<size_t>(hidden));
  for (int r = 0; r < env.size; ++r) {
    picks.clear();
    token_start.clear();
    for (int64_t i = h.send_offsets[r]; i < h.send_offsets[r + 1]; ++i) {
      const int64_t t = h.send_tokens[i];
      token_start.push_back(picks.size());
      for (int j = 0; j < k; ++j) {
        const int64_t e = h.topk_idx[t * k + j];
        if (e < 0 || e / local != r) continue;
        picks.push_back({t, h.remote_rows[t * k + j], weights != nullptr ? weights[t * k + j] : 1.0f});
      }
    }
    token_start.push_back(picks.size());
    const size_t tokens = token_start.size() - 1;
    for (size_t t0 = 0; t0 < tokens;) {
      size_t t1 = t0 + 1;  // whole tokens, about chunk_rows rows
      while (t1 < tokens && token_start[t1 + 1] - token_start[t0] <= chunk_rows) ++t1;
      const size_t p0 = token_start[t0], p1 = token_start[t1];
      const uint8_t* rows = y;  // own rows, read in place
      if (r != env.rank) {
        tmp.resize((p1 - p0) * elem_row);
        li.clear();
        ri.clear();
        for (size_t p = p0; p < p1; ++p) {
          li.push_back({tmp.data() + (p - p0) * elem_row, elem_row});
          ri.push_back({At(pub[r].addr, static_cast<size_t>(picks[p].row) * elem_row), elem_row});
        }
        TESSERA_RETURN_IF_ERROR(shm.ReadPeerGather(r, li, ri, *env.ctx));
        rows = tmp.data();
      }
      for (size_t t = t0; t < t1; ++t) {
        std::fill(partial.begin(), partial.end(), 0.0f);
        for (size_t p = token_start[t]; p < token_start[t + 1]; ++p) {
          const uint8_t* row = r == env.rank ? rows + picks[p].row * elem_row : rows + (p - p0) * elem_row;
          const float w = picks[p].weight;
          if (dtype == DataType::kFloat32) {
            const float* v = reinterpret_cast<const float*>(row);
            for (int64_t c = 0; c < hidden; ++c) {
              const float prod = v[c] * w;
              partial[c] += prod;
            }
          } else {
            const uint16_t* v = reinterpret_cast<const uint16_t*>(row);
            const bool b = dtype == DataType::kBFloat16;
            for (int64_t c = 0; c < hidden; ++c) {
              const float prod = (b ? bf16::FromBits(v[c]).ToFloat() : fp16::FromBits(v[c]).ToFloat()) * w;
              partial[c] += prod;
            }
          }
        }
        if (token_start[t + 1] == token_start[t]) continue;
        float* acc = sum + picks[token_start[t]].token * hidden;
        for (int64_t c = 0; c < hidden; ++c) acc[c] += partial[c];
      }
      t0 = t1;
    }
  }
  return shm.LlStep(nullptr, 0, *env.ctx);
}

Status PullBlocks(algo::AlgoEnv& env, const uint8_t* blocks, size_t block_bytes, size_t record_bytes,
                  int64_t max_records, uint8_t* recv) {
  Context& shm = *env.shm;
  TESSERA_ASSIGN_OR_RETURN(std::vector<Published> pub, Publish(env, blocks, block_bytes));
  for (int k = 0; k < env.size; ++k) {
    const int s = (env.rank + k) % env.size;
    uint8_t* dst = recv + static_cast<size_t>(s) * block_bytes;
    const void* remote = At(pub[s].addr, static_cast<size_t>(env.rank) * block_bytes);
    int64_t count = 0;
    if (s == env.rank) {
      std::memcpy(&count, remote, sizeof(count));
    } else {
      TESSERA_RETURN_IF_ERROR(shm.ReadPeer(s, dst, remote, 16, *env.ctx));
      std::memcpy(&count, dst, sizeof(count));
    }
    if (count < 0 || count > max_records) {
      return Internal("{}: rank {} announced {} records (at most {})", env.ctx->Name(), s, count, max_records);
    }
    const size_t bytes = 16 + static_cast<size_t>(count) * record_bytes;
    if (s == env.rank) {
      std::memcpy(dst, remote, bytes);
    } else if (count > 0) {
      TESSERA_RETURN_IF_ERROR(shm.ReadPeer(s, dst + 16, At(pub[s].addr, static_cast<size_t>(env.rank) * block_bytes + 16),
                                           bytes - 16, *env.ctx));
    }
  }
  return shm.LlStep(nullptr, 0, *env.ctx);
}

}  // namespace tessera::comm::moe::shm_path
