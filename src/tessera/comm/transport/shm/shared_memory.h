// Memory that same-host peers can map: the shm transport's zero-copy
// buffers (NCCL's ncclMemAlloc / symmetric memory, DeepEP's NVSHMEM
// buffers). AllocShared backs each allocation with its own memfd
// (MAP_SHARED, pre-faulted, named "tessera-shared-<id>"); a process-wide
// registry remembers every live allocation so a collective can ask whether
// its buffers lie inside one (FindShared) and publish a SharedRef that its
// peers map (shm::Context::MapShared opens /proc/<pid>/fd/<fd>, checks the
// name and size, and caches the mapping). Buffers of plain malloc'd memory
// take the copying paths; results are the same either way.
// Thread-safe (one mutex around the registry).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/base/status.h"

namespace tessera::comm::transport::shm {

// Where a buffer lies inside a shared allocation: what a peer needs to map
// it. `addr` is the buffer's address in the owner (used by ranks that are
// threads of the owner's process).
struct SharedRef {
  uint64_t id = 0;      // unique per allocation in its process (never reused)
  uint64_t fd = 0;      // the memfd in the owner process
  uint64_t bytes = 0;   // the whole allocation
  uint64_t offset = 0;  // of the buffer inside it
  uint64_t addr = 0;    // of the buffer in the owner's address space
  static constexpr int kWords = 5;
};

// Allocates `bytes` (> 0, rounded up to pages) of shared memory, zeroed and
// pre-faulted. Fails with ResourceExhausted naming the size.
StatusOr<void*> AllocShared(size_t bytes);
// Frees memory from AllocShared (nullptr: no-op). Fails with InvalidArgument
// for any other pointer. Peers that mapped it keep their mapping (and its
// pages) until they evict it from their cache.
Status FreeShared(void* ptr);
// True (and *ref filled) when [ptr, ptr + bytes) lies inside one live shared
// allocation. bytes may be 0 (then ptr itself must lie inside).
bool FindShared(const void* ptr, size_t bytes, SharedRef* ref);
// The memfd name of allocation `id` ("tessera-shared-<id>").
std::string SharedName(uint64_t id);

}  // namespace tessera::comm::transport::shm
