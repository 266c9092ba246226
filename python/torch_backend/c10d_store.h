// C10dStore: tessera::comm::Store over the c10d::Store PyTorch hands a
// process-group creator (TCPStore for env://, FileStore for file://,
// HashStore, each wrapped in PyTorch's PrefixStore), so Tessera's
// communicator rendezvous needs nothing besides what PyTorch already set up.
//   - Get/Wait: c10d wait(keys, timeout) then get; DeadlineExceeded names the
//     key, the store and the timeout. Timeout 0 checks once (c10d check).
//   - Add: c10d add (every c10d store keeps counters as decimal text, as
//     Tessera's stores do).
//   - Delete: c10d deleteKey; stores that cannot delete (FileStore) are
//     tolerated (Delete is cleanup only in Tessera).
// Every c10d exception becomes a Status (no exception crosses into comm/).
// Thread-safe as far as the c10d store is (PyTorch's stores are).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "tessera/comm/store.h"

namespace tessera::torch_backend {

class C10dStore final : public comm::Store {
 public:
  C10dStore(c10::intrusive_ptr<::c10d::Store> store, std::string description);

  Status Set(const std::string& key, const comm::Bytes& value) override;
  StatusOr<comm::Bytes> Get(const std::string& key, comm::Timeout timeout) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys, comm::Timeout timeout) override;
  Status Delete(const std::string& key) override;
  std::string Address() const override { return description_; }

 private:
  c10::intrusive_ptr<::c10d::Store> store_;
  std::string description_;
};

}  // namespace tessera::torch_backend
