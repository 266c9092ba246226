// Transport layer interface: how the algorithms move bytes between the
// ranks of one communicator. Every transport (shm/, tcp/: each folder has
// the same file set: context, pair, waiter) provides point-to-point
// messages driven by Exchange(): a batch of sends and receives (to several
// peers, in both directions) progressed together until all complete, so a
// ring step (send right, receive left) cannot deadlock on bounded buffers.
//   - Messages between two ranks in one direction are delivered in order
//     (FIFO); a receive names the tag and the exact size it expects, and a
//     mismatch is an error naming both.
//   - A receive may reduce into its buffer instead of copying
//     (recv[i] = recv[i] op incoming[i]), saving a pass for ring/tree
//     reductions.
//   - Waiting never spins for long: a transport spins briefly, then sleeps
//     (futex / epoll) until a peer makes progress, the deadline passes, the
//     op is aborted or a peer dies; failures name the op and the peer (rank,
//     host).
// A Transport is used by one thread at a time (the communicator's executor);
// Abort() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tessera/base/status.h"
#include "tessera/comm/api/types.h"

namespace tessera::comm::transport {

using Clock = std::chrono::steady_clock;

// The running operation: its name for errors ("all_reduce #12 [world rank
// 0/4]", formatted only when an error needs it), its deadline and the
// communicator's local abort flag.
struct OpContext {
  std::string_view label;           // "all_reduce", "cost-model calibration"
  uint64_t seq = 0;                 // 0: none
  const std::string* comm = nullptr;  // communicator name
  int rank = 0;
  int size = 1;
  Clock::time_point deadline = Clock::time_point::max();
  const std::atomic<bool>* aborted = nullptr;
  std::chrono::milliseconds timeout{0};  // for messages ("after 30000 ms")

  bool Aborted() const { return aborted != nullptr && aborted->load(std::memory_order_relaxed); }
  const std::string& Name() const;

 private:
  mutable std::string name_;
};

struct P2pOp {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer = -1;
  uint32_t tag = 0;
  const void* send_buf = nullptr;  // kSend
  void* recv_buf = nullptr;        // kRecv
  size_t bytes = 0;
  // kRecv only: reduce into recv_buf instead of copying:
  // recv[i] = recv[i] op incoming[i], or, when reduce_src is set,
  // recv[i] = reduce_src[i] op incoming[i] (saves initializing recv).
  bool reduce = false;
  const void* reduce_src = nullptr;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;

  // Transport-owned progress state.
  size_t done_bytes = 0;
  bool started = false;
  bool complete = false;

  static P2pOp Send(int peer, uint32_t tag, const void* buf, size_t bytes) {
    P2pOp o;
    o.kind = Kind::kSend;
    o.peer = peer;
    o.tag = tag;
    o.send_buf = buf;
    o.bytes = bytes;
    return o;
  }
  static P2pOp Recv(int peer, uint32_t tag, void* buf, size_t bytes) {
    P2pOp o;
    o.kind = Kind::kRecv;
    o.peer = peer;
    o.tag = tag;
    o.recv_buf = buf;
    o.bytes = bytes;
    return o;
  }
  static P2pOp RecvReduce(int peer, uint32_t tag, void* buf, size_t bytes, DataType dtype, ReduceOp op,
                          const void* reduce_src = nullptr) {
    P2pOp o = Recv(peer, tag, buf, bytes);
    o.reduce = true;
    o.dtype = dtype;
    o.op = op;
    o.reduce_src = reduce_src;
    return o;
  }
};

enum class TransportKind : uint8_t { kAuto, kShm, kTcp };
std::string_view TransportKindName(TransportKind kind);
StatusOr<TransportKind> ParseTransportKind(std::string_view text);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual TransportKind kind() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Posts all ops and progresses them until every one completes, or fails
  // with the first error (deadline, abort, dead peer, protocol mismatch).
  // After a failure the transport's message streams are undefined; the
  // communicator stops using it.
  virtual Status Exchange(std::span<P2pOp> ops, const OpContext& ctx) = 0;

  // Tells the peers this rank gave up (their waits fail with Aborted naming
  // this rank and `reason`) and wakes local waiters. Thread-safe, prompt.
  virtual void Abort(std::string_view reason) = 0;

  // "rank 3 (host node-b, pid 4242)" for error messages.
  virtual std::string PeerDescription(int peer) const = 0;

  // After a failed Exchange: the peer whose connection broke (it died,
  // exited or aborted), or -1 when the failure was not a broken link.
  virtual int failed_peer() const { return -1; }

  // Convenience wrappers around Exchange.
  Status SendRecv(int send_peer, const void* send_buf, size_t send_bytes, int recv_peer, void* recv_buf,
                  size_t recv_bytes, uint32_t tag, const OpContext& ctx);
};

}  // namespace tessera::comm::transport
