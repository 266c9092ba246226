#include "tessera/ops/attention/kernel_util.h"

#include <atomic>

#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/hal/cpu_features.h"

namespace tessera::ops::detail {
namespace {

base::Knob<std::string> kKernelIsaKnob(
    "TESSERA_KERNEL_ISA", "auto",
    "ISA of the attention/cross-entropy kernels: auto (AVX-512 when the CPU has it), avx512 or avx2");

}  // namespace

bool UseAvx512() {
  static const bool has = hal::GetCpuFeatures().HasAvx512Core();
  const std::string isa = kKernelIsaKnob.Get();
  if (isa == "avx2") return false;
  if (isa != "auto" && isa != "avx512") {
    static std::atomic<bool> warned{false};  // kernels ask from many threads at once
    if (!warned.exchange(true, std::memory_order_relaxed)) {
      TLOG(WARN, "TESSERA_KERNEL_ISA={} is not auto, avx512 or avx2; using auto", isa);
    }
  }
  return has;
}

void SetKernelIsa(const std::string& isa) {
  if (isa.empty()) {
    kKernelIsaKnob.Reset();
  } else {
    kKernelIsaKnob.Set(isa);
  }
}

}  // namespace tessera::ops::detail
