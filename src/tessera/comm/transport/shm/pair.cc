#include "tessera/comm/transport/shm/pair.h"

#include <algorithm>
#include <cstring>

#include "tessera/comm/algo/reduce_kernels.h"

namespace tessera::comm::transport::shm {

bool Pair::ProgressSend(P2pOp& op) {
  bool moved = false;
  uint32_t head = out_.ctl->head.load(std::memory_order_relaxed);
  while (!op.complete) {
    const uint32_t tail = out_.ctl->tail.load(std::memory_order_acquire);
    if (head - tail >= static_cast<uint32_t>(out_.num_slots)) break;  // ring full
    const size_t piece = std::min(out_.slot_payload, op.bytes - op.done_bytes);
    SlotHeader* h = out_.Header(head);
    h->tag = op.tag;
    h->payload_bytes = static_cast<uint32_t>(piece);
    h->message_bytes = op.bytes;
    h->offset = op.done_bytes;
    if (piece > 0) std::memcpy(out_.Payload(head), static_cast<const uint8_t*>(op.send_buf) + op.done_bytes, piece);
    ++head;
    out_.ctl->head.store(head, std::memory_order_release);
    op.done_bytes += piece;
    op.started = true;
    if (op.done_bytes == op.bytes) op.complete = true;
    moved = true;
  }
  if (moved) Ring(*peer_doorbell_);
  return moved;
}

StatusOr<bool> Pair::ProgressRecv(P2pOp& op, const OpContext& ctx) {
  bool moved = false;
  uint32_t tail = in_.ctl->tail.load(std::memory_order_relaxed);
  while (!op.complete) {
    const uint32_t head = in_.ctl->head.load(std::memory_order_acquire);
    if (tail == head) break;
    const SlotHeader* h = in_.Header(tail);
    if (h->tag != op.tag || h->message_bytes != op.bytes || h->offset != op.done_bytes ||
        h->payload_bytes > op.bytes - op.done_bytes) {
      return Internal(
          "{}: message mismatch from rank {}: expected tag {} with {} bytes at offset {}, got tag {} with {} bytes "
          "at offset {} (the ranks issued different operations or sizes)",
          ctx.Name(), peer_, op.tag, op.bytes, op.done_bytes, h->tag, h->message_bytes, h->offset);
    }
    const size_t piece = h->payload_bytes;
    uint8_t* dst = static_cast<uint8_t*>(op.recv_buf) + op.done_bytes;
    if (piece > 0) {
      if (op.reduce) {
        const size_t elem = DataTypeSize(op.dtype);
        if (op.reduce_src != nullptr) {
          const void* srcs[2] = {static_cast<const uint8_t*>(op.reduce_src) + op.done_bytes, in_.Payload(tail)};
          algo::ReduceMany(dst, srcs, 2, piece / elem, op.dtype, op.op == ReduceOp::kAvg ? ReduceOp::kSum : op.op, 0);
        } else {
          algo::ReduceInto(dst, in_.Payload(tail), piece / elem, op.dtype, op.op);
        }
      } else {
        std::memcpy(dst, in_.Payload(tail), piece);
      }
    }
    ++tail;
    in_.ctl->tail.store(tail, std::memory_order_release);
    op.done_bytes += piece;
    op.started = true;
    if (op.done_bytes == op.bytes) op.complete = true;
    moved = true;
  }
  if (moved) Ring(*peer_doorbell_);
  return moved;
}

uint32_t Pair::OutstandingOut() const {
  return out_.ctl->head.load(std::memory_order_acquire) - out_.ctl->tail.load(std::memory_order_acquire);
}

uint32_t Pair::PendingIn() const {
  return in_.ctl->head.load(std::memory_order_acquire) - in_.ctl->tail.load(std::memory_order_acquire);
}

}  // namespace tessera::comm::transport::shm
