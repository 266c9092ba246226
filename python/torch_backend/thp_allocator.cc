#include "python/torch_backend/thp_allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

namespace tessera::torch_backend {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

void FreeCpu(void* p) { c10::free_cpu(p); }

class ThpCpuAllocator final : public c10::Allocator {
 public:
  explicit ThpCpuAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t nbytes) const override {
    if (nbytes < kHugePage) return fallback_->allocate(nbytes);
    void* p = nullptr;
    const int err = posix_memalign(&p, kHugePage, nbytes);
    TORCH_CHECK(err == 0 && p != nullptr, "tessera THP allocator: out of memory allocating ", nbytes, " bytes");
    (void)madvise(p, nbytes, MADV_HUGEPAGE);  // advice only: refused, the memory stays valid
    return {p, p, &FreeCpu, c10::Device(c10::DeviceType::CPU)};
  }
  // Both kinds are freed with free(): posix_memalign here, and PyTorch's
  // default CPU allocator (c10::free_cpu) for the small ones.
  c10::DeleterFnPtr raw_deleter() const override { return &FreeCpu; }

 private:
  c10::Allocator* fallback_;
};

std::atomic<bool> g_installed{false};

}  // namespace

bool MaybeInstallThpAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("THP_MEM_ALLOC_ENABLE");
    if (env == nullptr || std::atoi(env) == 0) return;
    static ThpCpuAllocator allocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    g_installed.store(true);
  });
  return g_installed.load();
}

bool ThpAllocatorInstalled() { return g_installed.load(); }

}  // namespace tessera::torch_backend
