#include "tessera/comm/transport/tcp/pair.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tessera/base/checksum.h"
#include "tessera/comm/algo/reduce_kernels.h"

namespace tessera::comm::transport::tcp {
namespace {

constexpr uint32_t kFrameMagic = 0x4d524654;  // "TFRM"
constexpr uint32_t kFlagChecksum = 1;

}  // namespace

Pair::Pair(int peer, std::vector<int> fds, size_t chunk_bytes, bool checksum, std::string peer_desc)
    : peer_(peer), chunk_bytes_(chunk_bytes), checksum_(checksum), peer_desc_(std::move(peer_desc)) {
  streams_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) streams_[i].fd = fds[i];
}

Pair::~Pair() {
  for (Stream& s : streams_) {
    if (s.fd >= 0) close(s.fd);
  }
}

void Pair::Shutdown() {
  for (Stream& s : streams_) {
    if (s.fd >= 0) shutdown(s.fd, SHUT_RDWR);
  }
}

void Pair::Post(P2pOp* op) {
  if (op->kind == P2pOp::Kind::kSend) {
    sends_.push_back(SendState{op, next_send_seq_++});
  } else {
    recvs_.push_back(RecvState{op, next_recv_seq_++});
  }
}

bool Pair::HasUnassigned() const {
  for (const SendState& s : sends_) {
    if (s.op->bytes == 0 ? !s.empty_frame_assigned : s.assigned < s.op->bytes) return true;
  }
  return false;
}

bool Pair::AssignFrame(Stream& st) {
  for (SendState& s : sends_) {
    const bool pending = s.op->bytes == 0 ? !s.empty_frame_assigned : s.assigned < s.op->bytes;
    if (!pending) continue;
    const size_t piece = std::min(chunk_bytes_, s.op->bytes - s.assigned);
    FrameHeader& h = st.out_hdr;
    h.magic = kFrameMagic;
    h.tag = s.op->tag;
    h.seq = s.seq;
    h.message_bytes = s.op->bytes;
    h.offset = s.assigned;
    h.payload_bytes = static_cast<uint32_t>(piece);
    st.out_payload = static_cast<const uint8_t*>(s.op->send_buf) + s.assigned;
    h.flags = checksum_ ? kFlagChecksum : 0;
    h.checksum = checksum_ ? base::Checksum64(st.out_payload, piece) : 0;
    st.out_active = true;
    st.out_done = 0;
    st.out_seq = s.seq;
    s.assigned += piece;
    if (s.op->bytes == 0) s.empty_frame_assigned = true;
    s.op->started = true;
    return true;
  }
  return false;
}

Status Pair::Closed(const OpContext& ctx, size_t index, int err) const {
  if (err == 0) {
    return Unavailable("{}: {} closed the connection (stream {}): it exited, died or aborted", ctx.Name(),
                       peer_desc_, index);
  }
  return Unavailable("{}: connection to {} (stream {}) failed: {} (the peer died, aborted or the network failed)",
                     ctx.Name(), peer_desc_, index, std::strerror(err));
}

StatusOr<bool> Pair::ProgressOut(Stream& st, size_t index, const OpContext& ctx) {
  bool moved = false;
  while (true) {
    if (!st.out_active && !AssignFrame(st)) return moved;
    const size_t hdr = sizeof(FrameHeader);
    const size_t total = hdr + st.out_hdr.payload_bytes;
    iovec iov[2];
    int n = 0;
    if (st.out_done < hdr) {
      iov[n++] = {reinterpret_cast<uint8_t*>(&st.out_hdr) + st.out_done, hdr - st.out_done};
      if (st.out_hdr.payload_bytes > 0) iov[n++] = {const_cast<uint8_t*>(st.out_payload), st.out_hdr.payload_bytes};
    } else {
      iov[n++] = {const_cast<uint8_t*>(st.out_payload) + (st.out_done - hdr), total - st.out_done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    const ssize_t w = sendmsg(st.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      if (errno == EINTR) continue;
      return Closed(ctx, index, errno);
    }
    moved = true;
    st.out_done += static_cast<size_t>(w);
    if (st.out_done < total) continue;
    st.out_active = false;
    for (auto it = sends_.begin(); it != sends_.end(); ++it) {
      if (it->seq != st.out_seq) continue;
      it->written += st.out_hdr.payload_bytes;
      it->op->done_bytes = it->written;
      const bool all_frames = it->op->bytes == 0 ? it->empty_frame_assigned : it->written == it->op->bytes;
      if (all_frames) it->op->complete = true;
      break;
    }
    while (!sends_.empty() && sends_.front().op->complete) sends_.pop_front();
  }
}

Pair::RecvState* Pair::FindRecv(uint64_t seq) {
  for (RecvState& r : recvs_) {
    if (r.seq == seq) return &r;
  }
  return nullptr;
}

bool Pair::AllStreamsClosed() const {
  for (const Stream& s : streams_) {
    if (!s.eof) return false;
  }
  return true;
}

bool Pair::WantsInput(const Stream& s) const {
  if (recvs_.empty() || s.eof) return false;
  if (s.in_hdr_done == sizeof(FrameHeader) && !s.in_matched) {
    // Header read, receive not posted yet: wait for the post.
    for (const RecvState& r : recvs_) {
      if (r.seq == s.in_hdr.seq) return true;
    }
    return false;
  }
  return true;
}

StatusOr<bool> Pair::ProgressIn(Stream& st, size_t index, const OpContext& ctx) {
  bool moved = false;
  while (WantsInput(st)) {
    const size_t hdr = sizeof(FrameHeader);
    if (st.in_hdr_done < hdr) {
      const ssize_t r = recv(st.fd, reinterpret_cast<uint8_t*>(&st.in_hdr) + st.in_hdr_done, hdr - st.in_hdr_done,
                             MSG_DONTWAIT);
      if (r == 0) {
        if (st.in_hdr_done > 0) return Closed(ctx, index, 0);  // mid-frame
        st.eof = true;  // between frames: what is still missing may be in flight on other streams
        if (AllStreamsClosed()) return Closed(ctx, index, 0);
        return true;
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
        if (errno == EINTR) continue;
        return Closed(ctx, index, errno);
      }
      moved = true;
      st.in_hdr_done += static_cast<size_t>(r);
      if (st.in_hdr_done < hdr) continue;
      if (st.in_hdr.magic != kFrameMagic) {
        return DataLoss("{}: corrupt frame header from {} (stream {}): bad magic {:#x}", ctx.Name(), peer_desc_,
                        index, st.in_hdr.magic);
      }
      st.in_matched = false;
      st.in_payload_done = 0;
    }
    if (!st.in_matched) {
      RecvState* rs = FindRecv(st.in_hdr.seq);
      if (rs == nullptr) return moved;  // not posted yet
      P2pOp* op = rs->op;
      if (st.in_hdr.tag != op->tag || st.in_hdr.message_bytes != op->bytes ||
          st.in_hdr.offset + st.in_hdr.payload_bytes > op->bytes) {
        return Internal(
            "{}: message mismatch from {}: expected tag {} with {} bytes, got tag {} with {} bytes (chunk at offset "
            "{}) (the ranks issued different operations or sizes)",
            ctx.Name(), peer_desc_, op->tag, op->bytes, st.in_hdr.tag, st.in_hdr.message_bytes, st.in_hdr.offset);
      }
      st.in_matched = true;
      st.in_op = op;
      if (op->reduce && st.staging.size() < st.in_hdr.payload_bytes) st.staging.resize(st.in_hdr.payload_bytes);
    }
    P2pOp* op = st.in_op;
    const size_t len = st.in_hdr.payload_bytes;
    if (st.in_payload_done < len) {
      uint8_t* dst = op->reduce ? st.staging.data()
                                : static_cast<uint8_t*>(op->recv_buf) + st.in_hdr.offset;
      const ssize_t r = recv(st.fd, dst + st.in_payload_done, len - st.in_payload_done, MSG_DONTWAIT);
      if (r == 0) return Closed(ctx, index, 0);
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
        if (errno == EINTR) continue;
        return Closed(ctx, index, errno);
      }
      moved = true;
      st.in_payload_done += static_cast<size_t>(r);
      if (st.in_payload_done < len) continue;
    }
    // Frame complete.
    const uint8_t* data = op->reduce ? st.staging.data() : static_cast<uint8_t*>(op->recv_buf) + st.in_hdr.offset;
    if (st.in_hdr.flags & kFlagChecksum) {
      const uint64_t sum = base::Checksum64(data, len);
      if (sum != st.in_hdr.checksum) {
        return DataLoss("{}: frame checksum mismatch from {} (stream {}, message {} bytes at offset {}): data "
                        "corrupted in transit",
                        ctx.Name(), peer_desc_, index, len, st.in_hdr.offset);
      }
    }
    if (op->reduce && len > 0) {
      uint8_t* dst = static_cast<uint8_t*>(op->recv_buf) + st.in_hdr.offset;
      const size_t count = len / DataTypeSize(op->dtype);
      if (op->reduce_src != nullptr) {
        const void* srcs[2] = {static_cast<const uint8_t*>(op->reduce_src) + st.in_hdr.offset, data};
        algo::ReduceMany(dst, srcs, 2, count, op->dtype, op->op == ReduceOp::kAvg ? ReduceOp::kSum : op->op, 0);
      } else {
        algo::ReduceInto(dst, data, count, op->dtype, op->op);
      }
    }
    op->done_bytes += len;
    op->started = true;
    if (op->done_bytes == op->bytes) op->complete = true;
    st.in_hdr_done = 0;
    st.in_matched = false;
    st.in_op = nullptr;
    moved = true;
    while (!recvs_.empty() && recvs_.front().op->complete) recvs_.pop_front();
  }
  return moved;
}

StatusOr<bool> Pair::Progress(const OpContext& ctx) {
  // A receive posted after the peer closed every stream can never complete.
  if (!recvs_.empty() && AllStreamsClosed()) return Closed(ctx, streams_.size() - 1, 0);
  bool moved = false;
  for (size_t i = 0; i < streams_.size(); ++i) {
    StatusOr<bool> out = ProgressOut(streams_[i], i, ctx);
    if (!out.ok()) return out.status();
    StatusOr<bool> in = ProgressIn(streams_[i], i, ctx);
    if (!in.ok()) return in.status();
    moved = moved || *out || *in;
  }
  return moved;
}

void Pair::AddPollFds(Waiter& waiter) const {
  const bool unassigned = HasUnassigned();
  for (const Stream& s : streams_) {
    short events = 0;
    if (s.out_active || unassigned) events |= POLLOUT;
    if (WantsInput(s)) events |= POLLIN;
    if (events) waiter.Add(s.fd, events);
  }
}

}  // namespace tessera::comm::transport::tcp
