// Which implementation operators run: the plain reference kernels (scalar
// loops, the oracle for tests) or the optimized CPU kernels (vectorized,
// multi-threaded). Thread-local; the default is kOptimized. The parity
// harness flips it with ScopedImpl to compare the two.
#pragma once

namespace tessera::ops {

enum class Impl { kReference, kOptimized };

Impl CurrentImpl();
inline bool UseReference() { return CurrentImpl() == Impl::kReference; }

class ScopedImpl {
 public:
  explicit ScopedImpl(Impl impl);
  ~ScopedImpl();
  ScopedImpl(const ScopedImpl&) = delete;
  ScopedImpl& operator=(const ScopedImpl&) = delete;

 private:
  Impl saved_;
};

}  // namespace tessera::ops
