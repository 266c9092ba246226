// Zero-copy collectives over shared buffers (transport/shm/shared_memory.h).
// When the buffers every rank passes lie in memory from AllocShared, ranks
// map each other's buffers (shm::Context::MapShared, cached) and move data
// in one pass, with no staging through the windows:
//   all-reduce / reduce: rank r reduces slice r of every rank's input and
//     writes it into every rank's output (the root's only, for reduce): each
//     rank reads S and writes S bytes, 2·n·S in all -- the least memory
//     traffic an out-of-place all-reduce can have;
//   reduce-scatter: rank r reduces block r of every input into its output;
//   all-gather / broadcast / all-to-all(v): every rank copies what it needs
//     straight out of the peers' inputs into its output.
// Protocol: one LL step publishes every rank's buffer references and plain
// addresses (it is a barrier: every input is ready), each rank maps and
// moves its part, and a closing LL step keeps every buffer untouched until
// all ranks are done. A rank whose buffers are not shared publishes that in
// the first step, and then every rank returns not-taken and the caller runs
// its copying path (the decision is the same on all ranks), a single-copy
// one using the published addresses (PeerBuffers).
#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/base/check.h"
#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/reduce_kernels.h"
#include "tessera/comm/transport/shm/context.h"

namespace tessera::comm::algo {
namespace {

using transport::shm::SharedRef;

// Published words: [0] bit 0 set if this rank's buffers qualify, bit 1 if
// its all-to-all is in place (send and recv overlap), then the send and
// recv references (addr: the plain address, shared or not), then
// (all-to-all) per destination the byte offset and length of its block in
// the send buffer.
constexpr uint64_t kQualifies = 1, kInPlace = 2;
constexpr int kSendAt = 1;
constexpr int kRecvAt = kSendAt + SharedRef::kWords;
constexpr int kBlocksAt = kRecvAt + SharedRef::kWords;

void PutRef(uint64_t* w, const SharedRef& r) {
  w[0] = r.id;
  w[1] = r.fd;
  w[2] = r.bytes;
  w[3] = r.offset;
  w[4] = r.addr;
}
SharedRef GetRef(const uint64_t* w) { return SharedRef{w[0], w[1], w[2], w[3], w[4]}; }

bool Overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

struct Plan {
  size_t send_bytes = 0;  // this rank's send buffer extent peers read (0: none)
  size_t recv_bytes = 0;  // this rank's recv buffer extent peers write (0: none)
  bool supported = true;
  bool in_place = false;  // all-to-all whose send and recv overlap
};

Plan PlanFor(const CollectiveArgs& a, int rank, int n) {
  const size_t elem = a.ElementSize();
  const size_t bytes = a.count * elem;
  Plan p;
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
      p.send_bytes = bytes;
      p.recv_bytes = bytes;
      break;
    case CollectiveKind::kReduce:
      p.send_bytes = bytes;
      p.recv_bytes = rank == a.root ? bytes : 0;
      break;
    case CollectiveKind::kReduceScatter:
      p.send_bytes = bytes * n;
      break;
    case CollectiveKind::kAllGather:
      p.send_bytes = bytes;
      break;
    case CollectiveKind::kBroadcast:
      p.send_bytes = rank == a.root ? bytes : 0;
      break;
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllToAllV: {
      const bool v = a.kind == CollectiveKind::kAllToAllV;
      size_t send_total = 0, recv_total = 0;
      for (int d = 0; d < n; ++d) {
        send_total = std::max(send_total, (v ? a.send_displs[d] + a.send_counts[d] : (d + 1) * a.count) * elem);
        recv_total = std::max(recv_total, (v ? a.recv_displs[d] + a.recv_counts[d] : (d + 1) * a.count) * elem);
      }
      p.send_bytes = send_total;
      // In place: peers would read blocks this rank is overwriting.
      p.in_place = Overlaps(a.send, send_total, a.recv, recv_total);
      if (p.in_place) p.supported = false;
      break;
    }
    default:
      p.supported = false;
  }
  return p;
}

// The same-process peers this rank is inside (left on scope exit).
class PeersEntered {
 public:
  explicit PeersEntered(const transport::shm::Context& shm) : shm_(shm) {}
  ~PeersEntered() {
    for (int j : entered_) shm_.LeavePeer(j);
  }
  PeersEntered(const PeersEntered&) = delete;
  PeersEntered& operator=(const PeersEntered&) = delete;
  Status Enter(int peer, const transport::OpContext& ctx) {
    TESSERA_RETURN_IF_ERROR(shm_.EnterPeer(peer, ctx));
    entered_.push_back(peer);
    return Status::Ok();
  }

 private:
  const transport::shm::Context& shm_;
  std::vector<int> entered_;
};

bool IsAllToAll(const CollectiveArgs& a) {
  return a.kind == CollectiveKind::kAllToAll || a.kind == CollectiveKind::kAllToAllV;
}

}  // namespace

bool PeerBuffers::any_in_place() const {
  for (size_t i = 0; i < words_.size(); i += stride_) {
    if ((words_[i] & kInPlace) != 0) return true;
  }
  return false;
}
uint64_t PeerBuffers::send_addr(int rank) const { return words_[rank * stride_ + kSendAt + 4]; }
uint64_t PeerBuffers::recv_addr(int rank) const { return words_[rank * stride_ + kRecvAt + 4]; }
uint64_t PeerBuffers::block_offset(int rank, int dest) const { return words_[rank * stride_ + kBlocksAt + 2 * dest]; }
uint64_t PeerBuffers::block_bytes(int rank, int dest) const {
  return words_[rank * stride_ + kBlocksAt + 2 * dest + 1];
}

size_t PublishWords(const CollectiveArgs& a, int n) {
  return kBlocksAt + (IsAllToAll(a) ? 2 * static_cast<size_t>(n) : 0);
}

Status ShmZeroCopy(const CollectiveArgs& a, AlgoEnv& env, bool* taken, PeerBuffers* peers) {
  *taken = false;
  transport::shm::Context& shm = *env.shm;
  const int n = env.size;
  const int me = env.rank;
  const bool all_to_all = IsAllToAll(a);
  const size_t words_needed = PublishWords(a, n);
  const bool fits = words_needed * sizeof(uint64_t) <= shm.ll_capacity();
  TESSERA_CHECK(fits || peers == nullptr, "{} words do not fit the LL slot", words_needed);
  if (!fits || (!shm.zero_copy() && peers == nullptr)) return Status::Ok();

  const Plan plan = PlanFor(a, me, n);
  std::vector<uint64_t> words(words_needed, 0);
  SharedRef send_ref, recv_ref;
  bool ok = shm.zero_copy() && plan.supported;
  if (ok && plan.send_bytes > 0) ok = FindShared(a.send, plan.send_bytes, &send_ref);
  if (ok && plan.recv_bytes > 0) ok = FindShared(a.recv, plan.recv_bytes, &recv_ref);
  words[0] = (ok ? kQualifies : 0) | (plan.in_place ? kInPlace : 0);
  send_ref.addr = reinterpret_cast<uintptr_t>(a.send);
  recv_ref.addr = reinterpret_cast<uintptr_t>(a.recv);
  PutRef(&words[kSendAt], send_ref);
  PutRef(&words[kRecvAt], recv_ref);
  const size_t elem = a.ElementSize();
  const bool v = a.kind == CollectiveKind::kAllToAllV;
  if (all_to_all) {
    for (int d = 0; d < n; ++d) {
      words[kBlocksAt + 2 * d] = (v ? a.send_displs[d] : d * a.count) * elem;
      words[kBlocksAt + 2 * d + 1] = (v ? a.send_counts[d] : a.count) * elem;
    }
  }
  shm.ExposeBuffers();  // withdrawn when the operation ends (Communicator's executor)
  TESSERA_RETURN_IF_ERROR(shm.LlStep(words.data(), words.size() * sizeof(uint64_t), *env.ctx));
  // Snapshot: LlData is only valid until this rank's next LL step.
  std::vector<uint64_t> all(static_cast<size_t>(n) * words_needed);
  bool all_shared = true;
  for (int j = 0; j < n; ++j) {
    std::memcpy(&all[j * words_needed], shm.LlData(j), words_needed * sizeof(uint64_t));
    all_shared = all_shared && (all[j * words_needed] & kQualifies) != 0;
  }
  if (!all_shared) {  // someone's buffers are private: a copying path
    if (peers != nullptr) {
      peers->words_ = std::move(all);
      peers->stride_ = words_needed;
    }
    return Status::Ok();
  }
  auto ref_of = [&](int j, int at) { return GetRef(&all[j * words_needed + at]); };
  auto map = [&](int j, int at) {
    StatusOr<uint8_t*> p = shm.MapShared(j, ref_of(j, at), *env.ctx);
    if (!p.ok()) shm.PublishFailure(p.status());  // peers waiting in the closing step fail promptly
    return p;
  };
  *taken = true;
  shm.CountZeroCopyOp();
  // Ranks that are threads of one process touch each other's buffers
  // directly: stay registered inside them until done (context.h).
  PeersEntered entered(shm);
  for (int j = 0; j < n; ++j) {
    if (j != me) TESSERA_RETURN_IF_ERROR(entered.Enter(j, *env.ctx));
  }

  const size_t bytes = a.count * elem;
  auto* recv = static_cast<uint8_t*>(a.recv);
  // Nothing to move (the same on every rank): a rank whose extent is empty
  // published no allocation, so map nobody.
  if (!all_to_all && bytes == 0) return shm.LlStep(nullptr, 0, *env.ctx);
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduce: {
      const Range sl = SplitRange(a.count, n, me, 64 / elem);
      if (sl.size() == 0) break;
      const bool reduce = a.kind == CollectiveKind::kReduce;
      PointerList srcs(n);
      std::vector<void*> dsts;
      for (int j = 0; j < n; ++j) {
        TESSERA_ASSIGN_OR_RETURN(uint8_t * in, map(j, kSendAt));
        srcs[j] = in + sl.begin * elem;
        if (!reduce || j == a.root) {
          TESSERA_ASSIGN_OR_RETURN(uint8_t * out, map(j, kRecvAt));
          dsts.push_back(out + sl.begin * elem);
        }
      }
      ReduceToMany(dsts.data(), static_cast<int>(dsts.size()), srcs.data(), n, sl.size(), a.dtype, a.op, n,
                   StreamOutput(bytes) ? kStreamAll : 0);
      break;
    }
    case CollectiveKind::kReduceScatter: {
      PointerList srcs(n);
      for (int j = 0; j < n; ++j) {
        TESSERA_ASSIGN_OR_RETURN(uint8_t * in, map(j, kSendAt));
        srcs[j] = in + me * bytes;
      }
      ReduceMany(recv, srcs.data(), n, a.count, a.dtype, a.op, n, StreamOutput(a, bytes));
      break;
    }
    case CollectiveKind::kAllGather: {
      const bool stream = StreamOutput(a, n * bytes);
      for (int k = 0; k < n; ++k) {
        const int j = (me + k) % n;
        TESSERA_ASSIGN_OR_RETURN(uint8_t * in, map(j, kSendAt));
        CopyOut(recv + j * bytes, in, bytes, stream);
      }
      break;
    }
    case CollectiveKind::kBroadcast: {
      if (me != a.root) {  // (the root's own copy is the caller's: ShmDirectBroadcast)
        TESSERA_ASSIGN_OR_RETURN(uint8_t * in, map(a.root, kSendAt));
        CopyOut(recv, in, bytes, StreamOutput(bytes));
      }
      break;
    }
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllToAllV: {
      auto recv_off = [&](int j) { return (v ? a.recv_displs[j] : j * a.count) * elem; };
      auto recv_len = [&](int j) { return (v ? a.recv_counts[j] : a.count) * elem; };
      size_t recv_total = 0;
      for (int j = 0; j < n; ++j) {  // sizes first: a mismatch fails before any copy
        const uint64_t their_len = all[j * words_needed + kBlocksAt + 2 * me + 1];
        if (their_len != recv_len(j)) {
          // Breaks the communicator: the peers fail too.
          Status st = InvalidArgument("{}: rank {} expects {} bytes from rank {}, which sends {} bytes",
                                      env.ctx->Name(), me, recv_len(j), j, their_len);
          return st;
        }
        recv_total += recv_len(j);
      }
      const bool stream = StreamOutput(recv_total);
      for (int k = 0; k < n; ++k) {
        const int j = (me + k) % n;
        // Nothing from j: do not map it (a rank that sends nothing at all
        // publishes no allocation: its send buffer may lie anywhere).
        if (recv_len(j) == 0) continue;
        TESSERA_ASSIGN_OR_RETURN(uint8_t * in, map(j, kSendAt));
        CopyOut(recv + recv_off(j), in + all[j * words_needed + kBlocksAt + 2 * me], recv_len(j), stream);
      }
      break;
    }
    default:
      break;
  }
  return shm.LlStep(nullptr, 0, *env.ctx);
}

}  // namespace tessera::comm::algo
