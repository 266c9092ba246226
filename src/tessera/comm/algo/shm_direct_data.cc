// shm-direct data movement (no reduction, except reduce-scatter): every
// rank stages its outgoing chunk(s) in its window, one barrier per chunk,
// and every rank copies what it needs straight out of its peers' windows:
// one copy in, one copy out, no intermediate hops. all-gather / gather: the
// window holds one chunk of the rank's block; reduce-scatter / all-to-all /
// scatter: the window holds one sub-chunk per destination. Staging of
// chunk k+1 overlaps the reads of chunk k (double-buffered windows).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/reduce_kernels.h"
#include "tessera/comm/transport/shm/context.h"

namespace tessera::comm::algo {
namespace {

// Per-destination sub-window bytes (a multiple of 64 and of the element).
size_t SubWindow(size_t window, int n) { return std::max<size_t>(64, window / n / 64 * 64); }

// Single copy (transport/shm/context.h): ranks publish their buffer
// addresses (and sizes) in the low-latency slot, pull what they need
// straight from the peers' user buffers, and meet again so nobody reuses a
// buffer a peer is still reading.
bool SingleCopy(const transport::shm::Context& shm, size_t words) {
  return shm.single_copy() && words * sizeof(uint64_t) <= shm.ll_capacity();
}
const uint64_t* Words(const transport::shm::Context& shm, int rank) {
  return reinterpret_cast<const uint64_t*>(shm.LlData(rank));
}
const void* Address(uint64_t word) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(word)); }
uint64_t Word(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// Pulls `bytes` at `remote` in `peer` into `dst`. Streaming: large outputs
// land with non-temporal stores (between processes through a cache-sized
// bounce buffer: the kernel's copy would read every destination line first).
Status Pull(transport::shm::Context& shm, AlgoEnv& env, int peer, uint8_t* dst, const void* remote, size_t bytes,
            bool stream) {
  if (!stream) return shm.ReadPeer(peer, dst, remote, bytes, *env.ctx);
  if (shm.SameProcess(peer)) {
    const auto* src = static_cast<const uint8_t*>(remote);
    return shm.AccessPeerInPieces(
        peer, bytes, [&](size_t off, size_t len) { CopyOut(dst + off, src + off, len, true); }, *env.ctx);
  }
  constexpr size_t kBounce = 256 << 10;
  uint8_t* bounce = env.scratch->Get(3, kBounce);
  const auto* src = static_cast<const uint8_t*>(remote);
  for (size_t off = 0; off < bytes; off += kBounce) {
    const size_t piece = std::min(kBounce, bytes - off);
    TESSERA_RETURN_IF_ERROR(shm.ReadPeer(peer, bounce, src + off, piece, *env.ctx));
    CopyOut(dst + off, bounce, piece, true);
  }
  return Status::Ok();
}

// All-to-all(v) with private buffers: single copy (pull every block with
// process_vm_readv) or the windows (copy in, barrier, copy out through the
// shared cache). Measured on the 2-core VM (64 KiB .. 64 MiB per rank, out
// of place): the windows were faster at 2 and 4 ranks at every size (4 ranks
// 1 MiB: 85 vs 145 us; 64 MiB: 9.6 vs 10.4 ms) and at 6 ranks up to 32 MiB;
// single copy only when ranks crowd the cores (8 ranks) and exchanges are
// large (16 MiB: 5.0 vs 5.6 ms, 64 MiB: 15.5-18.8 vs 20.3-22.3 ms), where
// the windows' barrier per chunk waits for descheduled ranks. Depends only
// on values every rank has after the publish step
// (TESSERA_SHM_ALLTOALL_SINGLE_COPY_KB overrides).
bool PreferSingleCopyAllToAll(const transport::shm::Context& shm, const PeerBuffers& peers, int n) {
  const int64_t from = shm.alltoall_single_copy_bytes();
  if (from == 0) return false;
  static const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  if (from < 0 && n <= 2 * cpus) return false;
  uint64_t total = 0;
  for (int j = 0; j < n; ++j) {
    for (int d = 0; d < n; ++d) total += peers.block_bytes(j, d);
  }
  return total / static_cast<uint64_t>(n) >= (from > 0 ? static_cast<uint64_t>(from) : uint64_t{16} << 20);
}

// Whether a large op takes the direct route (one LL step publishing every
// rank's buffers, then zero copy or single copy) instead of the windows.
bool Direct(const transport::shm::Context& shm, const CollectiveArgs& a, int n) {
  return shm.zero_copy() || SingleCopy(shm, PublishWords(a, n));
}

}  // namespace

Status ShmDirectAllGather(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  const size_t bytes = a.count * a.ElementSize();
  if (bytes == 0) return Status::Ok();
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  if (bytes <= shm.ll_capacity()) {
    TESSERA_RETURN_IF_ERROR(shm.LlStep(send, bytes, *env.ctx));
    for (int j = 0; j < n; ++j) {
      if (j == env.rank) {
        CopyBytes(recv + j * bytes, send, bytes);
      } else {
        std::memcpy(recv + j * bytes, shm.LlData(j), bytes);
      }
    }
    return Status::Ok();
  }
  if (Direct(shm, a, n)) {  // zero copy, else single copy from the published addresses
    PeerBuffers peers;
    bool taken = false;
    const bool single = SingleCopy(shm, PublishWords(a, n));
    TESSERA_RETURN_IF_ERROR(ShmZeroCopy(a, env, &taken, single ? &peers : nullptr));
    if (taken) return Status::Ok();
    if (single) {
      const bool stream = StreamOutput(a, n * bytes);
      CopyOut(recv + env.rank * bytes, send, bytes, stream);
      for (int k = 1; k < n; ++k) {
        const int j = (env.rank + k) % n;
        TESSERA_RETURN_IF_ERROR(Pull(shm, env, j, recv + j * bytes, Address(peers.send_addr(j)), bytes, stream));
      }
      return shm.LlStep(nullptr, 0, *env.ctx);
    }
  }
  const size_t w = shm.window_bytes();
  const size_t chunks = (bytes + w - 1) / w;
  auto len = [&](size_t k) { return std::min(w, bytes - k * w); };
  std::memcpy(shm.window(env.rank, shm.NextParity()), send, len(0));
  TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  const bool stream = StreamOutput(a, n * bytes);
  for (size_t k = 0; k < chunks; ++k) {
    const int q = static_cast<int>(shm.step() & 1u);
    for (int j = 0; j < n; ++j) {
      uint8_t* dst = recv + j * bytes + k * w;
      CopyOut(dst, j == env.rank ? send + k * w : shm.window(j, q), len(k), stream);
    }
    if (k + 1 == chunks) break;
    std::memcpy(shm.window(env.rank, shm.NextParity()), send + (k + 1) * w, len(k + 1));
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  }
  return Status::Ok();
}

Status ShmDirectReduceScatter(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  if (a.count == 0) return Status::Ok();
  const size_t elem = a.ElementSize();
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  if (n * a.count * elem <= shm.ll_capacity()) {
    TESSERA_RETURN_IF_ERROR(shm.LlStep(send, n * a.count * elem, *env.ctx));
    PointerList srcs(n);
    for (int j = 0; j < n; ++j) srcs[j] = shm.LlData(j) + env.rank * a.count * elem;
    ReduceMany(recv, srcs.data(), n, a.count, a.dtype, a.op, n);
    return Status::Ok();
  }
  // Zero copy for large messages (a single-copy pull was slower than the
  // windows here: 64 MiB, 2 / 4 / 8 ranks, 7.0 / 17.3 / 35.5 ms vs 6.7 / 15.6 / 32.8 ms).
  if (shm.zero_copy() && shm.direct_reduce_bytes() > 0 && n * a.count * elem >= shm.direct_reduce_bytes()) {
    bool taken = false;
    TESSERA_RETURN_IF_ERROR(ShmZeroCopy(a, env, &taken));
    if (taken) return Status::Ok();
  }
  const size_t sub = SubWindow(shm.window_bytes(), n);
  const size_t chunk = sub / elem;
  const size_t chunks = (a.count + chunk - 1) / chunk;
  auto cnt = [&](size_t k) { return std::min(chunk, a.count - k * chunk); };
  auto stage = [&](size_t k) {
    uint8_t* win = shm.window(env.rank, shm.NextParity());
    for (int d = 0; d < n; ++d) std::memcpy(win + d * sub, send + (d * a.count + k * chunk) * elem, cnt(k) * elem);
  };
  PointerList srcs(n);
  stage(0);
  TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  for (size_t k = 0; k < chunks; ++k) {
    const int q = static_cast<int>(shm.step() & 1u);
    for (int j = 0; j < n; ++j) srcs[j] = shm.window(j, q) + env.rank * sub;
    ReduceMany(recv + k * chunk * elem, srcs.data(), n, cnt(k), a.dtype, a.op, n, StreamOutput(a, a.count * elem));
    if (k + 1 == chunks) break;
    stage(k + 1);
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  }
  return Status::Ok();
}

Status ShmDirectAllToAll(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  const int me = env.rank;
  const size_t elem = a.ElementSize();
  const bool v = a.kind == CollectiveKind::kAllToAllV;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  auto send_off = [&](int d) { return (v ? a.send_displs[d] : d * a.count) * elem; };
  auto send_len = [&](int d) { return (v ? a.send_counts[d] : a.count) * elem; };
  auto recv_off = [&](int j) { return (v ? a.recv_displs[j] : j * a.count) * elem; };
  auto recv_len = [&](int j) { return (v ? a.recv_counts[j] : a.count) * elem; };

  // The path must not depend on anything rank-local (all ranks take it).
  const bool fits_ll = !v && n * a.count * elem <= shm.ll_capacity();
  if (!fits_ll && Direct(shm, a, n)) {
    const bool single = SingleCopy(shm, PublishWords(a, n));
    PeerBuffers peers;
    bool taken = false;
    TESSERA_RETURN_IF_ERROR(ShmZeroCopy(a, env, &taken, single ? &peers : nullptr));
    if (taken) return Status::Ok();
    // In place anywhere: peers would read blocks their owner is overwriting,
    // so the windows, which stage each chunk before anyone writes (a private
    // copy of the whole send buffer for single copy measured 5x slower:
    // 64 MiB, 2 / 4 / 8 ranks 11.5 / 23.1 / 44.7 ms vs 2.0 / 7.6 / 19.7 ms).
    // Out of place, single copy only where it was faster (above).
    if (single && !peers.any_in_place() && PreferSingleCopyAllToAll(shm, peers, n)) {
      size_t recv_total = 0;
      for (int j = 0; j < n; ++j) {  // sizes first: a mismatch fails before any copy
        if (peers.block_bytes(j, me) != recv_len(j)) {
          Status st = InvalidArgument("{}: rank {} expects {} bytes from rank {}, which sends {} bytes",
                                      env.ctx->Name(), me, recv_len(j), j, peers.block_bytes(j, me));
          return st;  // breaks the communicator: the peers fail too
        }
        recv_total = std::max(recv_total, recv_off(j) + recv_len(j));
      }
      const bool stream = StreamOutput(recv_total);
      CopyOut(recv + recv_off(me), send + send_off(me), recv_len(me), stream);
      for (int k = 1; k < n; ++k) {
        const int j = (me + k) % n;
        TESSERA_RETURN_IF_ERROR(Pull(shm, env, j, recv + recv_off(j),
                                     static_cast<const uint8_t*>(Address(peers.send_addr(j))) + peers.block_offset(j, me),
                                     recv_len(j), stream));
      }
      return shm.LlStep(nullptr, 0, *env.ctx);
    }
  }
  size_t max_bytes = a.count * elem;
  if (v) {
    // Agree on the step count and check sizes: each rank publishes its
    // per-destination byte counts.
    auto* table = reinterpret_cast<uint64_t*>(shm.window(me, shm.NextParity()));
    for (int d = 0; d < n; ++d) table[d] = send_len(d);
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
    const int q = static_cast<int>(shm.step() & 1u);
    max_bytes = 0;
    for (int j = 0; j < n; ++j) {
      const auto* t = reinterpret_cast<const uint64_t*>(shm.window(j, q));
      for (int d = 0; d < n; ++d) max_bytes = std::max<size_t>(max_bytes, t[d]);
      if (t[me] != recv_len(j)) {
        return InvalidArgument("{}: rank {} expects {} bytes from rank {}, which sends {} bytes", env.ctx->Name(), me,
                               recv_len(j), j, t[me]);
      }
    }
  }
  if (max_bytes == 0) return Status::Ok();
  if (!v && n * max_bytes <= shm.ll_capacity()) {
    TESSERA_RETURN_IF_ERROR(shm.LlStep(send, n * max_bytes, *env.ctx));
    for (int j = 0; j < n; ++j) {
      if (j == me) {
        CopyBytes(recv + recv_off(me), send + send_off(me), max_bytes);
      } else {
        std::memcpy(recv + recv_off(j), shm.LlData(j) + me * max_bytes, max_bytes);
      }
    }
    return Status::Ok();
  }
  const size_t sub = SubWindow(shm.window_bytes(), n);
  const size_t chunks = (max_bytes + sub - 1) / sub;
  auto piece = [&](size_t total, size_t k) { return k * sub >= total ? 0 : std::min(sub, total - k * sub); };
  auto stage = [&](size_t k) {
    uint8_t* win = shm.window(me, shm.NextParity());
    for (int d = 0; d < n; ++d) {
      if (d == me) continue;
      const size_t p = piece(send_len(d), k);
      if (p) std::memcpy(win + d * sub, send + send_off(d) + k * sub, p);
    }
  };
  size_t total_out = 0;
  for (int j = 0; j < n; ++j) total_out += recv_len(j);
  const bool stream = StreamOutput(a, total_out);
  // Own block moves directly (no staging).
  CopyOut(recv + recv_off(me), send + send_off(me), std::min(send_len(me), recv_len(me)), stream);
  stage(0);
  TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  for (size_t k = 0; k < chunks; ++k) {
    const int q = static_cast<int>(shm.step() & 1u);
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const size_t p = piece(recv_len(j), k);
      if (p) CopyOut(recv + recv_off(j) + k * sub, shm.window(j, q) + me * sub, p, stream);
    }
    if (k + 1 == chunks) break;
    stage(k + 1);
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  }
  return Status::Ok();
}

Status ShmDirectGather(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  const size_t bytes = a.count * a.ElementSize();
  if (bytes == 0) return Status::Ok();
  const bool root = env.rank == a.root;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  if (root) CopyBytes(recv + a.root * bytes, send, bytes);
  if (bytes <= shm.ll_capacity()) {
    TESSERA_RETURN_IF_ERROR(shm.LlStep(root ? nullptr : send, root ? 0 : bytes, *env.ctx));
    if (root) {
      for (int j = 0; j < n; ++j) {
        if (j != a.root) std::memcpy(recv + j * bytes, shm.LlData(j), bytes);
      }
    }
    return Status::Ok();
  }
  if (SingleCopy(shm, 1)) {
    const uint64_t word = Word(send);
    shm.ExposeBuffers();  // withdrawn when the operation ends (Communicator's executor)
    TESSERA_RETURN_IF_ERROR(shm.LlStep(&word, sizeof(word), *env.ctx));
    if (root) {
      for (int k = 1; k < n; ++k) {
        const int j = (a.root + k) % n;
        TESSERA_RETURN_IF_ERROR(
            Pull(shm, env, j, recv + j * bytes, Address(Words(shm, j)[0]), bytes, StreamOutput(a, n * bytes)));
      }
    }
    return shm.LlStep(nullptr, 0, *env.ctx);
  }
  const size_t w = shm.window_bytes();
  const size_t chunks = (bytes + w - 1) / w;
  auto len = [&](size_t k) { return std::min(w, bytes - k * w); };
  if (!root) std::memcpy(shm.window(env.rank, shm.NextParity()), send, len(0));
  TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  for (size_t k = 0; k < chunks; ++k) {
    const int q = static_cast<int>(shm.step() & 1u);
    if (root) {
      for (int j = 0; j < n; ++j) {
        if (j != a.root) CopyOut(recv + j * bytes + k * w, shm.window(j, q), len(k), StreamOutput(a, n * bytes));
      }
    }
    if (k + 1 == chunks) break;
    if (!root) std::memcpy(shm.window(env.rank, shm.NextParity()), send + (k + 1) * w, len(k + 1));
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  }
  return Status::Ok();
}

Status ShmDirectScatter(const CollectiveArgs& a, AlgoEnv& env) {
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  const size_t bytes = a.count * a.ElementSize();
  if (bytes == 0) return Status::Ok();
  const bool root = env.rank == a.root;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  const size_t sub = SubWindow(shm.window_bytes(), n);
  const size_t chunks = (bytes + sub - 1) / sub;
  auto len = [&](size_t k) { return std::min(sub, bytes - k * sub); };
  auto stage = [&](size_t k) {
    uint8_t* win = shm.window(a.root, shm.NextParity());
    for (int d = 0; d < n; ++d) {
      if (d != a.root) std::memcpy(win + d * sub, send + d * bytes + k * sub, len(k));
    }
  };
  if (n * bytes <= shm.ll_capacity()) {
    if (root) CopyBytes(recv, send + a.root * bytes, bytes);
    TESSERA_RETURN_IF_ERROR(shm.LlStep(root ? send : nullptr, root ? n * bytes : 0, *env.ctx));
    if (!root) std::memcpy(recv, shm.LlData(a.root) + env.rank * bytes, bytes);
    return Status::Ok();
  }
  if (SingleCopy(shm, 1)) {
    const uint64_t word = Word(root ? send : nullptr);
    shm.ExposeBuffers();  // withdrawn when the operation ends (Communicator's executor)
    TESSERA_RETURN_IF_ERROR(shm.LlStep(&word, sizeof(word), *env.ctx));
    if (root) {
      CopyBytes(recv, send + a.root * bytes, bytes);
    } else {
      const auto* base = static_cast<const uint8_t*>(Address(Words(shm, a.root)[0]));
      TESSERA_RETURN_IF_ERROR(Pull(shm, env, a.root, recv, base + env.rank * bytes, bytes, StreamOutput(a, bytes)));
    }
    return shm.LlStep(nullptr, 0, *env.ctx);
  }
  if (root) {
    CopyBytes(recv, send + a.root * bytes, bytes);
    stage(0);
  }
  TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  for (size_t k = 0; k < chunks; ++k) {
    const int q = static_cast<int>(shm.step() & 1u);
    if (!root) CopyOut(recv + k * sub, shm.window(a.root, q) + env.rank * sub, len(k), StreamOutput(a, bytes));
    if (k + 1 == chunks) break;
    if (root) stage(k + 1);
    TESSERA_RETURN_IF_ERROR(shm.StepBarrier(*env.ctx));
  }
  return Status::Ok();
}

}  // namespace tessera::comm::algo
