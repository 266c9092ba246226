#include "tessera/comm/moe/shm_path.h"

#include <algorithm>
#include <cstring>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/transport/shm/context.h"
#include "tessera/comm/transport/shm/shared_memory.h"

namespace tessera::comm::moe::shm_path {

using transport::shm::SharedRef;

Status PeerViews::Open(const void* mine, size_t bytes) {
  transport::shm::Context& shm = *env_.shm;
  const int n = env_.size;
  SharedRef ref;
  if (!transport::shm::FindShared(mine, bytes, &ref)) {
    return Internal("{}: the MoE staging ({} bytes) is not shared memory", env_.ctx->Name(), bytes);
  }
  ref.addr = reinterpret_cast<uintptr_t>(mine);
  const uint64_t words[SharedRef::kWords] = {ref.id, ref.fd, ref.bytes, ref.offset, ref.addr};
  shm.ExposeBuffers();  // withdrawn by the executor when the operation ends
  TESSERA_RETURN_IF_ERROR(shm.LlStep(words, sizeof(words), *env_.ctx));
  std::vector<SharedRef> refs(n);
  for (int r = 0; r < n; ++r) {  // LlData is valid only until the next LL step: copy first
    uint64_t w[SharedRef::kWords];
    std::memcpy(w, shm.LlData(r), sizeof(w));
    refs[r] = SharedRef{w[0], w[1], w[2], w[3], w[4]};
  }
  base_.assign(n, nullptr);
  for (int r = 0; r < n; ++r) {
    if (r == env_.rank) {
      base_[r] = static_cast<const uint8_t*>(mine);
      continue;
    }
    StatusOr<uint8_t*> p = shm.MapShared(r, refs[r], *env_.ctx);
    if (!p.ok()) {
      shm.PublishFailure(p.status());  // peers waiting in the closing step fail promptly
      return p.status();
    }
    TESSERA_RETURN_IF_ERROR(shm.EnterPeer(r, *env_.ctx));
    entered_.push_back(r);
    base_[r] = *p;
  }
  return Status::Ok();
}

void PeerViews::Leave() {
  for (int r : entered_) env_.shm->LeavePeer(r);
  entered_.clear();
}

Status PeerViews::Close() {
  Leave();
  return env_.shm->LlStep(nullptr, 0, *env_.ctx);
}

Status Dispatch(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* src, size_t src_row_bytes, size_t src_bytes,
                bool exact, Payload payload, DataType dtype, int64_t hidden, uint8_t* out) {
  PeerViews views(env);
  TESSERA_RETURN_IF_ERROR(views.Open(src, src_bytes));
  const size_t elem_row = static_cast<size_t>(hidden) * DataTypeSize(dtype);
  const bool stream = algo::StreamOutput(static_cast<size_t>(h.num_recv_rows()) * elem_row);
  for (int k = 0; k < env.size; ++k) {  // start at a different source on every rank
    const int s = (env.rank + k) % env.size;
    const uint8_t* base = views.at(s);
    for (int64_t i = h.recv_offsets[s]; i < h.recv_offsets[s + 1]; ++i) {
      const int64_t a = h.row_offsets[i], b = h.row_offsets[i + 1];
      if (a == b) continue;
      const uint8_t* row = base + static_cast<size_t>(h.recv_src_tokens[i]) * src_row_bytes;
      if (exact) {
        for (int64_t m = a; m < b; ++m) algo::CopyOut(out + h.rows_of[m] * elem_row, row, elem_row, stream);
        continue;
      }
      uint8_t* row0 = out + h.rows_of[a] * elem_row;
      DecodeRow(payload, row, hidden, dtype, row0);
      for (int64_t m = a + 1; m < b; ++m) std::memcpy(out + h.rows_of[m] * elem_row, row0, elem_row);
    }
  }
  return views.Close();
}

Status Combine(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* partials, Payload payload, int64_t hidden,
               std::vector<uint8_t>& stored, float* sum) {
  const size_t row_bytes = RowBytes(payload, hidden);
  PeerViews views(env);
  TESSERA_RETURN_IF_ERROR(views.Open(partials, std::max<size_t>(1, h.num_recv_tokens() * row_bytes)));
  const int n = env.size, me = env.rank;
  for (int r = 0; r < n; ++r) {  // rank order: the summation order of every path
    // This rank's block in r's receive order: after the lower sources' tokens.
    int64_t offset = 0;
    for (int s = 0; s < me; ++s) offset += h.counts_to[static_cast<size_t>(s) * n + r];
    const uint8_t* rows = views.at(r) + static_cast<size_t>(offset) * row_bytes;
    for (int64_t i = h.send_offsets[r]; i < h.send_offsets[r + 1]; ++i) {
      const int64_t t = h.send_tokens[i];
      StoreOrAccumulate(payload, rows + static_cast<size_t>(i - h.send_offsets[r]) * row_bytes, hidden, t, stored, sum);
    }
  }
  return views.Close();
}

}  // namespace tessera::comm::moe::shm_path
