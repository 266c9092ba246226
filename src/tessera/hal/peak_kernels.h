// Internal to hal/peak.cc: the register-only FMA loops and the STREAM triad
// that MeasurePeak times. Exposed for hal_test.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::hal::internal {

// A loop of independent multiply-add chains. run(iters) executes `iters`
// iterations of flops_per_iter FLOPs each and returns a value derived from
// every accumulator (so the work cannot be optimized away).
struct FmaLoop {
  const char* isa;
  double flops_per_iter;
  float (*run)(int64_t iters);
};

// The widest fp32 FMA loop this CPU supports (AVX-512, else AVX2+FMA).
FmaLoop Fp32Loop();
// The AVX512-BF16 dot-product loop, or the fp32 loop when unsupported.
FmaLoop Bf16Loop();

// Iterations for one single-thread run of `loop` to take about `seconds`.
int64_t CalibrateIters(const FmaLoop& loop, double seconds);

// FLOP/s of `loop` with `threads` OpenMP threads each running `iters`
// iterations: best of `reps` runs (the best is the least disturbed by other
// load on the machine).
double MeasureLoopFlops(const FmaLoop& loop, int threads, int64_t iters, int reps);

// STREAM triad buffers: three arrays of n doubles, first touched by
// `threads` threads with the same static partition the triad uses.
class TriadBuffers {
 public:
  TriadBuffers(size_t n, int threads);
  ~TriadBuffers();
  TriadBuffers(const TriadBuffers&) = delete;
  TriadBuffers& operator=(const TriadBuffers&) = delete;
  size_t size() const { return n_; }
  // Best-of-`reps` triad bandwidth (bytes/s, 24 bytes per element) with
  // `threads` threads, after one untimed warm-up pass. Also checks the result.
  double Measure(int threads, int reps);

 private:
  size_t n_;
  double* a_;
  double* b_;
  double* c_;
};

}  // namespace tessera::hal::internal
