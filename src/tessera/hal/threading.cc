#include "tessera/hal/threading.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "tessera/base/check.h"
#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/hal/topology.h"

namespace tessera::hal {
namespace {

base::Knob<int64_t> kNumThreadsKnob("TESSERA_NUM_THREADS", 0,
                                    "kernel (OpenMP) threads; 0 = OMP_NUM_THREADS if set, else one per physical core");

int AutomaticThreads() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr) {
    // OpenMP already parsed it (it may be a list "8,4"); its first value is
    // what omp_get_max_threads reports on the initial thread.
    char* end = nullptr;
    long v = std::strtol(omp, &end, 10);
    if (end != omp && v > 0) return static_cast<int>(v);
  }
  return std::max(1, MachineTopology().cores);
}

}  // namespace

int NumThreads() {
  int64_t n = kNumThreadsKnob.Get();
  if (n < 0) {
    TLOG(WARN, "TESSERA_NUM_THREADS={} is negative; using the automatic thread count", n);
    kNumThreadsKnob.Set(0);
    n = 0;
  }
  return n > 0 ? static_cast<int>(n) : AutomaticThreads();
}

void SetNumThreads(int n) {
  TESSERA_CHECK(n >= 0, "SetNumThreads({}): thread count must be >= 0", n);
  kNumThreadsKnob.Set(n);
  ConfigureThreads();
}

int ConfigureThreads() {
  const int n = NumThreads();
  omp_set_num_threads(n);
  TLOG(DEBUG, "kernel threads: {}", n);
  return n;
}

}  // namespace tessera::hal
