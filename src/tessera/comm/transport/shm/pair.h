// One shm point-to-point channel pair between this rank and a peer: an
// outgoing ring of slots in this rank's segment (the peer reads it in
// place) and the incoming ring in the peer's segment (this rank reads it in
// place). No socket or pipe: the sender copies a piece of the message into
// a free slot and bumps `head`; the receiver copies (or reduces) the slot
// straight into the destination buffer and bumps `tail`; each side rings
// the other's doorbell (a futex word) so a sleeping peer wakes.
// Messages span as many slots as they need; each slot names the message's
// tag, total size and the offset of its piece, so a receive that expects
// another tag or size fails with both named. Used only by the owning
// Context's executor thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tessera/base/status.h"
#include "tessera/comm/transport/shm/waiter.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::transport::shm {

struct ChannelCtl {
  alignas(64) std::atomic<uint32_t> head{0};  // slots published (sender writes)
  alignas(64) std::atomic<uint32_t> tail{0};  // slots consumed (receiver writes)
};
static_assert(sizeof(ChannelCtl) == 128);

struct alignas(64) SlotHeader {
  uint32_t tag = 0;
  uint32_t payload_bytes = 0;
  uint64_t message_bytes = 0;
  uint64_t offset = 0;
};
static_assert(sizeof(SlotHeader) == 64);

// Where one directed channel lives (in the sender's segment).
struct ChannelView {
  ChannelCtl* ctl = nullptr;
  uint8_t* slots = nullptr;  // num_slots x (SlotHeader + slot_payload)
  int num_slots = 0;
  size_t slot_payload = 0;   // multiple of 64

  SlotHeader* Header(uint32_t index) const {
    return reinterpret_cast<SlotHeader*>(slots + (index % num_slots) * (sizeof(SlotHeader) + slot_payload));
  }
  uint8_t* Payload(uint32_t index) const { return reinterpret_cast<uint8_t*>(Header(index)) + sizeof(SlotHeader); }
};

class Pair {
 public:
  Pair() = default;
  Pair(int peer, ChannelView out, ChannelView in, FutexWord* my_doorbell, FutexWord* peer_doorbell)
      : peer_(peer), out_(out), in_(in), my_doorbell_(my_doorbell), peer_doorbell_(peer_doorbell) {}

  int peer() const { return peer_; }

  // Copies as much of `op` (a send) into free slots as fits; true if any
  // slot was filled.
  bool ProgressSend(P2pOp& op);
  // Consumes published slots of the current message into `op` (a recv);
  // true if any slot was consumed. Errors on tag/size mismatch.
  StatusOr<bool> ProgressRecv(P2pOp& op, const OpContext& ctx);

  // Slots published to the peer but not yet consumed (diagnostics).
  uint32_t OutstandingOut() const;
  // Slots the peer published to us that we have not consumed.
  uint32_t PendingIn() const;

 private:
  int peer_ = -1;
  ChannelView out_;
  ChannelView in_;
  FutexWord* my_doorbell_ = nullptr;
  FutexWord* peer_doorbell_ = nullptr;
};

}  // namespace tessera::comm::transport::shm
