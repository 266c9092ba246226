// shm-direct reductions (DeepSpeed-style, over the shm transport's
// double-buffered windows; see transport/shm/context.h for the step
// protocol):
//   one-shot  (ShmDirectAllReduce): per chunk, every rank copies its input
//             into its window, one barrier, then every rank reduces all n
//             windows itself (in rank order: bitwise-equal results on all
//             ranks). One barrier per chunk; each rank reads n x S bytes.
//             Best for small messages (latency bound).
//   two-phase (ShmTwoPhaseAllReduce): per chunk, rank r reduces slice r of
//             all windows (reduce-scatter) into its window's result area,
//             and after the next barrier everyone copies the other slices
//             (all-gather); the gather of chunk k, the reduction of chunk
//             k+1 and the copy-in of chunk k+2 share a step, so a chunk
//             costs one barrier. Each rank reads ~3 S and writes ~2 S bytes:
//             best for large messages (bandwidth bound).
// Both also serve kReduce (only the root gathers / reduces).
#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/reduce_kernels.h"
#include "tessera/comm/transport/shm/context.h"

namespace tessera::comm::algo {

Status ShmDirectBarrier(const CollectiveArgs&, AlgoEnv& env) { return env.shm->LlStep(nullptr, 0, *env.ctx); }

Status ShmDirectAllReduce(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  const size_t elem = a.ElementSize();
  const size_t chunk = shm.window_bytes() / elem;
  const bool output = a.kind != CollectiveKind::kReduce || env.rank == a.root;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  PointerList srcs(n);
  const bool stream = StreamOutput(a, a.count * elem);
  if (a.count * elem <= shm.ll_capacity()) {  // one low-latency step, no barrier
    if (a.count == 0) return Status::Ok();
    TESSERA_RETURN_IF_ERROR(shm.LlStep(send, a.count * elem, *env.ctx));
    if (output) {
      for (int j = 0; j < n; ++j) srcs[j] = shm.LlData(j);
      ReduceMany(recv, srcs.data(), n, a.count, a.dtype, a.op, n);
    }
    return Status::Ok();
  }
  {
    bool done = false;
    TESSERA_RETURN_IF_ERROR(ShmDirectReduce(a, env, &done));
    if (done) return Status::Ok();
  }
  for (size_t off = 0; off < a.count; off += chunk) {
    const size_t cnt = std::min(chunk, a.count - off);
    const int p = shm.NextParity();
    std::memcpy(shm.window(env.rank, p), send + off * elem, cnt * elem);
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
    if (output) {
      for (int j = 0; j < n; ++j) srcs[j] = shm.window(j, p);
      ReduceMany(recv + off * elem, srcs.data(), n, cnt, a.dtype, a.op, n, stream);
    }
  }
  return Status::Ok();
}

Status ShmTwoPhaseAllReduce(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  if (a.count == 0) return Status::Ok();
  {
    bool done = false;
    TESSERA_RETURN_IF_ERROR(ShmDirectReduce(a, env, &done));
    if (done) return Status::Ok();
  }
  const int n = env.size;
  const int me = env.rank;
  const size_t elem = a.ElementSize();
  const size_t g = 64 / elem;  // slice boundaries on cache lines
  const size_t w = shm.window_bytes();
  // Input chunk of c elements, then a result area for the largest slice.
  auto fits = [&](size_t c) {
    const size_t result_off = (c * elem + 63) / 64 * 64;
    const size_t slice_max = ((c + g - 1) / g + n - 1) / n * g;
    return result_off + slice_max * elem <= w;
  };
  size_t chunk = (w - 128) / elem * n / (n + 1) / g * g;
  while (chunk > g && !fits(chunk)) chunk -= g;
  chunk = std::max(chunk, g);
  const size_t result_off = (chunk * elem + 63) / 64 * 64;
  const size_t chunks = (a.count + chunk - 1) / chunk;
  const bool output = a.kind != CollectiveKind::kReduce || me == a.root;
  const bool stream = StreamOutput(a, a.count * elem);
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  auto chunk_count = [&](size_t k) { return std::min(chunk, a.count - k * chunk); };
  PointerList srcs(n);

  std::memcpy(shm.window(me, shm.NextParity()), send, chunk_count(0) * elem);
  TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  for (size_t k = 0; k <= chunks; ++k) {
    const int q = static_cast<int>(shm.step() & 1u);  // readable parity
    if (k > 0 && output) {  // all-gather of chunk k-1
      const size_t base = (k - 1) * chunk;
      const size_t cnt = chunk_count(k - 1);
      for (int j = 0; j < n; ++j) {
        if (j == me) continue;
        const Range sl = SplitRange(cnt, n, j, g);
        CopyOut(recv + (base + sl.begin) * elem, shm.window(j, q) + result_off, sl.size() * elem, stream);
      }
    }
    if (k == chunks) break;
    const size_t base = k * chunk;
    const size_t cnt = chunk_count(k);
    const Range sl = SplitRange(cnt, n, me, g);
    const int np = shm.NextParity();
    uint8_t* result = shm.window(me, np) + result_off;
    for (int j = 0; j < n; ++j) srcs[j] = shm.window(j, q) + sl.begin * elem;
    // One pass into the result area (peers gather it) and this rank's output.
    void* dsts[2] = {result, output ? recv + (base + sl.begin) * elem : nullptr};
    ReduceToMany(dsts, output ? 2 : 1, srcs.data(), n, sl.size(), a.dtype, a.op, n, stream ? 0b10 : 0);
    if (k + 1 < chunks) std::memcpy(shm.window(me, np), send + (base + chunk) * elem, chunk_count(k + 1) * elem);
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  }
  return Status::Ok();
}

Status ShmDirectBroadcast(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  const size_t bytes = a.count * a.ElementSize();
  const bool root = env.rank == a.root;
  const auto* src = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  if (bytes == 0) return Status::Ok();
  if (root) CopyBytes(recv, src, bytes);
  if (bytes <= shm.ll_capacity()) {
    TESSERA_RETURN_IF_ERROR(shm.LlStep(root ? src : nullptr, root ? bytes : 0, *env.ctx));
    if (!root) std::memcpy(recv, shm.LlData(a.root), bytes);
    return Status::Ok();
  }
  const bool single = shm.single_copy() && PublishWords(a, env.size) * sizeof(uint64_t) <= shm.ll_capacity();
  if (single || shm.zero_copy()) {  // zero copy, else pull the root's buffer directly (single copy)
    PeerBuffers peers;
    bool taken = false;
    TESSERA_RETURN_IF_ERROR(ShmZeroCopy(a, env, &taken, single ? &peers : nullptr));
    if (taken) return Status::Ok();
    if (single) {
      if (!root) {
        TESSERA_RETURN_IF_ERROR(shm.ReadPeer(
            a.root, recv, reinterpret_cast<const void*>(static_cast<uintptr_t>(peers.send_addr(a.root))), bytes,
            *env.ctx));
      }
      return shm.LlStep(nullptr, 0, *env.ctx);
    }
  }
  const size_t w = shm.window_bytes();
  const size_t chunks = (bytes + w - 1) / w;
  auto len = [&](size_t k) { return std::min(w, bytes - k * w); };
  if (root) std::memcpy(shm.window(a.root, shm.NextParity()), src, len(0));
  TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  for (size_t k = 0; k < chunks; ++k) {
    const int q = static_cast<int>(shm.step() & 1u);
    if (!root) CopyOut(recv + k * w, shm.window(a.root, q), len(k), StreamOutput(a, bytes));
    if (k + 1 == chunks) break;
    if (root) std::memcpy(shm.window(a.root, shm.NextParity()), src + (k + 1) * w, len(k + 1));
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  }
  return Status::Ok();
}

}  // namespace tessera::comm::algo
