// Kernel threading: how many OpenMP threads Tessera's kernels use.
// The count comes from, in order: SetNumThreads(), the TESSERA_NUM_THREADS
// knob (0 or unset = automatic), OMP_NUM_THREADS, and otherwise the number
// of physical cores (hardware threads of one core share its FMA units, so
// more threads than cores only add contention to dense kernels).
// ConfigureThreads() applies the count to OpenMP (omp_set_num_threads);
// call it from the main thread before the first parallel region (the CLI
// does). Thread-safe, but the OpenMP setting affects the calling thread's
// subsequent parallel regions only.
#pragma once

namespace tessera::hal {

// The configured kernel thread count (>= 1).
int NumThreads();

// Overrides the thread count for this process (n >= 1) and applies it to
// OpenMP on the calling thread. n = 0 returns to the automatic choice.
void SetNumThreads(int n);

// Applies NumThreads() to OpenMP on the calling thread; returns it.
int ConfigureThreads();

}  // namespace tessera::hal
