// C10dStore: see c10d_store.h.
#include "python/torch_backend/c10d_store.h"

#include <exception>
#include <utility>

namespace tessera::torch_backend {

namespace {

// c10d reports a wait that timed out as an error whose text says so.
bool LooksLikeTimeout(const std::string& what) {
  return what.find("imeout") != std::string::npos || what.find("imed out") != std::string::npos;
}

}  // namespace

C10dStore::C10dStore(c10::intrusive_ptr<::c10d::Store> store, std::string description)
    : store_(std::move(store)), description_(std::move(description)) {}

Status C10dStore::Set(const std::string& key, const comm::Bytes& value) {
  try {
    store_->set(key, value);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Unavailable("PyTorch store {}: set '{}' failed: {}", description_, key, e.what());
  }
}

Status C10dStore::Wait(const std::vector<std::string>& keys, comm::Timeout timeout) {
  try {
    if (timeout.count() <= 0) {
      if (store_->check(keys)) return Status::Ok();
      return DeadlineExceeded("PyTorch store {}: key '{}'{} not there (checked once)", description_,
                              keys.empty() ? "" : keys.front(), keys.size() > 1 ? " (or another)" : "");
    }
    store_->wait(keys, timeout);
    return Status::Ok();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (LooksLikeTimeout(what)) {
      return DeadlineExceeded("PyTorch store {}: waited {} ms for key '{}'{}: {}", description_, timeout.count(),
                              keys.empty() ? "" : keys.front(), keys.size() > 1 ? " (and others)" : "", what);
    }
    return Unavailable("PyTorch store {}: wait for '{}' failed: {}", description_, keys.empty() ? "" : keys.front(),
                       what);
  }
}

StatusOr<comm::Bytes> C10dStore::Get(const std::string& key, comm::Timeout timeout) {
  TESSERA_RETURN_IF_ERROR(Wait({key}, timeout));
  try {
    return store_->get(key);
  } catch (const std::exception& e) {
    return Unavailable("PyTorch store {}: get '{}' failed: {}", description_, key, e.what());
  }
}

StatusOr<int64_t> C10dStore::Add(const std::string& key, int64_t delta) {
  try {
    return store_->add(key, delta);
  } catch (const std::exception& e) {
    return Unavailable("PyTorch store {}: add {} to '{}' failed: {}", description_, delta, key, e.what());
  }
}

Status C10dStore::Delete(const std::string& key) {
  try {
    store_->deleteKey(key);
  } catch (const std::exception&) {
    // FileStore cannot delete keys; deleting is only cleanup here.
  }
  return Status::Ok();
}

}  // namespace tessera::torch_backend
