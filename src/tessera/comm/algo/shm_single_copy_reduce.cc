// Direct all-reduce / reduce on the shm transport for large messages (no
// staging through the windows, no barrier per chunk; two LL steps in all):
//   zero copy (shm_zero_copy.cc) when every rank's buffers are shared;
//   single copy otherwise (unless ranks outnumber the host's CPUs more than
//   2x), between processes that may read and write each
//   other's memory (transport/shm/context.h): rank r owns slice r; for each
//   cache-sized piece of it, it pulls the peers' inputs (process_vm_readv),
//   reduces them with its own input in rank order, writes the result to its
//   own output (streaming stores) and pushes it into the peers' outputs
//   (process_vm_writev, or the root's only for reduce). Every input byte is
//   read once and every output byte written once, plus the kernel's
//   read-for-ownership of the peers' outputs.
// Slices are disjoint, so in-place operation is safe: rank r is the only one
// that reads or writes slice r anywhere.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/reduce_kernels.h"
#include "tessera/comm/transport/shm/context.h"

namespace tessera::comm::algo {

Status ShmSingleCopyReduce(const CollectiveArgs& a, AlgoEnv& env, const PeerBuffers& peers) {
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  const int me = env.rank;
  const size_t elem = a.ElementSize();
  const bool reduce = a.kind == CollectiveKind::kReduce;
  const Range sl = SplitRange(a.count, n, me, 64 / elem);
  // Pieces: n inputs + the result stay in L2 (about 1 MiB).
  const size_t piece = std::clamp<size_t>((1 << 20) / (n + 1) / 4096 * 4096, 16 << 10, 256 << 10) / elem;
  uint8_t* bounce = env.scratch->Get(2, (n + 1) * piece * elem);
  uint8_t* result = bounce + n * piece * elem;
  const bool stream = StreamOutput(a, a.count * elem);
  const bool pushes = n > 1 && (!reduce || me != a.root);
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  PointerList srcs(n);
  Status st;
  for (size_t off = sl.begin; off < sl.end && st.ok(); off += piece) {
    const size_t cnt = std::min(piece, sl.end - off);
    const size_t at = off * elem, bytes = cnt * elem;
    for (int j = 0; j < n && st.ok(); ++j) {
      if (j == me) {
        srcs[j] = send + at;
        continue;
      }
      srcs[j] = bounce + j * piece * elem;
      st = shm.ReadPeer(j, bounce + j * piece * elem, reinterpret_cast<const void*>(peers.send_addr(j) + at), bytes,
                        *env.ctx);
    }
    if (!st.ok()) break;
    // One pass: the result goes to this rank's own output (streamed) and,
    // when peers need it, to the cache-resident bounce they are pushed from.
    void* dsts[2];
    int num_dsts = 0;
    uint64_t stream_mask = 0;
    if (pushes) dsts[num_dsts++] = result;
    if (!reduce || me == a.root) {
      if (stream) stream_mask |= uint64_t{1} << num_dsts;
      dsts[num_dsts++] = recv + at;
    }
    ReduceToMany(dsts, num_dsts, srcs.data(), n, cnt, a.dtype, a.op, n, stream_mask);
    for (int k = 1; k < n && pushes && st.ok(); ++k) {
      const int j = (me + k) % n;
      if (reduce && j != a.root) continue;
      st = shm.WritePeer(j, reinterpret_cast<void*>(peers.recv_addr(j) + at), result, bytes, *env.ctx);
    }
  }
  if (!st.ok()) {
    shm.PublishFailure(st);  // peers waiting in the closing step fail promptly
    return st;
  }
  return shm.LlStep(nullptr, 0, *env.ctx);
}

namespace {

bool SingleCopyReduce(const transport::shm::Context& shm, const CollectiveArgs& a, int n) {
  // Single copy pays system calls and page pinning per piece and peer; with
  // ranks crowding the cores (more than 2 per online CPU: a host-wide count,
  // the same on every rank) the windows were faster (64 MiB out of place,
  // 2-core VM, medians of 5: 2 / 4 ranks 7.0 / 15.6 ms single copy vs
  // 7.5 / 18.8 ms windows; 8 ranks 49 ms vs 28 ms; earlier 5 / 6 ranks
  // 31 / 36 ms vs 21 / 30 ms).
  static const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return shm.single_copy() && n <= 2 * cpus && PublishWords(a, n) * sizeof(uint64_t) <= shm.ll_capacity();
}

}  // namespace

std::string ShmRoute(Algorithm algo, const CollectiveArgs& a, const transport::shm::Context& shm, int n) {
  if (algo != Algorithm::kShmDirect && algo != Algorithm::kShmTwoPhase) return "";
  const size_t bytes = a.count * a.ElementSize();
  const bool publish_fits = PublishWords(a, n) * sizeof(uint64_t) <= shm.ll_capacity();
  const char* zero = shm.zero_copy() ? "zero copy if every rank's buffers are shared (AllocShared), else " : "";
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduce:
      if (shm.direct_reduce_bytes() == 0 || bytes < shm.direct_reduce_bytes()) return "";
      if (SingleCopyReduce(shm, a, n)) return std::string("direct: ") + zero + "single copy";
      return shm.zero_copy() ? std::string("direct: ") + zero + "the windows" : "";
    case CollectiveKind::kReduceScatter:
      if (!shm.zero_copy() || shm.direct_reduce_bytes() == 0 || n * bytes < shm.direct_reduce_bytes()) return "";
      return std::string("direct: ") + zero + "the windows";
    case CollectiveKind::kAllGather:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllToAllV:
      if (algo != Algorithm::kShmDirect || bytes <= shm.ll_capacity()) return "";
      if (shm.single_copy() && publish_fits) return std::string("direct: ") + zero + "single copy";
      return shm.zero_copy() ? std::string("direct: ") + zero + "the windows" : "";
    default:
      return "";
  }
}

Status ShmDirectReduce(const CollectiveArgs& a, AlgoEnv& env, bool* done) {
  *done = false;
  transport::shm::Context& shm = *env.shm;
  const size_t bytes = a.count * a.ElementSize();
  if (shm.direct_reduce_bytes() == 0 || bytes < shm.direct_reduce_bytes()) return Status::Ok();
  const bool single = SingleCopyReduce(shm, a, env.size);
  if (!single && !shm.zero_copy()) return Status::Ok();
  PeerBuffers peers;
  TESSERA_RETURN_IF_ERROR(ShmZeroCopy(a, env, done, single ? &peers : nullptr));
  if (*done || !single) return Status::Ok();
  *done = true;
  return ShmSingleCopyReduce(a, env, peers);
}

}  // namespace tessera::comm::algo
