// One tcp peer: several non-blocking socket streams to the same rank, and
// the message state in both directions. A message is cut into frames of at
// most `chunk_bytes`; each stream that can write takes the next unassigned
// chunk (dynamic assignment: a slow stream simply carries fewer chunks).
// A frame header names the message's sequence number (per direction), tag,
// total size and the chunk's offset, so the receiver places chunks straight
// into the destination (or reduces them, via a staging buffer) whatever
// stream they came on, and checks tag and size against the posted receive.
// A frame for a message whose receive is not posted yet leaves its stream
// unread (backpressure) until it is. A stream the peer closed between
// frames is set aside; a receive fails (Unavailable, naming the peer) once
// every stream is closed, or at once when one closes mid-frame. Optional XXH3 frame checksums catch
// corruption (DataLoss naming the peer and stream). Executor thread only,
// except Shutdown().
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/transport/tcp/waiter.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::transport::tcp {

struct FrameHeader {
  uint32_t magic = 0;
  uint32_t tag = 0;
  uint64_t seq = 0;
  uint64_t message_bytes = 0;
  uint64_t offset = 0;
  uint32_t payload_bytes = 0;
  uint32_t flags = 0;
  uint64_t checksum = 0;
};
static_assert(sizeof(FrameHeader) == 48);

class Pair {
 public:
  Pair(int peer, std::vector<int> fds, size_t chunk_bytes, bool checksum, std::string peer_desc);
  ~Pair();
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int peer() const { return peer_; }
  // Queues a send or receive (in FIFO order per direction).
  void Post(P2pOp* op);
  // Moves bytes on every stream without blocking; true if anything moved.
  StatusOr<bool> Progress(const OpContext& ctx);
  // Registers the streams that could make progress.
  void AddPollFds(Waiter& waiter) const;
  // Closes both directions of every stream (thread-safe): the peer sees EOF.
  void Shutdown();
  size_t streams() const { return streams_.size(); }

 private:
  struct SendState {
    P2pOp* op;
    uint64_t seq;
    size_t assigned = 0;
    size_t written = 0;
    bool empty_frame_assigned = false;
  };
  struct RecvState {
    P2pOp* op;
    uint64_t seq;
  };
  struct Stream {
    int fd = -1;
    // outgoing frame
    bool out_active = false;
    FrameHeader out_hdr;
    size_t out_done = 0;  // bytes of header + payload written
    const uint8_t* out_payload = nullptr;
    uint64_t out_seq = 0;
    // incoming frame
    FrameHeader in_hdr;
    size_t in_hdr_done = 0;
    size_t in_payload_done = 0;
    bool in_matched = false;
    P2pOp* in_op = nullptr;
    std::vector<uint8_t> staging;
    // The peer closed this stream between frames. Not an error by itself: a
    // peer that finished closes every stream while the last frames may still
    // be in flight on the others.
    bool eof = false;
  };

  bool AssignFrame(Stream& s);
  StatusOr<bool> ProgressOut(Stream& s, size_t index, const OpContext& ctx);
  StatusOr<bool> ProgressIn(Stream& s, size_t index, const OpContext& ctx);
  RecvState* FindRecv(uint64_t seq);
  bool HasUnassigned() const;
  bool WantsInput(const Stream& s) const;
  bool AllStreamsClosed() const;
  Status Closed(const OpContext& ctx, size_t index, int err) const;

  int peer_;
  std::vector<Stream> streams_;
  size_t chunk_bytes_;
  bool checksum_;
  std::string peer_desc_;
  std::deque<SendState> sends_;
  std::deque<RecvState> recvs_;
  uint64_t next_send_seq_ = 0;
  uint64_t next_recv_seq_ = 0;
};

}  // namespace tessera::comm::transport::tcp
