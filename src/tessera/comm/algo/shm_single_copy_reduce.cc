// Direct all-reduce / reduce on the shm transport for large messages:
//   zero copy (shm_zero_copy.cc) when every rank's buffers are shared;
//   single copy otherwise (unless ranks outnumber the host's CPUs more than
//   2x), between processes that may read each other's memory
//   (transport/shm/context.h): rank r owns slice r of every chunk. Per
//   step it pulls slice r of one chunk of every peer's input
//   (process_vm_readv into a cache-sized bounce), reduces it with its own
//   input in rank order into its window and, with streaming stores, into
//   its own output; after the step's barrier every rank copies the other
//   slices straight out of the peers' windows (still in the shared cache)
//   into its output with streaming stores. The gather of chunk k and the
//   reduction of chunk k+1 share a step (double-buffered windows), so a
//   chunk costs one barrier. DRAM traffic is the 2·n·S bytes of the bound:
//   every input byte read once, every output byte written once, without the
//   read-for-ownership a kernel copy into the peers' outputs costs
//   (pushing with process_vm_writev measured 18.7 vs 16.1 ms at 4 ranks and
//   8.2 vs 6.0 ms at 2 ranks, 64 MiB, medians of 7).
// Slices are disjoint, so in-place operation is safe: peers read slice j of
// rank r's input during a step, and rank r overwrites slice j of its
// buffer only in a later step (after the barrier).
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
  const size_t g = 64 / elem;
  const bool reduce = a.kind == CollectiveKind::kReduce;
  const bool output = !reduce || me == a.root;
  // Per step, the n pulled slices stay in L2 (about 1 MiB) and the result
  // fits the window (at least a page).
  const size_t piece_bytes = std::min(shm.window_bytes() / 4096 * 4096,
                                      std::clamp<size_t>((1 << 20) / (n + 1) / 4096 * 4096, 16 << 10, 256 << 10));
  const size_t piece = piece_bytes / elem;  // a multiple of g
  const size_t chunk = piece * n;           // so every slice of a chunk is <= piece
  const size_t chunks = (a.count + chunk - 1) / chunk;
  uint8_t* bounce = env.scratch->Get(2, n * piece_bytes);
  const bool stream = StreamOutput(a, a.count * elem);
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  auto chunk_count = [&](size_t k) { return std::min(chunk, a.count - k * chunk); };
  PointerList srcs(n);
  Status st;
  for (size_t k = 0; k <= chunks && st.ok(); ++k) {
    const int q = static_cast<int>(shm.step() & 1u);  // readable parity
    if (k > 0 && output) {                            // gather chunk k-1
      const size_t base = (k - 1) * chunk;
      for (int i = 1; i < n; ++i) {
        const int j = (me + i) % n;
        const Range sl = SplitRange(chunk_count(k - 1), n, j, g);
        CopyOut(recv + (base + sl.begin) * elem, shm.window(j, q), sl.size() * elem, stream);
      }
    }
    if (k == chunks) break;
    const size_t base = k * chunk;
    const Range sl = SplitRange(chunk_count(k), n, me, g);
    const size_t at = (base + sl.begin) * elem, bytes = sl.size() * elem;
    for (int j = 0; j < n && st.ok(); ++j) {
      if (j == me) {
        srcs[j] = send + at;
        continue;
      }
      srcs[j] = bounce + j * piece_bytes;
      if (bytes > 0) {
        st = shm.ReadPeer(j, bounce + j * piece_bytes, reinterpret_cast<const void*>(peers.send_addr(j) + at), bytes,
                          *env.ctx);
      }
    }
    if (!st.ok()) break;
    void* dsts[2] = {shm.window(me, shm.NextParity()), output ? recv + at : nullptr};
    ReduceToMany(dsts, output ? 2 : 1, srcs.data(), n, sl.size(), a.dtype, a.op, n, stream ? 0b10 : 0);
    st = shm.StepBarrier(*env.ctx);
  }
  if (!st.ok()) {
    shm.PublishFailure(st);  // peers waiting in a barrier fail promptly
    return st;
  }
  return shm.LlStep(nullptr, 0, *env.ctx);
}

namespace {

bool SingleCopyReduce(const transport::shm::Context& shm, const CollectiveArgs& a, int n) {
  // Single copy pays system calls and page pinning per piece and peer; with
  // ranks crowding the cores (more than 2 per online CPU: a host-wide count,
  // the same on every rank) the windows were faster (64 MiB out of place,
  // 2-core VM, medians of 5-7: 2 / 4 ranks 6.0 / 16.1 ms single copy vs
  // 7.5 / 18.8 ms two-phase windows; 8 ranks 36 ms vs 24 ms; earlier 5 / 6
  // ranks 31 / 36 ms vs 21 / 30 ms).
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
      if (algo != Algorithm::kShmDirect || bytes <= shm.ll_capacity()) return "";
      if (shm.single_copy() && publish_fits) return std::string("direct: ") + zero + "single copy";
      return shm.zero_copy() ? std::string("direct: ") + zero + "the windows" : "";
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllToAllV: {
      // As shm_direct_data.cc decides (from this rank's sizes; the op itself
      // decides from every rank's): in place -> the windows; single copy for
      // >= 16 MiB per rank when ranks crowd the cores.
      if (algo != Algorithm::kShmDirect || bytes <= shm.ll_capacity()) return "";
      if (a.send == a.recv) return "";
      static const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
      const int64_t from = shm.alltoall_single_copy_bytes();
      const bool sized = from > 0 ? bytes * n >= static_cast<size_t>(from)
                                  : from < 0 && n > 2 * cpus && bytes * n >= (size_t{16} << 20);
      const bool single = shm.single_copy() && publish_fits && sized;
      const char* rest = single ? "single copy" : "the windows";
      return shm.zero_copy() || single ? std::string("direct: ") + zero + rest : "";
    }
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
