// One tcp peer: several non-blocking data streams plus one control stream
// to the same rank, and the message state in both directions (wire format:
// frame.h).
//   - A message is cut into frames of at most `chunk_bytes`; each data
//     stream that can write takes the next unassigned chunk (dynamic
//     assignment: a slow stream simply carries fewer chunks). Headers name
//     the message's sequence number, tag, size and offset, so chunks land
//     straight in the destination (or are reduced, via a staging buffer)
//     whatever stream they came on. A frame for a message whose receive is
//     not posted yet leaves its stream unread (backpressure).
//   - Reliability: the receiver acknowledges every message it fully
//     received (cumulative ACK on the control stream, also piggybacked on
//     data headers). A send completes when acknowledged; a small send
//     (<= kEagerBytes) is copied and completes once written, so two ranks
//     may still send each other small messages before receiving. Until
//     acknowledged the sender can resend any chunk.
//   - A payload that fails its checksum is NACKed and resent (at most
//     kMaxRetransmits times, then DataLoss naming peer, stream and offset,
//     on both ranks). A dropped stream (EOF, reset, corrupt header) is
//     re-established by the connecting side (the higher rank) through the
//     peer's listener (Endpoint, authenticated as at setup); both sides then
//     resume at the first data frame the other did not fully receive.
//   - A peer whose listener refuses connections is gone (exited, died,
//     aborted): pending transfers fail (Unavailable naming it) once no
//     stream can deliver anything more. The accepting side probes the
//     peer's listener while waiting for a reconnect.
// Thread-safety: executor thread only, except Shutdown().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/transport/tcp/frame.h"
#include "tessera/comm/transport/tcp/link.h"
#include "tessera/comm/transport/tcp/waiter.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::transport::tcp {

// Sends up to this size are copied and complete once written.
constexpr size_t kEagerBytes = 64 << 10;

class Pair {
 public:
  struct Config {
    size_t chunk_bytes = 512 << 10;
    bool checksum = true;
    size_t max_rcvlowat = 256 << 10;  // SetLowat's cap (0: never raised)
    Endpoint endpoint;  // default: no reconnection (a dropped stream is lost)
  };
  // `fds`: the data streams, then the control stream (at least 2 in all).
  Pair(int peer, std::vector<int> fds, Config config, std::string peer_desc);
  ~Pair();
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int peer() const { return peer_; }
  // Queues a send or receive (in FIFO order per direction).
  void Post(P2pOp* op);
  // Moves bytes, acknowledgements and reconnections without blocking;
  // true if anything moved.
  StatusOr<bool> Progress(const OpContext& ctx);
  // Registers the sockets that could make progress.
  void AddPollFds(Waiter& waiter) const;
  // Work left with every posted op complete: unacknowledged small sends,
  // chunks to resend, control frames to write, streams being re-established.
  bool HasBackgroundWork() const;
  // Closes both directions of every stream and stops reconnecting
  // (thread-safe): the peer sees EOF.
  void Shutdown();
  // The accepting side: the peer re-established stream `stream` on `fd`
  // (having fully received `peer_frames` data frames on it). Answers with
  // this side's count and resumes; false (fd closed) when not possible.
  bool AcceptReconnect(int stream, int fd, uint64_t peer_frames);
  size_t streams() const { return streams_.size() - 1; }  // data streams

 private:
  using Clock = std::chrono::steady_clock;
  enum class Link : uint8_t { kUp, kConnecting, kHandshake, kWaiting, kDown };
  struct Sent {  // a data frame written (or being written) on a stream
    uint32_t frame_no;
    bool retransmit;
    uint32_t len;
    uint64_t seq;
    uint64_t offset;
  };
  struct Resend {
    uint64_t seq;
    uint64_t offset;
    uint32_t len;
    bool retransmit;  // answers a NACK (else: lost with a dropped stream)
  };
  struct SendState {
    P2pOp* op;  // null once complete
    uint64_t seq;
    uint32_t tag;
    size_t bytes;
    bool eager = false;
    std::vector<uint8_t> copy;  // eager sends
    size_t assigned = 0;
    bool empty_frame_assigned = false;
    int inflight = 0;  // frames being written
    bool acked = false;
  };
  struct RecvState {
    P2pOp* op;
    uint64_t seq;
  };
  struct NackState {
    uint64_t seq;
    uint64_t offset;
    uint32_t len;
    int attempts;
    bool outstanding;
  };
  enum InMode : uint8_t { kInHeader, kInPayload, kInDiscard };
  struct Stream {
    int fd = -1;
    Link link = Link::kUp;
    // outgoing
    bool out_active = false;
    FrameHeader out_hdr;
    size_t out_done = 0;
    const uint8_t* out_payload = nullptr;
    FrameFault out_fault = FrameFault::kNone;
    std::vector<uint8_t> wire_copy;  // fault injection
    std::deque<Sent> sent;           // data frames not known to be received
    uint32_t next_frame = 0;
    Clock::time_point paced_until{};  // test-only slow channel (frame.h)
    // incoming
    FrameHeader in_hdr;
    size_t in_hdr_done = 0;
    size_t in_payload_done = 0;
    InMode in_mode = kInHeader;
    P2pOp* in_op = nullptr;
    std::vector<uint8_t> staging;
    uint32_t in_frames = 0;  // data frames fully received
    int rcvlowat = 1;        // SO_RCVLOWAT now set on fd (SetLowat)
    // re-establishing (connecting side)
    Clock::time_point retry_at{};
    HelloReply reply;
    size_t reply_done = 0;
  };

  // pair.cc: the data path.
  const uint8_t* Data(const SendState& s) const;
  SendState* FindSend(uint64_t seq);
  RecvState* FindRecv(uint64_t seq);
  NackState* FindNack(uint64_t seq, uint64_t offset);
  uint64_t RecvDone() const;
  bool HasUnassigned() const;
  bool ControlPending() const;
  bool Stalled(const Stream& s) const;
  static bool Paced(const Stream& s);
  bool WantsInput(const Stream& s) const;
  // Before sleeping on a data stream: wake only once `bytes` (capped at
  // cfg_.max_rcvlowat) can be read, so a large payload arrives in a few
  // wake-ups rather than one per TCP segment batch (fewer preemptions of
  // the compute it overlaps). Only the current frame's remaining bytes are
  // ever asked for, so the wait always ends.
  void SetLowat(Stream& s, size_t bytes) const;
  bool HasPendingOps() const;
  void Settle();
  void OnAck(uint64_t acked);
  bool AssignFrame(Stream& s, size_t index);
  void StartFrame(Stream& s, size_t index, SendState& state, uint64_t offset, uint32_t len, bool retransmit);
  bool ProgressOut(Stream& s, size_t index);
  bool ProgressControlOut(Stream& s, size_t index);
  StatusOr<bool> ProgressIn(Stream& s, size_t index, const OpContext& ctx);
  Status OnControlFrame(const FrameHeader& h, size_t index, const OpContext& ctx);
  Status MatchFrame(Stream& s, size_t index, const OpContext& ctx, bool* stalled);
  Status OnCorrupt(const FrameHeader& h, size_t index, const OpContext& ctx);
  Status Closed(const OpContext& ctx) const;

  // pair_link.cc: dropped streams, reconnection, probing.
  void SetFd(Stream& s, int fd);
  void StreamDown(size_t index, const std::string& why);
  Status Desync(size_t index, const OpContext& ctx, const std::string& why);
  void PeerGone(const std::string& why);
  bool ProgressLink(Stream& s, size_t index);
  bool ProgressProbe();
  void Resume(size_t index, uint64_t peer_frames);

  int peer_;
  Config cfg_;
  std::string peer_desc_;
  std::vector<Stream> streams_;  // data streams, then the control stream
  size_t control_;
  std::deque<SendState> sends_;
  std::deque<Resend> resends_;
  std::deque<RecvState> recvs_;
  std::vector<NackState> nacks_;
  std::deque<FrameHeader> control_out_;  // NACK / FAIL frames to write
  uint64_t ack_sent_ = 0;
  bool ack_forced_ = false;
  uint64_t peer_acked_ = 0;  // my messages the peer fully received
  uint64_t next_send_seq_ = 0;
  uint64_t next_recv_seq_ = 0;
  int header_errors_ = 0;
  bool peer_gone_ = false;
  bool lost_frame_ = false;  // a stream closed mid-frame with no way to reconnect
  std::string gone_why_;
  int probe_fd_ = -1;
  Clock::time_point next_probe_{};
  std::mutex fd_mu_;  // fd changes vs Shutdown()
  std::atomic<bool> shut_{false};
};

}  // namespace tessera::comm::transport::tcp
