// PyTorch's THP_MEM_ALLOC_ENABLE for PyTorch 1.13: PyTorch 2.1 added this
// switch to its CPU allocator (c10/core/impl/alloc_cpu.cpp); Debian's 1.13
// lacks it. With THP_MEM_ALLOC_ENABLE=1 in the environment, importing
// tessera.torch installs a CPU allocator that does what PyTorch 2.1's does:
// allocations of 2 MiB or more are 2 MiB aligned (posix_memalign) and
// advised for transparent huge pages (madvise MADV_HUGEPAGE), so the kernel
// backs them with 2 MiB pages where it can; smaller ones go to PyTorch's
// default allocator. Large collectives on such tensors walk 512× fewer page
// table entries (cross-memory reads, the reductions' TLB misses): see
// docs/pytorch.md. Off by default, as in PyTorch. Memory is freed with
// free(), as PyTorch's own. Thread-safe.
#pragma once

namespace tessera::torch_backend {

// Installs the allocator when THP_MEM_ALLOC_ENABLE is a non-zero integer
// (once per process); returns whether it is installed.
bool MaybeInstallThpAllocator();
bool ThpAllocatorInstalled();

}  // namespace tessera::torch_backend
