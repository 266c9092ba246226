// Pinning kernel threads to CPUs. Ranks that share a host each own a
// slice of its CPUs: `BindKernelThreads(slot, slots)` splits the CPUs this
// process may run on (sched_getaffinity, in OS order) into `slots` equal
// contiguous shares and pins kernel (OpenMP) thread i of the calling
// thread's team to CPU i (mod share size) of share `slot`; the calling
// thread is kernel thread 0. Without pinning, the scheduler migrates a
// rank's threads onto its neighbours' cores (dp2 default-model step
// median 0.0367 s pinned vs 0.0378 s unpinned, 4 runs each, 2 cores).
// Threads created later by the calling thread inherit its one-CPU mask.
// The TESSERA_BIND_THREADS knob (default 1) set to 0 turns it off.
// Call from the thread that runs the kernels, after SetNumThreads.
#pragma once

#include <vector>

#include "tessera/base/status.h"

namespace tessera::hal {

// The OS indices of the CPUs the calling thread may run on (the
// process's, until something pins the thread), ascending.
std::vector<int> AllowedCpus();

// Returns the CPUs the kernel threads were pinned to (thread i on entry i);
// empty when the knob turns pinning off. InvalidArgument (nothing pinned)
// when slot is out of [0, slots) or there are fewer CPUs than slots.
StatusOr<std::vector<int>> BindKernelThreads(int slot, int slots);

}  // namespace tessera::hal
