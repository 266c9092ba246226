// Device: one compute device (the CPU now; accelerator backends plug in as
// their own libraries implementing this interface) with the memory tiers it
// owns. Every tensor's storage comes from a Device's allocator, which keeps
// per-device current/peak byte accounting. Devices live for the whole
// process; methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tessera::hal {

enum class DeviceKind { kCpu, kCuda };

// A memory tier of a device: kDevice is the device's own memory (HBM on an
// accelerator), kHost the host DDR tier used for offload.
enum class MemoryTier { kDevice = 0, kHost = 1 };
inline constexpr int kNumMemoryTiers = 2;

struct MemoryStats {
  int64_t current_bytes = 0;   // bytes handed out and not yet freed
  int64_t peak_bytes = 0;      // high-water mark of current_bytes
  int64_t reserved_bytes = 0;  // bytes held from the OS, including pooled free blocks
  int64_t num_allocs = 0;      // total Allocate calls
  int64_t num_os_allocs = 0;   // allocations that had to go to the OS
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory aligned to kAlignment, or nullptr if out of memory.
  virtual void* Allocate(size_t bytes) = 0;
  // `bytes` must be the size passed to Allocate.
  virtual void Free(void* ptr, size_t bytes) = 0;
  virtual MemoryStats Stats() const = 0;
  virtual void ResetPeak() = 0;
  // Returns pooled free blocks to the OS.
  virtual void Trim() = 0;
};

inline constexpr size_t kAlignment = 64;

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  virtual int index() const = 0;
  virtual std::string name() const = 0;
  virtual Allocator& allocator(MemoryTier tier = MemoryTier::kDevice) = 0;
  // Copies between any two buffers this device can address.
  virtual void Copy(void* dst, const void* src, size_t bytes) = 0;
};

// The process-wide CPU device.
Device& CpuDevice();

}  // namespace tessera::hal
