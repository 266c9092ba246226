// Link recovery of a tcp Pair (pair.h): corrupt payloads (NACK, resend,
// give up after kMaxRetransmits), control frames, dropped streams
// (re-establishing them: the connecting side dials the peer's listener
// again; the accepting side is handed the new socket by Context), resuming
// where the other side stopped receiving, probing whether the peer is still
// there, and giving up when its listener refuses.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tessera/base/logging.h"
#include "tessera/comm/transport/tcp/pair.h"

namespace tessera::comm::transport::tcp {
namespace {

constexpr auto kRetryDelay = std::chrono::milliseconds(50);
constexpr auto kProbeInterval = std::chrono::milliseconds(200);

}  // namespace

Status Pair::OnControlFrame(const FrameHeader& h, size_t index, const OpContext& ctx) {
  switch (h.type) {
    case kFrameAck:
      return Status::Ok();  // h.ack was applied by the caller
    case kFrameNack:
      if (h.seq >= peer_acked_ && FindSend(h.seq) != nullptr) {
        resends_.push_back(Resend{h.seq, h.offset, h.payload_bytes, true});
        internal::CountRetransmit();
        TLOG(DEBUG, "tcp: {} asked for message {} offset {} ({} bytes) again (checksum mismatch): resending",
             peer_desc_, h.seq, h.offset, h.payload_bytes);
      }
      return Status::Ok();
    case kFrameFail:
      return DataLoss(
          "{}: {} could not receive a frame from this rank intact (message {}, {} bytes at offset {}): its checksum "
          "failed {} times, on every resend (a faulty link, NIC or host memory on the path)",
          ctx.Name(), peer_desc_, h.seq, h.payload_bytes, h.offset, h.frame_no);
    default:
      return Desync(index, ctx, fmt::format("unexpected frame type {} on the control stream", h.type));
  }
}

Status Pair::OnCorrupt(const FrameHeader& h, size_t index, const OpContext& ctx) {
  internal::CountCorrupt();
  NackState* n = FindNack(h.seq, h.offset);
  if (n == nullptr) n = &nacks_.emplace_back(NackState{h.seq, h.offset, h.payload_bytes, 0, false});
  ++n->attempts;
  FrameHeader c;
  c.seq = h.seq;
  c.offset = h.offset;
  c.payload_bytes = h.payload_bytes;
  if (n->attempts > kMaxRetransmits) {
    c.type = kFrameFail;
    c.frame_no = static_cast<uint32_t>(n->attempts);
    control_out_.push_front(c);
    ProgressControlOut(streams_[control_], control_);  // best effort: tell the sender why
    return DataLoss(
        "{}: frame from {} (stream {}, message {} of {} bytes, {} bytes at offset {}) failed its checksum {} times; "
        "gave up after {} resends (a faulty link, NIC or host memory on the path)",
        ctx.Name(), peer_desc_, index, h.seq, h.message_bytes, h.payload_bytes, h.offset, n->attempts,
        kMaxRetransmits);
  }
  n->outstanding = true;
  c.type = kFrameNack;
  control_out_.push_back(c);
  TLOG(DEBUG, "tcp: frame from {} failed its checksum (stream {}, message {}, offset {}, attempt {}): asked for a resend",
       peer_desc_, index, h.seq, h.offset, n->attempts);
  return Status::Ok();
}

void Pair::SetFd(Stream& s, int fd) {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (s.fd >= 0) close(s.fd);
  s.fd = fd;
  s.rcvlowat = 1;
  if (fd >= 0 && shut_.load()) shutdown(fd, SHUT_RDWR);  // Shutdown() raced with a reconnection
}

void Pair::StreamDown(size_t index, const std::string& why) {
  Stream& st = streams_[index];
  if (!cfg_.endpoint.known() && st.in_hdr_done > 0) lost_frame_ = true;
  if (st.out_active && index != control_) {
    if (SendState* s = FindSend(st.out_hdr.seq)) --s->inflight;
  }
  st.out_active = false;
  st.out_done = 0;
  st.out_fault = FrameFault::kNone;
  st.in_hdr_done = 0;
  st.in_payload_done = 0;
  st.in_mode = kInHeader;
  st.in_op = nullptr;
  st.reply_done = 0;
  SetFd(st, -1);
  if (index != control_) Settle();
  const Endpoint& ep = cfg_.endpoint;
  if (!ep.known() || shut_.load() || peer_gone_) {
    st.link = Link::kDown;
    if (!ep.known() && !peer_gone_ && !shut_.load()) {
      peer_gone_ = true;  // nobody to reconnect to: what the other streams still carry is all there is
      gone_why_ = fmt::format("stream {}: {}", index, why);
    }
    return;
  }
  st.link = ep.connector ? Link::kConnecting : Link::kWaiting;
  st.retry_at = Clock::now();
  TLOG(DEBUG, "tcp: stream {} to {} dropped ({}); {}", index, peer_desc_, why,
       ep.connector ? "reconnecting" : "waiting for the peer to reconnect");
}

Status Pair::Desync(size_t index, const OpContext& ctx, const std::string& why) {
  internal::CountCorrupt();
  ++header_errors_;
  if (header_errors_ > kMaxRetransmits || !cfg_.endpoint.known()) {
    return DataLoss("{}: stream {} from {} is corrupt: {}{}", ctx.Name(), index, peer_desc_, why,
                    header_errors_ > kMaxRetransmits
                        ? fmt::format(" ({} times in a row; gave up re-establishing it)", header_errors_)
                        : std::string());
  }
  StreamDown(index, why);
  return Status::Ok();
}

void Pair::PeerGone(const std::string& why) {
  if (!peer_gone_) TLOG(DEBUG, "tcp: {} is gone: {}", peer_desc_, why);
  peer_gone_ = true;
  gone_why_ = why;
  for (Stream& s : streams_) {
    if (s.link == Link::kUp) continue;  // may still deliver what it holds
    SetFd(s, -1);
    s.link = Link::kDown;
  }
  if (probe_fd_ >= 0) close(probe_fd_);
  probe_fd_ = -1;
}

bool Pair::ProgressLink(Stream& st, size_t index) {
  const Endpoint& ep = cfg_.endpoint;
  if (st.link == Link::kDown || st.link == Link::kWaiting) return false;
  if (shut_.load()) {
    SetFd(st, -1);
    st.link = Link::kDown;
    return false;
  }
  const auto now = Clock::now();
  if (st.link == Link::kConnecting) {
    if (st.fd < 0) {
      if (now < st.retry_at) return false;
      const int fd = StartConnect(ep.address, ep.port);
      if (fd < 0) {
        if (-fd != ECONNREFUSED) {
          st.retry_at = now + kRetryDelay;
          return false;
        }
        PeerGone(fmt::format("its listener at {}:{} refused to re-establish stream {}", ep.address, ep.port, index));
        return true;
      }
      SetFd(st, fd);
    }
    const int err = PollConnect(st.fd);
    if (err == EINPROGRESS) return false;
    if (err != 0) {
      SetFd(st, -1);
      if (err != ECONNREFUSED) {
        st.retry_at = now + kRetryDelay;
        return false;
      }
      PeerGone(fmt::format("its listener at {}:{} refused to re-establish stream {}", ep.address, ep.port, index));
      return true;
    }
    Hello hello;
    hello.rank = ep.rank;
    hello.stream = static_cast<int32_t>(index);
    std::memcpy(hello.secret, ep.secret, sizeof(hello.secret));
    hello.kind = kHelloReconnect;
    hello.listen_port = ep.listen_port;
    hello.recv_frames = st.in_frames;
    if (!SendSmall(st.fd, &hello, sizeof(hello), 100)) {
      SetFd(st, -1);
      st.retry_at = now + kRetryDelay;
      return false;
    }
    st.link = Link::kHandshake;
    st.reply_done = 0;
    return true;
  }
  // kHandshake: wait for the acceptor's count.
  const int r = RecvSome(st.fd, &st.reply, sizeof(st.reply), &st.reply_done);
  if (r == 0) return false;
  if (r < 0 || st.reply.magic != kHelloMagic) {
    // Refused or the listener went away: dial again (a dead peer refuses).
    SetFd(st, -1);
    st.link = Link::kConnecting;
    st.retry_at = now + kRetryDelay;
    return true;
  }
  Resume(index, st.reply.recv_frames);
  return true;
}

bool Pair::ProgressProbe() {
  const Endpoint& ep = cfg_.endpoint;
  if (ep.connector || !ep.known() || peer_gone_ || shut_.load()) return false;
  const bool waiting =
      std::any_of(streams_.begin(), streams_.end(), [](const Stream& s) { return s.link == Link::kWaiting; });
  if (!waiting) return false;
  const auto now = Clock::now();
  if (probe_fd_ < 0) {
    if (now < next_probe_) return false;
    next_probe_ = now + kProbeInterval;
    const int fd = StartConnect(ep.address, ep.port);
    if (fd >= 0) {
      probe_fd_ = fd;
    } else if (-fd == ECONNREFUSED) {
      PeerGone(fmt::format("its listener at {}:{} refused connections", ep.address, ep.port));
      return true;
    } else {
      return false;
    }
  }
  const int err = PollConnect(probe_fd_);
  if (err == EINPROGRESS) return false;
  if (err == 0) {
    Hello hello;
    hello.rank = ep.rank;
    hello.kind = kHelloProbe;
    SendSmall(probe_fd_, &hello, sizeof(hello), 20);
  }
  close(probe_fd_);
  probe_fd_ = -1;
  if (err != ECONNREFUSED) return false;
  PeerGone(fmt::format("its listener at {}:{} refused connections", ep.address, ep.port));
  return true;
}

bool Pair::AcceptReconnect(int stream, int fd, uint64_t peer_frames) {
  if (shut_.load() || peer_gone_ || stream < 0 || static_cast<size_t>(stream) >= streams_.size()) {
    close(fd);
    return false;
  }
  Stream& st = streams_[stream];
  if (st.link == Link::kUp) StreamDown(stream, "re-established by the peer");
  HelloReply reply;
  reply.recv_frames = st.in_frames;
  if (!SendSmall(fd, &reply, sizeof(reply), 200)) {
    close(fd);
    return false;
  }
  SetFd(st, fd);
  Resume(stream, peer_frames);
  return true;
}

void Pair::Resume(size_t index, uint64_t peer_frames) {
  Stream& st = streams_[index];
  st.link = Link::kUp;
  st.in_hdr_done = 0;
  st.in_payload_done = 0;
  st.in_mode = kInHeader;
  st.in_op = nullptr;
  st.out_active = false;
  st.out_done = 0;
  next_probe_ = {};
  internal::CountReconnect();
  if (index == control_) {
    // Control frames are state, not history: send the current ACK and every
    // NACK still outstanding again (duplicates are harmless).
    ack_forced_ = true;
    control_out_.clear();
    for (const NackState& n : nacks_) {
      if (!n.outstanding) continue;
      FrameHeader c;
      c.type = kFrameNack;
      c.seq = n.seq;
      c.offset = n.offset;
      c.payload_bytes = n.len;
      control_out_.push_back(c);
    }
    TLOG(DEBUG, "tcp: control stream to {} re-established", peer_desc_);
    return;
  }
  // Data frames from number `from` on never arrived whole: send them again
  // (unless their message was acknowledged meanwhile), first.
  const auto from = static_cast<uint32_t>(peer_frames);
  auto lost = [&](const Sent& f) { return static_cast<int32_t>(f.frame_no - from) >= 0; };
  std::vector<Resend> again;
  for (const Sent& f : st.sent) {
    if (lost(f) && f.seq >= peer_acked_) again.push_back(Resend{f.seq, f.offset, f.len, f.retransmit});
  }
  std::erase_if(st.sent, lost);
  st.next_frame = from;
  resends_.insert(resends_.begin(), again.begin(), again.end());
  internal::CountResent(again.size());
  TLOG(DEBUG, "tcp: stream {} to {} re-established; resuming at frame {} ({} frame(s) to send again)", index,
       peer_desc_, from, again.size());
}

}  // namespace tessera::comm::transport::tcp
