#include "tessera/hal/pooled_allocator.h"

#include <sys/mman.h>

#include <bit>
#include <cstdlib>
#include <limits>

#include "tessera/base/logging.h"

namespace tessera::hal {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

PooledAllocator::PooledAllocator(std::string name) : name_(std::move(name)) {}

PooledAllocator::~PooledAllocator() { Trim(); }

size_t PooledAllocator::RoundSize(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 256) return (bytes + 63) / 64 * 64;
  // Four size classes per power of two: at most 25% waste.
  size_t pow2 = std::bit_floor(bytes);
  size_t step = pow2 / 4;
  // (Not rounded up to whole huge pages: a 2.25 MiB tensor would then fault
  // in 4 MiB, since touching any byte of a THP-advised 2 MiB range maps it all.)
  return (bytes + step - 1) / step * step;
}

void* PooledAllocator::Allocate(size_t bytes) {
  if (bytes > (std::numeric_limits<size_t>::max() >> 2)) {
    TLOG(ERROR, "{}: cannot allocate {} bytes", name_, bytes);
    return nullptr;
  }
  size_t size = RoundSize(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.num_allocs++;
    auto it = free_lists_.find(size);
    if (it != free_lists_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.current_bytes += static_cast<int64_t>(size);
      if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
      return p;
    }
  }
  size_t align = size >= kHugePage ? kHugePage : kAlignment;
  void* p = nullptr;
  if (posix_memalign(&p, align, size) != 0) p = nullptr;
  if (p == nullptr) {
    TLOG(ERROR, "{}: out of memory allocating {} bytes", name_, size);
    return nullptr;
  }
  if (size >= kHugePage) madvise(p, size, MADV_HUGEPAGE);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_os_allocs++;
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.current_bytes += static_cast<int64_t>(size);
  if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
  return p;
}

void PooledAllocator::Free(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  size_t size = RoundSize(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.current_bytes -= static_cast<int64_t>(size);
  free_lists_[size].push_back(ptr);
}

MemoryStats PooledAllocator::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PooledAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes = stats_.current_bytes;
}

void PooledAllocator::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, blocks] : free_lists_) {
    for (void* p : blocks) {
      std::free(p);
      stats_.reserved_bytes -= static_cast<int64_t>(size);
    }
    blocks.clear();
  }
  free_lists_.clear();
}

}  // namespace tessera::hal
