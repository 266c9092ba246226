// Communicator: a group of ranks that run collectives and point-to-point
// transfers together (tessera's NCCL/Gloo-class API).
//
//   auto store = MakeInMemoryStore();            // or the TCP store
//   auto comm = Communicator::Create(store, rank, size).value();
//   comm->AllReduce(grad, grad, n, DataType::kFloat32, ReduceOp::kSum);
//   Work w = comm->AllGatherAsync(x, y, n, DataType::kBFloat16);
//   ... compute ...
//   TESSERA_RETURN_IF_ERROR(w.Wait());
//
// Creation is collective over a rendezvous Store: every rank calls Create
// with the same size and options.name; ranks find each other through
// store keys under "tessera/<name>/". The transport is chosen from the
// detected topology (all ranks on one host: shm, zero-copy shared windows;
// otherwise tcp across hosts with shm inside each host: hierarchical) or
// forced by options.transport / TESSERA_TRANSPORT.
//
// Semantics:
//   - Counts and in-place conventions: see api/types.h.
//   - Every operation is asynchronous underneath: *Async returns a Work at
//     once; the plain names block until done. Operations of one
//     communicator execute one at a time in the order this rank issued
//     them; every rank must issue the same collectives in the same order
//     (like MPI/NCCL). Send/Recv between two ranks match in issue order
//     (and by tag: a mismatch is an error). A Send larger than the shm
//     channel buffer (TESSERA_SHM_P2P_KB / peers) or the tcp socket buffers
//     waits for the matching Recv, so two ranks that Send to each other
//     first must use SendRecv.
//   - Failures: each operation has a deadline (options.timeout,
//     TESSERA_COMM_TIMEOUT_MS); a stalled or dead peer fails the operation
//     on every waiting rank with a Status naming the operation, the peer
//     rank and host. The first failure breaks the communicator: later
//     operations fail at once with that error (create a new communicator).
//     A failing rank tells its peers, so they fail promptly too.
//   - Abort() stops everything promptly (the running operation within
//     ~20 ms, queued ones at once, peers too) and may be called from any
//     thread, e.g. a watchdog.
//   - Zero copy: buffers from AllocShared (below) can be mapped by the
//     other ranks of the host; when every rank's buffers of a large
//     all-reduce, reduce, reduce-scatter, all-gather, broadcast or
//     all-to-all(v) come from it, ranks read and write each other's buffers
//     directly (one pass over memory, no staging). Plain memory works the
//     same, through copies. Like NCCL's ncclMemAlloc + registration.
//   - Algorithms are chosen per call by an alpha-beta cost model measured
//     on this machine at first use (algo/selector.h); TESSERA_ALGO forces
//     one; TESSERA_DEBUG=INFO logs each choice and why.
// Thread-safety: all methods are thread-safe; operations from several
// threads are ordered by their submission.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/types.h"
#include "tessera/comm/api/work.h"
#include "tessera/comm/store.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm {

struct CommOptions {
  std::string name = "world";               // store namespace; unique per concurrent communicator
  std::chrono::milliseconds timeout{0};     // per operation; 0 = TESSERA_COMM_TIMEOUT_MS
  transport::TransportKind transport = transport::TransportKind::kAuto;  // kAuto = TESSERA_TRANSPORT
  size_t shm_window_bytes = 0;  // 0 = TESSERA_SHM_WINDOW_KB
  size_t shm_p2p_bytes = 0;     // 0 = TESSERA_SHM_P2P_KB
  size_t shm_ll_bytes = 0;      // 0 = TESSERA_SHM_LL_KB
  int shm_single_copy = -1;     // -1 = TESSERA_SHM_SINGLE_COPY, 0 off, 1 on (when allowed)
  int shm_zero_copy = -1;       // -1 = TESSERA_SHM_ZERO_COPY, 0 off, 1 on (when allowed)
  int64_t shm_direct_reduce_bytes = -1;  // -1 = TESSERA_SHM_DIRECT_REDUCE_KB, 0 = never
  int64_t shm_alltoall_single_copy_bytes = -1;  // -1 = TESSERA_SHM_ALLTOALL_SINGLE_COPY_KB, 0 = never
  int tcp_streams = 0;          // sockets per peer; 0 = TESSERA_TCP_STREAMS
  int tcp_checksum = -1;        // XXH3 on every tcp frame, corrupt frames resent: -1 = TESSERA_TCP_CHECKSUM (on), 0 off, 1 on
  std::string algo;             // like TESSERA_ALGO, for this communicator only (tests)
  bool calibrate = true;        // measure the cost model at first use (else built-in defaults)
  // Pretend to be on this host (tests of multi-host logic in one machine):
  // overrides the detected host identity.
  std::string host_override;
};

// Memory for zero-copy collectives (see above): `bytes` rounded up to
// pages, zeroed, backed by a memfd that same-host peers map on first use.
// Fails with ResourceExhausted naming the size. FreeShared(nullptr) is a
// no-op; any pointer not from AllocShared is an InvalidArgument. Do not
// free a buffer while an operation on it is pending.
StatusOr<void*> AllocShared(size_t bytes);
Status FreeShared(void* ptr);

class Communicator {
 public:
  static constexpr int kNoColor = -1;

  static StatusOr<std::unique_ptr<Communicator>> Create(std::shared_ptr<Store> store, int rank, int size,
                                                        CommOptions options = {});
  // The job's world communicator from the environment (job_env.h: `tessera
  // launch`/torchrun RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
  // TESSERA_JOB_TOKEN; Open MPI OMPI_COMM_WORLD_*; Slurm SLURM_*; or a
  // single process). Connects to (rank 0: hosts, unless the launcher does)
  // the job's authenticated store; the communicator keeps it alive, so
  // rank 0 should destroy its communicator last (e.g. after a Barrier).
  static StatusOr<std::unique_ptr<Communicator>> FromEnvironment(CommOptions options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const std::string& name() const;
  transport::TransportKind transport_kind() const;
  // Multi-line summary: ranks, hosts, transport, windows, cost model,
  // and the algorithm each collective would use at a few sizes.
  std::string Describe() const;

  // Collective: ranks with the same color form a new communicator, ordered
  // by (key, rank). color == kNoColor returns nullptr (the rank still has
  // to call Split).
  StatusOr<std::unique_ptr<Communicator>> Split(int color, int key);

  // Asynchronous operations (see types.h for counts).
  Work AllReduceAsync(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  Work ReduceAsync(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root);
  Work BroadcastAsync(const void* send, void* recv, size_t count, DataType dtype, int root);
  Work AllGatherAsync(const void* send, void* recv, size_t count, DataType dtype);
  Work ReduceScatterAsync(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  Work AllToAllAsync(const void* send, void* recv, size_t count, DataType dtype);
  Work AllToAllVAsync(const void* send, std::vector<size_t> send_counts, std::vector<size_t> send_displs, void* recv,
                      std::vector<size_t> recv_counts, std::vector<size_t> recv_displs, DataType dtype);
  Work GatherAsync(const void* send, void* recv, size_t count, DataType dtype, int root);
  Work ScatterAsync(const void* send, void* recv, size_t count, DataType dtype, int root);
  Work BarrierAsync();
  Work SendAsync(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag = 0);
  Work RecvAsync(void* buf, size_t count, DataType dtype, int peer, uint32_t tag = 0);
  // Sends to send_peer and receives from recv_peer concurrently.
  Work SendRecvAsync(const void* send, size_t send_count, int send_peer, void* recv, size_t recv_count,
                     int recv_peer, DataType dtype, uint32_t tag = 0);
  Work SubmitAsync(CollectiveArgs args);

  // Blocking forms.
  Status AllReduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  Status Reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root);
  Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root);
  Status AllGather(const void* send, void* recv, size_t count, DataType dtype);
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);
  Status AllToAll(const void* send, void* recv, size_t count, DataType dtype);
  Status AllToAllV(const void* send, std::vector<size_t> send_counts, std::vector<size_t> send_displs, void* recv,
                   std::vector<size_t> recv_counts, std::vector<size_t> recv_displs, DataType dtype);
  Status Gather(const void* send, void* recv, size_t count, DataType dtype, int root);
  Status Scatter(const void* send, void* recv, size_t count, DataType dtype, int root);
  Status Barrier();
  Status Send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag = 0);
  Status Recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag = 0);
  Status SendRecv(const void* send, size_t send_count, int send_peer, void* recv, size_t recv_count, int recv_peer,
                  DataType dtype, uint32_t tag = 0);
  Status Run(const CollectiveArgs& args);

  // Library-internal operations (comm/ modules such as comm/moe): `fn`
  // runs as one operation of this communicator — in issue order on the
  // executor, with the op's deadline, the failure handling and buffer
  // withdrawal of any collective — and gets the algorithm environment
  // (transport, shm context, scratch). Every rank must run matching
  // operations. `label` (a string literal) names it in logs and errors.
  Status RunCustom(const char* label, std::function<Status(algo::AlgoEnv&)> fn);
  Work SubmitCustom(const char* label, std::function<Status(algo::AlgoEnv&)> fn);
  // Whether ranks read each other's memory directly (shm transport with
  // single copy: threads of one process, or cross-memory attach).
  bool direct_peer_reads() const;

  // Stops all work promptly on this rank and tells the peers. Idempotent.
  void Abort(std::string_view reason = "");
  // OK, or the error that broke (or the reason that aborted) the communicator.
  Status health() const;
  // The algorithm the selector picks for `args` on this communicator, and why.
  std::string ExplainChoice(const CollectiveArgs& args) const;
  // The selector's model inputs and constants as one line
  // (algo::SerializeModel; the twin records it).
  std::string CostModelText() const;
  // Whether this communicator can run zero copy (shm transport, every rank
  // can map every other's AllocShared memory), and how many operations did.
  bool zero_copy() const;
  uint64_t zero_copy_ops() const;

  struct Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::comm
