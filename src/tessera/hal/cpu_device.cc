#include <cstring>

#include "tessera/hal/device.h"
#include "tessera/hal/pooled_allocator.h"

namespace tessera::hal {
namespace {

// On the CPU both tiers are host memory, but they are separate pools with
// separate accounting, so offload between tiers is exercised for real.
class CpuDeviceImpl final : public Device {
 public:
  CpuDeviceImpl() : device_pool_("cpu:0/device"), host_pool_("cpu:0/host") {}
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  int index() const override { return 0; }
  std::string name() const override { return "cpu:0"; }
  Allocator& allocator(MemoryTier tier) override {
    return tier == MemoryTier::kDevice ? device_pool_ : host_pool_;
  }
  void Copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }

 private:
  PooledAllocator device_pool_;
  PooledAllocator host_pool_;
};

}  // namespace

Device& CpuDevice() {
  static CpuDeviceImpl* device = new CpuDeviceImpl();  // never destroyed: outlives all tensors
  return *device;
}

}  // namespace tessera::hal
