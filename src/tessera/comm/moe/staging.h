// Staging: a growable byte buffer for exchanges, in shared memory
// (AllocShared: peers read it directly, zero copy) when asked, else private.
// Grows geometrically, never shrinks, contents not kept across growth.
// Thread-safety: one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::comm::moe {

class Staging {
 public:
  Staging() = default;
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  void set_shared(bool shared) { shared_ = shared; }
  // At least `bytes` (≥ 1) bytes.
  StatusOr<uint8_t*> Get(size_t bytes);

 private:
  bool shared_ = false;
  uint8_t* shared_data_ = nullptr;
  size_t shared_bytes_ = 0;
  std::vector<uint8_t> private_;
};

}  // namespace tessera::comm::moe
