#include "tessera/comm/moe/staging.h"

#include <algorithm>

#include "tessera/comm/api/communicator.h"

namespace tessera::comm::moe {

Staging::~Staging() {
  if (shared_data_ != nullptr) (void)FreeShared(shared_data_);
}

StatusOr<uint8_t*> Staging::Get(size_t bytes) {
  bytes = std::max<size_t>(bytes, 64);
  if (!shared_) {
    if (private_.size() < bytes) private_.resize(std::max(bytes, private_.size() * 3 / 2));
    return private_.data();
  }
  if (shared_bytes_ < bytes) {
    const size_t want = std::max(bytes, shared_bytes_ * 3 / 2);
    if (shared_data_ != nullptr) {
      TESSERA_RETURN_IF_ERROR(FreeShared(shared_data_));
      shared_data_ = nullptr;
      shared_bytes_ = 0;
    }
    TESSERA_ASSIGN_OR_RETURN(void* p, AllocShared(want));
    shared_data_ = static_cast<uint8_t*>(p);
    shared_bytes_ = want;
  }
  return shared_data_;
}

}  // namespace tessera::comm::moe
