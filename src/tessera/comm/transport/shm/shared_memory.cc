#include "tessera/comm/transport/shm/shared_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

namespace tessera::comm::transport::shm {
namespace {

struct Allocation {
  uint64_t id = 0;
  int fd = -1;
  size_t bytes = 0;
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> by_base;  // base address -> allocation
  std::atomic<uint64_t> next_id{1};
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: may be used during static teardown
  return *r;
}

}  // namespace

std::string SharedName(uint64_t id) { return fmt::format("tessera-shared-{}", id); }

StatusOr<void*> AllocShared(size_t bytes) {
  if (bytes == 0) return InvalidArgument("AllocShared: zero bytes");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t size = (bytes + page - 1) / page * page;
  Registry& reg = TheRegistry();
  const uint64_t id = reg.next_id.fetch_add(1);
  const int fd = memfd_create(SharedName(id).c_str(), MFD_CLOEXEC);
  if (fd < 0) return ResourceExhausted("AllocShared({} bytes): memfd_create failed: {}", bytes, std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    close(fd);
    return ResourceExhausted("AllocShared({} bytes): ftruncate failed: {}", bytes, std::strerror(err));
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return ResourceExhausted("AllocShared({} bytes): mmap failed: {}", bytes, std::strerror(err));
  }
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.by_base[reinterpret_cast<uintptr_t>(p)] = Allocation{id, fd, size};
  return p;
}

Status FreeShared(void* ptr) {
  if (ptr == nullptr) return Status::Ok();
  Registry& reg = TheRegistry();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.by_base.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == reg.by_base.end()) {
      return InvalidArgument("FreeShared({}): not a pointer returned by AllocShared (or freed already)", ptr);
    }
    a = it->second;
    reg.by_base.erase(it);
  }
  munmap(ptr, a.bytes);
  close(a.fd);
  return Status::Ok();
}

bool FindShared(const void* ptr, size_t bytes, SharedRef* ref) {
  if (ptr == nullptr) return false;
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  Registry& reg = TheRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.by_base.upper_bound(p);
  if (it == reg.by_base.begin()) return false;
  --it;
  const uintptr_t base = it->first;
  const Allocation& a = it->second;
  if (p >= base + a.bytes || bytes > base + a.bytes - p) return false;
  ref->id = a.id;
  ref->fd = static_cast<uint64_t>(a.fd);
  ref->bytes = a.bytes;
  ref->offset = p - base;
  ref->addr = p;
  return true;
}

}  // namespace tessera::comm::transport::shm
