// The data path of a tcp Pair (pair.h): posting, frame assignment, writing
// data and control frames, reading and checking frames, acknowledgements.
// NACKs, dropped streams and reconnection: pair_link.cc.
#include "tessera/comm/transport/tcp/pair.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tessera/base/check.h"
#include "tessera/base/logging.h"
#include "tessera/comm/algo/reduce_kernels.h"

namespace tessera::comm::transport::tcp {
namespace {

constexpr size_t kHdr = sizeof(FrameHeader);
constexpr size_t kSummed = offsetof(FrameHeader, header_sum);

uint64_t PayloadSum(const uint8_t* p, size_t n) { return n == 0 ? 0 : FrameChecksum(p, n); }

void Seal(FrameHeader& h, bool checksum) {
  h.magic = kFrameMagic;
  if (checksum) h.flags |= kFlagChecksum;
  h.header_sum = checksum ? FrameChecksum(&h, kSummed) : 0;
}

bool HeaderOk(const FrameHeader& h) {
  if (h.magic != kFrameMagic) return false;
  return !(h.flags & kFlagChecksum) || h.header_sum == FrameChecksum(&h, kSummed);
}

}  // namespace

Pair::Pair(int peer, std::vector<int> fds, Config config, std::string peer_desc)
    : peer_(peer), cfg_(std::move(config)), peer_desc_(std::move(peer_desc)) {
  TESSERA_CHECK(fds.size() >= 2, "tcp pair needs a data and a control stream, got {} socket(s)", fds.size());
  streams_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) streams_[i].fd = fds[i];
  control_ = fds.size() - 1;
}

Pair::~Pair() {
  for (Stream& s : streams_) {
    if (s.fd >= 0) close(s.fd);
  }
  if (probe_fd_ >= 0) close(probe_fd_);
}

void Pair::Shutdown() {
  shut_.store(true);
  std::lock_guard<std::mutex> lock(fd_mu_);
  for (Stream& s : streams_) {
    if (s.fd >= 0) shutdown(s.fd, SHUT_RDWR);
  }
}

void Pair::Post(P2pOp* op) {
  if (op->kind == P2pOp::Kind::kSend) {
    SendState& s = sends_.emplace_back();
    s.op = op;
    s.seq = next_send_seq_++;
    s.tag = op->tag;
    s.bytes = op->bytes;
    if (op->bytes <= kEagerBytes) {
      s.eager = true;
      const auto* p = static_cast<const uint8_t*>(op->send_buf);
      if (op->bytes > 0) s.copy.assign(p, p + op->bytes);
    }
  } else {
    recvs_.push_back(RecvState{op, next_recv_seq_++});
  }
}

const uint8_t* Pair::Data(const SendState& s) const {
  return s.eager ? s.copy.data() : static_cast<const uint8_t*>(s.op->send_buf);
}

Pair::SendState* Pair::FindSend(uint64_t seq) {
  for (SendState& s : sends_) {
    if (s.seq == seq) return &s;
  }
  return nullptr;
}

Pair::RecvState* Pair::FindRecv(uint64_t seq) {
  for (RecvState& r : recvs_) {
    if (r.seq == seq) return &r;
  }
  return nullptr;
}

Pair::NackState* Pair::FindNack(uint64_t seq, uint64_t offset) {
  for (NackState& n : nacks_) {
    if (n.seq == seq && n.offset == offset) return &n;
  }
  return nullptr;
}

uint64_t Pair::RecvDone() const { return recvs_.empty() ? next_recv_seq_ : recvs_.front().seq; }

bool Pair::HasUnassigned() const {
  if (!resends_.empty()) return true;
  for (const SendState& s : sends_) {
    if (s.bytes == 0 ? !s.empty_frame_assigned : s.assigned < s.bytes) return true;
  }
  return false;
}

bool Pair::ControlPending() const { return !control_out_.empty() || ack_forced_ || RecvDone() != ack_sent_; }

bool Pair::HasPendingOps() const {
  if (!recvs_.empty()) return true;
  for (const SendState& s : sends_) {
    if (s.op != nullptr) return true;
  }
  return false;
}

bool Pair::HasBackgroundWork() const {
  if (!sends_.empty() || !resends_.empty() || ControlPending() || probe_fd_ >= 0) return true;
  for (const Stream& s : streams_) {
    if (s.link != Link::kUp && s.link != Link::kDown) return true;
  }
  return false;
}

// A data stream whose next frame belongs to a receive not posted yet.
bool Pair::Stalled(const Stream& s) const {
  return s.in_hdr_done == kHdr && s.in_mode == kInHeader && !(s.in_hdr.flags & kFlagRetransmit) &&
         s.in_hdr.seq >= next_recv_seq_;
}

bool Pair::WantsInput(const Stream& s) const { return s.link == Link::kUp && !Stalled(s); }

// Completes sends: acknowledged ones (large), written ones (eager), and
// forgets those acknowledged with no frame still being written.
void Pair::Settle() {
  for (SendState& s : sends_) {
    if (s.op == nullptr || s.inflight > 0) continue;
    bool done = s.acked;
    if (!done && s.eager && (s.bytes == 0 ? s.empty_frame_assigned : s.assigned == s.bytes)) {
      done = std::none_of(resends_.begin(), resends_.end(), [&](const Resend& r) { return r.seq == s.seq; });
    }
    if (done) {
      s.op->done_bytes = s.bytes;
      s.op->complete = true;
      s.op = nullptr;
    }
  }
  while (!sends_.empty() && sends_.front().acked && sends_.front().op == nullptr && sends_.front().inflight == 0) {
    sends_.pop_front();
  }
}

void Pair::OnAck(uint64_t acked) {
  if (acked <= peer_acked_) return;
  peer_acked_ = acked;
  for (SendState& s : sends_) {
    if (s.seq < acked) s.acked = true;
  }
  std::erase_if(resends_, [&](const Resend& r) { return r.seq < acked; });
  for (size_t i = 0; i < control_; ++i) {
    auto& sent = streams_[i].sent;
    while (!sent.empty() && sent.front().seq < acked) sent.pop_front();
  }
  Settle();
}

void Pair::StartFrame(Stream& st, size_t index, SendState& s, uint64_t offset, uint32_t len, bool retransmit) {
  FrameHeader& h = st.out_hdr;
  h = FrameHeader{};
  h.type = kFrameData;
  h.flags = retransmit ? kFlagRetransmit : 0;
  h.tag = s.tag;
  h.seq = s.seq;
  h.message_bytes = s.bytes;
  h.offset = offset;
  h.payload_bytes = len;
  h.frame_no = st.next_frame++;
  h.ack = RecvDone();
  const uint8_t* p = len > 0 ? Data(s) + offset : nullptr;
  if (cfg_.checksum) h.checksum = PayloadSum(p, len);
  Seal(h, cfg_.checksum);
  st.sent.push_back(Sent{h.frame_no, retransmit, len, s.seq, offset});
  internal::CountStreamBytes(index, kHdr + len);
  if (StreamPaceHook pace = internal::StreamPaceHookNow()) {
    const double rate = pace(cfg_.endpoint.rank, peer_, static_cast<int>(index));
    if (rate > 0) {
      st.paced_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(static_cast<double>(kHdr + len) / rate));
    }
  }
  ++s.inflight;
  st.out_payload = p;
  st.out_active = true;
  st.out_done = 0;
  st.out_fault = FrameFault::kNone;
  if (FrameFaultHook hook = internal::FrameFaultHookNow()) {
    const FrameFault f = hook(cfg_.endpoint.rank, peer_, static_cast<int>(index), h);
    if (f == FrameFault::kFlipBit && len > 0) {
      st.wire_copy.assign(p, p + len);
      st.wire_copy[len / 2] ^= 0x10;
      st.out_payload = st.wire_copy.data();
    } else if (f == FrameFault::kShutdownStream) {
      st.out_fault = f;
    }
  }
}

bool Pair::Paced(const Stream& s) {
  return s.paced_until != Clock::time_point{} && Clock::now() < s.paced_until;
}

bool Pair::AssignFrame(Stream& st, size_t index) {
  while (!resends_.empty()) {
    const Resend r = resends_.front();
    resends_.pop_front();
    SendState* s = FindSend(r.seq);
    if (s == nullptr || s->acked) continue;
    StartFrame(st, index, *s, r.offset, r.len, r.retransmit);
    return true;
  }
  for (SendState& s : sends_) {
    const bool pending = s.bytes == 0 ? !s.empty_frame_assigned : s.assigned < s.bytes;
    if (!pending) continue;
    const size_t piece = std::min(cfg_.chunk_bytes, s.bytes - s.assigned);
    StartFrame(st, index, s, s.assigned, static_cast<uint32_t>(piece), false);
    s.assigned += piece;
    if (s.bytes == 0) s.empty_frame_assigned = true;
    if (s.op != nullptr) s.op->started = true;
    return true;
  }
  return false;
}

bool Pair::ProgressOut(Stream& st, size_t index) {
  bool moved = false;
  while (st.link == Link::kUp) {
    if (!st.out_active && (Paced(st) || !AssignFrame(st, index))) return moved;
    const size_t total = kHdr + st.out_hdr.payload_bytes;
    // Fault injection: write half the frame, then shut the socket down.
    const size_t limit = st.out_fault == FrameFault::kShutdownStream ? kHdr + st.out_hdr.payload_bytes / 2 : total;
    iovec iov[2];
    int n = 0;
    if (st.out_done < kHdr) {
      iov[n++] = {reinterpret_cast<uint8_t*>(&st.out_hdr) + st.out_done, kHdr - st.out_done};
      if (limit > kHdr) iov[n++] = {const_cast<uint8_t*>(st.out_payload), limit - kHdr};
    } else {
      iov[n++] = {const_cast<uint8_t*>(st.out_payload) + (st.out_done - kHdr), limit - st.out_done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    const ssize_t w = sendmsg(st.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      if (errno == EINTR) continue;
      StreamDown(index, std::strerror(errno));
      return true;
    }
    moved = true;
    st.out_done += static_cast<size_t>(w);
    if (st.out_fault == FrameFault::kShutdownStream && st.out_done >= limit) {
      st.out_fault = FrameFault::kNone;
      shutdown(st.fd, SHUT_RDWR);  // the next write fails: the stream is re-established
      continue;
    }
    if (st.out_done < total) continue;
    st.out_active = false;
    if (SendState* s = FindSend(st.out_hdr.seq)) {
      --s->inflight;
      if (s->op != nullptr && !(st.out_hdr.flags & kFlagRetransmit)) {
        s->op->done_bytes = std::min(s->bytes, s->op->done_bytes + st.out_hdr.payload_bytes);
      }
    }
    Settle();
  }
  return moved;
}

bool Pair::ProgressControlOut(Stream& st, size_t index) {
  bool moved = false;
  while (st.link == Link::kUp) {
    if (!st.out_active) {
      FrameHeader h;
      if (!control_out_.empty()) {
        h = control_out_.front();
        control_out_.pop_front();
      } else if (ack_forced_ || RecvDone() != ack_sent_) {
        h.type = kFrameAck;
        ack_forced_ = false;
      } else {
        return moved;
      }
      h.ack = ack_sent_ = RecvDone();
      Seal(h, cfg_.checksum);
      st.out_hdr = h;
      st.out_active = true;
      st.out_done = 0;
    }
    const ssize_t w = send(st.fd, reinterpret_cast<uint8_t*>(&st.out_hdr) + st.out_done, kHdr - st.out_done,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      if (errno == EINTR) continue;
      StreamDown(index, std::strerror(errno));  // NACKs and the ACK are sent again once re-established
      return true;
    }
    moved = true;
    st.out_done += static_cast<size_t>(w);
    if (st.out_done == kHdr) st.out_active = false;
  }
  return moved;
}

Status Pair::Closed(const OpContext& ctx) const {
  return Unavailable("{}: {} closed the connection ({}): it exited, died or aborted", ctx.Name(), peer_desc_,
                     gone_why_.empty() ? "every stream" : gone_why_);
}

// Header read: decides where the payload goes (or that it waits).
Status Pair::MatchFrame(Stream& st, size_t index, const OpContext& ctx, bool* stalled) {
  const FrameHeader& h = st.in_hdr;
  *stalled = false;
  if (h.flags & kFlagRetransmit) {
    NackState* n = FindNack(h.seq, h.offset);
    if (n == nullptr || !n->outstanding) {
      st.in_mode = kInDiscard;  // a duplicate resend
      if (st.staging.size() < h.payload_bytes) st.staging.resize(h.payload_bytes);
      return Status::Ok();
    }
  }
  RecvState* rs = FindRecv(h.seq);
  if (rs == nullptr) {
    if (h.seq < next_recv_seq_) {  // only resends may come for a completed message
      return Desync(index, ctx, fmt::format("first copy of message {} after it completed", h.seq));
    }
    *stalled = true;  // not posted yet
    return Status::Ok();
  }
  P2pOp* op = rs->op;
  if (h.tag != op->tag || h.message_bytes != op->bytes || h.offset + h.payload_bytes > op->bytes) {
    return Internal(
        "{}: message mismatch from {}: expected tag {} with {} bytes, got tag {} with {} bytes (chunk at offset {}) "
        "(the ranks issued different operations or sizes)",
        ctx.Name(), peer_desc_, op->tag, op->bytes, h.tag, h.message_bytes, h.offset);
  }
  st.in_mode = kInPayload;
  st.in_op = op;
  if (op->reduce && st.staging.size() < h.payload_bytes) st.staging.resize(h.payload_bytes);
  return Status::Ok();
}

void Pair::SetLowat(Stream& s, size_t bytes) const {
  const int want = static_cast<int>(std::clamp<size_t>(bytes, 1, std::max<size_t>(cfg_.max_rcvlowat, 1)));
  if (want == s.rcvlowat || s.fd < 0) return;
  if (setsockopt(s.fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0) s.rcvlowat = want;
}

StatusOr<bool> Pair::ProgressIn(Stream& st, size_t index, const OpContext& ctx) {
  bool moved = false;
  while (WantsInput(st)) {
    if (st.in_hdr_done < kHdr) {
      const ssize_t r =
          recv(st.fd, reinterpret_cast<uint8_t*>(&st.in_hdr) + st.in_hdr_done, kHdr - st.in_hdr_done, MSG_DONTWAIT);
      if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          SetLowat(st, 1);  // (a header: any byte wakes)
          return moved;
        }
        if (r < 0 && errno == EINTR) continue;
        StreamDown(index, r == 0 ? "closed by the peer" : std::strerror(errno));
        return true;
      }
      moved = true;
      st.in_hdr_done += static_cast<size_t>(r);
      if (st.in_hdr_done < kHdr) continue;
      const FrameHeader& h = st.in_hdr;
      const bool data = index != control_;
      if (!HeaderOk(h) || (data && (h.type != kFrameData || h.frame_no != st.in_frames))) {
        TESSERA_RETURN_IF_ERROR(Desync(index, ctx, HeaderOk(h) ? fmt::format("frame {} out of order (expected {})",
                                                                              h.frame_no, st.in_frames)
                                                               : std::string("corrupt frame header")));
        return true;
      }
      header_errors_ = 0;
      OnAck(h.ack);
      if (!data) {
        st.in_hdr_done = 0;
        TESSERA_RETURN_IF_ERROR(OnControlFrame(h, index, ctx));
        continue;
      }
      st.in_mode = kInHeader;
      st.in_payload_done = 0;
    }
    if (st.in_mode == kInHeader) {
      bool stalled = false;
      TESSERA_RETURN_IF_ERROR(MatchFrame(st, index, ctx, &stalled));
      if (stalled) SetLowat(st, 1);  // whatever comes next must wake the wait
      if (stalled || st.link != Link::kUp) return moved;
    }
    const FrameHeader& h = st.in_hdr;
    P2pOp* op = st.in_op;
    const bool staged = st.in_mode == kInDiscard || op->reduce;
    const size_t len = h.payload_bytes;
    uint8_t* data = staged ? st.staging.data() : static_cast<uint8_t*>(op->recv_buf) + h.offset;
    if (st.in_payload_done < len) {
      const ssize_t r = recv(st.fd, data + st.in_payload_done, len - st.in_payload_done, MSG_DONTWAIT);
      if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          if (index != control_) SetLowat(st, len - st.in_payload_done);
          return moved;
        }
        if (r < 0 && errno == EINTR) continue;
        StreamDown(index, r == 0 ? "closed by the peer mid-frame" : std::strerror(errno));
        return true;
      }
      moved = true;
      st.in_payload_done += static_cast<size_t>(r);
      if (st.in_payload_done < len) continue;
    }
    // Frame complete.
    ++st.in_frames;
    st.in_hdr_done = 0;
    st.in_op = nullptr;
    moved = true;
    if (st.in_mode == kInDiscard) continue;
    if ((h.flags & kFlagChecksum) && PayloadSum(data, len) != h.checksum) {
      TESSERA_RETURN_IF_ERROR(OnCorrupt(h, index, ctx));
      continue;
    }
    if (h.flags & kFlagRetransmit) {
      std::erase_if(nacks_, [&](const NackState& n) { return n.seq == h.seq && n.offset == h.offset; });
    }
    if (op->reduce && len > 0) {
      uint8_t* dst = static_cast<uint8_t*>(op->recv_buf) + h.offset;
      const size_t count = len / DataTypeSize(op->dtype);
      if (op->reduce_src != nullptr) {
        const void* srcs[2] = {static_cast<const uint8_t*>(op->reduce_src) + h.offset, data};
        algo::ReduceMany(dst, srcs, 2, count, op->dtype, op->op == ReduceOp::kAvg ? ReduceOp::kSum : op->op, 0);
      } else {
        algo::ReduceInto(dst, data, count, op->dtype, op->op);
      }
    }
    op->done_bytes += len;
    op->started = true;
    if (op->done_bytes == op->bytes) op->complete = true;
    while (!recvs_.empty() && recvs_.front().op->complete) {
      const uint64_t seq = recvs_.front().seq;
      std::erase_if(nacks_, [&](const NackState& n) { return n.seq == seq; });
      recvs_.pop_front();
    }
  }
  return moved;
}

StatusOr<bool> Pair::Progress(const OpContext& ctx) {
  bool moved = false;
  for (size_t i = 0; i < streams_.size(); ++i) {
    Stream& s = streams_[i];
    if (s.link != Link::kUp) {
      moved = ProgressLink(s, i) || moved;
      if (s.link != Link::kUp) continue;
    }
    if (i == control_) {
      StatusOr<bool> in = ProgressIn(s, i, ctx);
      if (!in.ok()) return in.status();
      moved = ProgressControlOut(s, i) || *in || moved;  // acknowledges what the data streams completed
    } else {
      moved = ProgressOut(s, i) || moved;
      StatusOr<bool> in = ProgressIn(s, i, ctx);
      if (!in.ok()) return in.status();
      moved = *in || moved;
    }
  }
  moved = ProgressProbe() || moved;
  if (peer_gone_ && HasPendingOps()) {
    // Fail once no stream can deliver anything more.
    const bool any = std::any_of(streams_.begin(), streams_.end(), [&](const Stream& s) { return WantsInput(s); });
    if (!any || lost_frame_) return Closed(ctx);
  }
  return moved;
}

void Pair::AddPollFds(Waiter& waiter) const {
  const bool unassigned = HasUnassigned();
  for (size_t i = 0; i < streams_.size(); ++i) {
    const Stream& s = streams_[i];
    short events = 0;
    switch (s.link) {
      case Link::kUp:
        if (WantsInput(s)) events |= POLLIN;
        if (s.out_active || (i == control_ ? ControlPending() : unassigned && !Paced(s))) events |= POLLOUT;
        break;
      case Link::kConnecting:
        if (s.fd >= 0) events |= POLLOUT;
        break;
      case Link::kHandshake:
        events |= POLLIN;
        break;
      default:
        break;
    }
    if (events != 0 && s.fd >= 0) waiter.Add(s.fd, events);
  }
  if (probe_fd_ >= 0) waiter.Add(probe_fd_, POLLOUT);
}

}  // namespace tessera::comm::transport::tcp
