// The shm transport of one communicator whose ranks share a host. Each rank
// creates one shared-memory segment (shm_open + mmap, pre-faulted once and
// reused by every operation) holding
//   - a header: doorbell futex, barrier counter (rank 0's is the group's),
//     last barrier step reached, abort word + reason, pid for liveness;
//   - outgoing point-to-point channels, one ring of slots per peer (pair.h);
//   - a two-parity "window" that peers read directly (zero-copy collectives
//     in algo/shm_direct.cc);
//   - two low-latency (LL) slots: a sequence flag followed by up to
//     ll_capacity() bytes of data, sharing the flag's cache line for tiny
//     messages, so a small collective costs one cache-line transfer per
//     peer and no separate barrier (LlStep).
// Single copy: when the ranks may read each other's memory (threads of one
// process: plain memcpy; processes: cross-memory attach, process_vm_readv,
// probed at creation and agreed by all ranks; TESSERA_SHM_SINGLE_COPY=0
// turns it off), large data-movement collectives pull peers' user buffers
// straight into their own (ReadPeer): one copy per byte instead of staging
// through the windows.
// Zero copy: buffers from AllocShared (shared_memory.h) can be mapped by
// every rank (threads: the same address; processes: /proc/<pid>/fd of the
// owner's memfd, probed at creation and agreed by all ranks;
// TESSERA_SHM_ZERO_COPY=0 turns it off). MapShared maps a peer's buffer
// once and caches the mapping, so collectives on such buffers read and
// write peers' memory directly (algo/shm_zero_copy.cc).
// Segment names travel through the Store ("shm/<rank>"); once every rank
// mapped every segment (a store barrier), each rank unlinks its name, so
// nothing is left in /dev/shm even if the job is killed later.
//
// Step protocol for windows: StepBarrier() numbers barriers 1, 2, ...
// Data a rank writes into its window for barrier s goes to parity
// NextParity() (= s & 1) before calling StepBarrier(); after it returns,
// every rank may read every window's parity s & 1 until it arrives at
// barrier s + 1. Because no rank passes barrier s + 1 before all arrived,
// writing parity (s + 1) & 1 right after barrier s is safe: this double
// buffering lets a step read one chunk while staging the next.
//
// Failure handling: every wait spins briefly then sleeps on a futex in
// bounded slices, checking the op deadline, the local abort flag, the group
// abort word (set by any rank's Abort) and, every 100 ms, whether the
// peers it waits for are still alive (same pid namespace: kill(pid, 0) and
// zombie state). Errors name the op, the peer rank, host and pid.
// Thread-safety: one executor thread at a time; Abort() from any thread.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"
#include "tessera/comm/transport/shm/pair.h"
#include "tessera/comm/transport/shm/shared_memory.h"
#include "tessera/comm/transport/shm/waiter.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::transport::shm {

struct Options {
  size_t window_bytes = 0;        // per parity; 0 = TESSERA_SHM_WINDOW_KB (0 there: auto)
  size_t p2p_bytes = 0;           // all outgoing channels together; 0 = TESSERA_SHM_P2P_KB
  int p2p_slots = 4;              // slots per directed channel
  size_t ll_bytes = 0;            // per low-latency slot; 0 = TESSERA_SHM_LL_KB
  int single_copy = -1;           // -1 = TESSERA_SHM_SINGLE_COPY, 0 off, 1 on (when allowed)
  int zero_copy = -1;             // -1 = TESSERA_SHM_ZERO_COPY, 0 off, 1 on (when allowed)
  int64_t direct_reduce_bytes = -1;  // -1 = TESSERA_SHM_DIRECT_REDUCE_KB; 0 = never (algo/shm_single_copy_reduce.cc)
  // All-to-all(v) on private buffers runs single copy from this many bytes
  // per rank (algo/shm_direct_data.cc); -1 = TESSERA_SHM_ALLTOALL_SINGLE_COPY_KB
  // (-1 there: 16 MiB when ranks outnumber the CPUs more than 2x); 0 = never.
  int64_t alltoall_single_copy_bytes = -1;
  std::string host;               // this rank's host name for messages
  std::string host_key;           // same-host identity (hostname + boot id)
};

struct SegmentHeader;
// One mapping of a rank's segment, shared by the Contexts of this process
// (context.cc); unmapped when the last one lets go.
struct MappedSegment {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  ~MappedSegment();
};

class Context final : public Transport {
 public:
  // Collective over the store: every rank of the group calls it. Fails if a
  // peer is on another host (different host_key) or does not join within
  // `timeout` (naming it).
  static StatusOr<std::unique_ptr<Context>> Create(Store& store, int rank, int size, const Options& options,
                                                   Timeout timeout);
  ~Context() override;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  TransportKind kind() const override { return TransportKind::kShm; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Exchange(std::span<P2pOp> ops, const OpContext& ctx) override;
  void Abort(std::string_view reason) override;
  std::string PeerDescription(int peer) const override;
  // Aborts with `st` if it is a failure this rank detected itself (see .cc).
  void PublishFailure(const Status& st);

  // Windows.
  size_t window_bytes() const { return window_bytes_; }
  uint8_t* window(int rank, int parity) const { return windows_[rank] + parity * window_bytes_; }
  int NextParity() const { return static_cast<int>((step_ + 1) & 1u); }
  // All ranks arrive; returns when all did (or fails naming the missing).
  Status StepBarrier(const OpContext& ctx);
  uint32_t step() const { return step_; }

  // Low-latency step: publishes `bytes` (<= ll_capacity()) of `data` in
  // this rank's LL slot and waits until every rank published the same
  // step. Every rank calls it (a full barrier). Afterwards LlData(r) holds
  // rank r's data until this rank's next LlStep.
  Status LlStep(const void* data, size_t bytes, const OpContext& ctx);
  const uint8_t* LlData(int rank) const;
  size_t ll_capacity() const { return ll_bytes_ - 8; }

  // Single copy (see above): true when every rank can read every other's
  // memory. ReadPeer copies `bytes` at `remote` in `peer`'s address space
  // to `dst`, in pieces, failing (naming the op and peer) if the peer died.
  bool single_copy() const { return single_copy_; }
  bool SameProcess(int peer) const { return pids_[peer] == pids_[rank_]; }
  Status ReadPeer(int peer, void* dst, const void* remote, size_t bytes, const OpContext& ctx) const;
  // ReadPeer of many pieces: remote[i] (in `peer`'s address space) to
  // local[i], the same lengths; one cross-memory-attach call per up to
  // 1024 pieces between processes, memcpy inside the peer's exposed
  // buffers between threads (re-checked every kPeerPiece bytes).
  Status ReadPeerGather(int peer, std::span<const iovec> local, std::span<const iovec> remote,
                        const OpContext& ctx) const;

  // Buffer exposure (single and zero copy). A rank whose user buffers peers
  // will touch directly calls ExposeBuffers() right before the LL step that
  // publishes them, and WithdrawBuffers() when it leaves the operation,
  // however it leaves (Communicator's executor does, after every
  // collective). Withdrawal waits until no peer thread of this process is
  // inside those buffers: a rank that timed out or failed must not return
  // to a caller who frees the memory while a peer still copies from or
  // into it. Peers enter with EnterPeer (counted; refused once the owner
  // withdrew) and re-check with StillExposed between pieces of at most
  // kPeerPiece bytes, so a withdrawal waits for one piece at most. Peers in
  // other processes need no count: they reach the memory only through
  // process_vm_readv (which fails or reads stale bytes, never ours) or
  // through their own mapping of a shared allocation (which keeps its
  // pages), and a failed owner has aborted the group, so their operation
  // fails too.
  static constexpr size_t kPeerPiece = 1 << 20;
  void ExposeBuffers();
  void WithdrawBuffers();
  Status EnterPeer(int peer, const OpContext& ctx) const;  // no-op for other processes
  void LeavePeer(int peer) const;
  Status StillExposed(int peer, const OpContext& ctx) const;
  // Runs fn(offset, length) over [0, bytes) in pieces of kPeerPiece inside
  // `peer`'s exposed buffers (EnterPeer / StillExposed / LeavePeer around
  // it). Same-process peers only (fn touches the peer's memory directly).
  Status AccessPeerInPieces(int peer, size_t bytes, const std::function<void(size_t, size_t)>& fn,
                            const OpContext& ctx) const;

  // Zero copy (see above): true when every rank can map every other's
  // shared buffers. MapShared returns where `ref` (published by `peer`)
  // lies in this address space, mapping its allocation on first use; fails
  // naming the op and peer if it cannot (the caller aborts the op).
  bool zero_copy() const { return zero_copy_; }
  // All-reduce / reduce messages of at least this many bytes run direct
  // (zero or single copy) instead of through the windows; 0 = never.
  size_t direct_reduce_bytes() const { return direct_reduce_bytes_; }
  // All-to-all(v) single copy from this many bytes per rank; -1: the
  // measured default (see Options); 0: never. Agreed by all ranks.
  int64_t alltoall_single_copy_bytes() const { return alltoall_single_copy_bytes_; }
  StatusOr<uint8_t*> MapShared(int peer, const SharedRef& ref, const OpContext& ctx);
  // Operations that ran zero copy (counted by algo/shm_zero_copy.cc; any thread may read).
  void CountZeroCopyOp() { zero_copy_ops_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t zero_copy_ops() const { return zero_copy_ops_.load(std::memory_order_relaxed); }

  const SpinPolicy& spin_policy() const { return policy_; }
  size_t segment_bytes() const { return segment_bytes_; }

 private:
  Context() = default;
  Status CheckHealth(const OpContext& ctx, const std::vector<int>& waiting_for, const std::string& what,
                     int64_t* next_liveness_ns) const;
  bool PeerDead(int peer, std::string* why) const;
  // Aborted (naming the rank and its reason) once any rank aborted the group.
  Status GroupAbortStatus(const OpContext& ctx) const;
  StatusOr<uint8_t*> MapPeerAllocation(int peer, const SharedRef& ref);

  // Peers' shared allocations mapped here (least recently used evicted
  // beyond max(64, 4 x size) entries).
  struct PeerMapping {
    int peer = -1;
    uint64_t id = 0;
    uint64_t fd = 0;
    uint8_t* base = nullptr;
    size_t bytes = 0;
    uint64_t last_use = 0;
  };
  std::vector<PeerMapping> peer_mappings_;
  uint64_t map_clock_ = 0;

  int rank_ = 0;
  int size_ = 1;
  Options options_;
  SpinPolicy policy_;
  size_t segment_bytes_ = 0;
  size_t window_bytes_ = 0;
  size_t ll_bytes_ = 0;  // per parity, flag included
  size_t ll_offset_ = 0;
  uint32_t ll_seq_ = 0;
  uint64_t ll_steps_ = 0;  // LL steps so far (ll_seq_ without wrap-around): buffer exposure tokens
  std::vector<uint8_t*> bases_;  // mapped segments by rank (ours included)
  std::vector<std::shared_ptr<MappedSegment>> segments_;  // owning bases_
  std::vector<SegmentHeader*> headers_;
  std::vector<uint8_t*> windows_;
  std::vector<Pair> pairs_;  // by peer rank (ours unused)
  std::vector<std::string> hosts_;
  std::vector<int> pids_;
  std::vector<bool> same_pidns_;
  uint32_t step_ = 0;
  bool single_copy_ = false;
  bool zero_copy_ = false;
  size_t direct_reduce_bytes_ = 0;
  int64_t alltoall_single_copy_bytes_ = -1;
  std::atomic<uint64_t> zero_copy_ops_{0};
};

// Test-only fault injection: when set, called by rank `rank` each time it is
// inside `peer`'s exposed buffers (after entering, and between pieces), so a
// test can stall a reader mid-transfer. nullptr clears it.
using PeerAccessHook = void (*)(int rank, int peer);
void SetPeerAccessHookForTesting(PeerAccessHook hook);

}  // namespace tessera::comm::transport::shm
