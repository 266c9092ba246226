// The header at the start of every rank's shm segment (context.h): layout
// of the segment, the group's barrier and abort words, liveness, and the
// buffer-exposure words of single and zero copy (peer_access.cc). Shared
// between processes: plain data and lock-free atomics only. Internal to the
// shm transport.
#pragma once

#include <atomic>
#include <cstdint>

#include "tessera/comm/transport/shm/waiter.h"

namespace tessera::comm::transport::shm {

struct SegmentHeader {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t rank = 0;
  int32_t size = 0;
  int32_t pid = 0;
  uint64_t pidns = 0;
  uint64_t segment_bytes = 0;
  uint64_t chan_offset = 0;
  uint64_t chan_stride = 0;
  uint64_t slot_payload = 0;
  int32_t num_slots = 0;
  uint64_t window_offset = 0;
  uint64_t window_bytes = 0;
  uint64_t ll_offset = 0;
  uint64_t ll_bytes = 0;
  uint64_t self_base = 0;  // this segment's address in its owner's address space (single-copy probe)
  FutexWord doorbell;
  FutexWord barrier;  // the group's counter lives in rank 0's segment
  alignas(64) std::atomic<uint32_t> arrived_step{0};
  alignas(64) std::atomic<int32_t> abort_rank{-1};  // group-wide in rank 0's
  alignas(64) std::atomic<uint32_t> waiting{0};     // this rank is blocked waiting for peers
  // Buffer exposure (context.h): the LL step that published this rank's
  // buffers (0: none exposed), and how many same-process peers are inside.
  alignas(64) std::atomic<uint64_t> exposed{0};
  std::atomic<int32_t> local_users{0};
  char abort_reason[512] = {};
};

}  // namespace tessera::comm::transport::shm
