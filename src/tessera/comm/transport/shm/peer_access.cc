// Buffer exposure and direct reads of peers' memory (context.h, "Buffer
// exposure"; single copy): ExposeBuffers / WithdrawBuffers on the owner's
// side, EnterPeer / StillExposed / LeavePeer / AccessPeerInPieces on the
// reader's, ReadPeer (memcpy between threads, process_vm_readv between
// processes), and the test hook that stalls a reader mid-transfer.
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "tessera/base/check.h"
#include "tessera/comm/transport/shm/context.h"
#include "tessera/comm/transport/shm/segment_header.h"

namespace tessera::comm::transport::shm {

namespace {
std::atomic<PeerAccessHook> g_peer_access_hook{nullptr};
}  // namespace

void SetPeerAccessHookForTesting(PeerAccessHook hook) { g_peer_access_hook.store(hook, std::memory_order_seq_cst); }

void Context::ExposeBuffers() {
  // The publishing LL step is number ll_steps_ + 1 on every rank (LL steps
  // run in lockstep; a 64-bit count, never 0, never wraps), so peers
  // recognise this exposure by it.
  headers_[rank_]->exposed.store(ll_steps_ + 1, std::memory_order_seq_cst);
}

void Context::WithdrawBuffers() {
  SegmentHeader* me = headers_[rank_];
  if (me->exposed.load(std::memory_order_relaxed) == 0) return;
  // Dekker-style with EnterPeer (all seq_cst): either a peer sees the
  // withdrawal and stays out, or this rank sees it inside and waits.
  me->exposed.store(0, std::memory_order_seq_cst);
  if (me->local_users.load(std::memory_order_seq_cst) == 0) return;
  // A peer thread inside finishes its current piece (<= kPeerPiece bytes)
  // and leaves when it re-checks. It cannot be stopped on its own (it is a
  // thread of this process), so this wait is short; the bound only turns
  // a bug into a clear failure instead of a use-after-free.
  const int64_t give_up = NowNs() + 120'000'000'000;
  while (me->local_users.load(std::memory_order_seq_cst) != 0) {
    TESSERA_CHECK(NowNs() < give_up,
                  "shm rank {}: a peer thread stayed inside this rank's buffers for 120 s after it left the "
                  "operation; refusing to return while the memory may still be in use",
                  rank_);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status Context::EnterPeer(int peer, const OpContext& ctx) const {
  if (!SameProcess(peer)) return Status::Ok();
  SegmentHeader* h = headers_[peer];
  h->local_users.fetch_add(1, std::memory_order_seq_cst);
  if (h->exposed.load(std::memory_order_seq_cst) != ll_steps_) {
    h->local_users.fetch_sub(1, std::memory_order_seq_cst);
    return Aborted("{}: {} withdrew its buffers (it left the operation: it failed or timed out)", ctx.Name(),
                   PeerDescription(peer));
  }
  Status st = StillExposed(peer, ctx);
  if (!st.ok()) h->local_users.fetch_sub(1, std::memory_order_seq_cst);
  return st;
}

void Context::LeavePeer(int peer) const {
  if (SameProcess(peer)) headers_[peer]->local_users.fetch_sub(1, std::memory_order_seq_cst);
}

Status Context::StillExposed(int peer, const OpContext& ctx) const {
  if (PeerAccessHook hook = g_peer_access_hook.load(std::memory_order_seq_cst)) hook(rank_, peer);
  if (ctx.Aborted()) return Aborted("{}: aborted on this rank (Communicator::Abort)", ctx.Name());
  if (SameProcess(peer) && headers_[peer]->exposed.load(std::memory_order_seq_cst) != ll_steps_) {
    return Aborted("{}: {} withdrew its buffers (it left the operation: it failed or timed out)", ctx.Name(),
                   PeerDescription(peer));
  }
  return Status::Ok();
}

Status Context::AccessPeerInPieces(int peer, size_t bytes, const std::function<void(size_t, size_t)>& fn,
                                   const OpContext& ctx) const {
  TESSERA_RETURN_IF_ERROR(EnterPeer(peer, ctx));
  Status st;
  for (size_t off = 0; off < bytes && st.ok(); off += kPeerPiece) {
    if (off > 0) st = StillExposed(peer, ctx);
    if (st.ok()) fn(off, std::min(kPeerPiece, bytes - off));
  }
  LeavePeer(peer);
  return st;
}

Status Context::ReadPeer(int peer, void* dst, const void* remote, size_t bytes, const OpContext& ctx) const {
  if (bytes == 0) return Status::Ok();
  if (SameProcess(peer)) {  // ranks as threads: one address space
    auto* d = static_cast<uint8_t*>(dst);
    const auto* r = static_cast<const uint8_t*>(remote);
    return AccessPeerInPieces(peer, bytes, [&](size_t off, size_t len) { std::memcpy(d + off, r + off, len); }, ctx);
  }
  constexpr size_t kPiece = 8 << 20;  // check for abort between pieces
  auto* l = static_cast<uint8_t*>(dst);
  auto* r = static_cast<uint8_t*>(const_cast<void*>(remote));
  size_t done = 0;
  while (done < bytes) {
    if (ctx.Aborted()) return Aborted("{}: aborted on this rank (Communicator::Abort)", ctx.Name());
    const size_t want = std::min(kPiece, bytes - done);
    iovec li{l + done, want};
    iovec ri{r + done, want};
    const ssize_t got = process_vm_readv(pids_[peer], &li, 1, &ri, 1, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      const int err = errno;
      // A peer that gave up first (and exited) published why: report the cause.
      Status cause = GroupAbortStatus(ctx);
      if (!cause.ok()) return cause;
      errno = err;
      return Unavailable("{}: reading {} bytes from {} failed: {} (it died or exited)", ctx.Name(), want,
                         PeerDescription(peer), got < 0 ? std::strerror(errno) : "nothing moved");
    }
    done += static_cast<size_t>(got);
  }
  return Status::Ok();
}

Status Context::ReadPeerGather(int peer, std::span<const iovec> local, std::span<const iovec> remote,
                               const OpContext& ctx) const {
  if (local.size() != remote.size()) {
    return Internal("{}: {} local and {} remote pieces", ctx.Name(), local.size(), remote.size());
  }
  if (local.empty()) return Status::Ok();
  if (SameProcess(peer)) {
    TESSERA_RETURN_IF_ERROR(EnterPeer(peer, ctx));
    Status st;
    size_t since_check = 0;
    for (size_t i = 0; i < local.size() && st.ok(); ++i) {
      std::memcpy(local[i].iov_base, remote[i].iov_base, local[i].iov_len);
      since_check += local[i].iov_len;
      if (since_check >= kPeerPiece) {
        since_check = 0;
        st = StillExposed(peer, ctx);
      }
    }
    LeavePeer(peer);
    return st;
  }
  constexpr size_t kBatch = 1024;  // IOV_MAX
  for (size_t at = 0; at < local.size(); at += kBatch) {
    if (ctx.Aborted()) return Aborted("{}: aborted on this rank (Communicator::Abort)", ctx.Name());
    const size_t n = std::min(kBatch, local.size() - at);
    size_t want = 0;
    for (size_t i = 0; i < n; ++i) want += local[at + i].iov_len;
    ssize_t got;
    do {
      got = process_vm_readv(pids_[peer], local.data() + at, n, remote.data() + at, n, 0);
    } while (got < 0 && errno == EINTR);
    if (got != static_cast<ssize_t>(want)) {
      const int err = errno;
      Status cause = GroupAbortStatus(ctx);
      if (!cause.ok()) return cause;
      return Unavailable("{}: reading {} pieces ({} bytes) from {} failed: {} (it died or exited)", ctx.Name(), n,
                         want, PeerDescription(peer), got < 0 ? std::strerror(err) : "a short read");
    }
  }
  return Status::Ok();
}

}  // namespace tessera::comm::transport::shm
