// Store helpers, the in-memory store and the prefix view.
#include "tessera/comm/store.h"

#include <charconv>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace tessera::comm {

std::string BytesToString(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

Bytes StringToBytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

bool ParseCounter(const Bytes& value, int64_t* out) {
  if (value.empty()) return false;
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || ptr != end) return false;
  *out = v;
  return true;
}

Status Store::SetString(const std::string& key, const std::string& value) { return Set(key, StringToBytes(value)); }

StatusOr<std::string> Store::GetString(const std::string& key, Timeout timeout) {
  TESSERA_ASSIGN_OR_RETURN(Bytes value, Get(key, timeout));
  return BytesToString(value);
}

namespace {

Timeout ClampTimeout(Timeout t) { return t.count() < 0 ? Timeout(0) : t; }

class InMemoryStore final : public Store {
 public:
  Status Set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      data_[key] = value;
    }
    cv_.notify_all();
    return Status::Ok();
  }

  StatusOr<Bytes> Get(const std::string& key, Timeout timeout) override {
    timeout = ClampTimeout(timeout);
    std::unique_lock<std::mutex> lock(mu_);
    auto has_key = [&] { return data_.count(key) != 0; };
    if (!cv_.wait_for(lock, timeout, has_key)) {
      return DeadlineExceeded("store {}: key '{}' was not set within {} ms", Address(), key, timeout.count());
    }
    return data_.at(key);
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    int64_t result = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = data_.find(key);
      int64_t current = 0;
      if (it != data_.end() && !ParseCounter(it->second, &current)) {
        return InvalidArgument("store {}: Add on key '{}' which holds a non-counter value ({} bytes)", Address(), key,
                               it->second.size());
      }
      if ((delta > 0 && current > std::numeric_limits<int64_t>::max() - delta) ||
          (delta < 0 && current < std::numeric_limits<int64_t>::min() - delta)) {
        return OutOfRange("store {}: Add({}) on key '{}' (value {}) overflows int64", Address(), delta, key, current);
      }
      result = current + delta;
      data_[key] = StringToBytes(std::to_string(result));
    }
    cv_.notify_all();
    return result;
  }

  Status Wait(const std::vector<std::string>& keys, Timeout timeout) override {
    timeout = ClampTimeout(timeout);
    std::unique_lock<std::mutex> lock(mu_);
    auto all_set = [&] {
      for (const std::string& k : keys) {
        if (data_.count(k) == 0) return false;
      }
      return true;
    };
    if (!cv_.wait_for(lock, timeout, all_set)) {
      std::string missing;
      for (const std::string& k : keys) {
        if (data_.count(k) == 0) missing += (missing.empty() ? "'" : ", '") + k + "'";
      }
      return DeadlineExceeded("store {}: key(s) {} not set within {} ms", Address(), missing, timeout.count());
    }
    return Status::Ok();
  }

  Status Delete(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    data_.erase(key);
    return Status::Ok();
  }

  std::string Address() const override { return "in-memory"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Bytes> data_;
};

class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix) : base_(std::move(base)), prefix_(std::move(prefix)) {}

  Status Set(const std::string& key, const Bytes& value) override { return base_->Set(prefix_ + key, value); }
  StatusOr<Bytes> Get(const std::string& key, Timeout timeout) override { return base_->Get(prefix_ + key, timeout); }
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override { return base_->Add(prefix_ + key, delta); }
  Status Wait(const std::vector<std::string>& keys, Timeout timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const std::string& k : keys) full.push_back(prefix_ + k);
    return base_->Wait(full, timeout);
  }
  Status Delete(const std::string& key) override { return base_->Delete(prefix_ + key); }
  std::string Address() const override { return base_->Address(); }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Store> MakePrefixStore(std::shared_ptr<Store> base, std::string prefix) {
  return std::make_unique<PrefixStore>(std::move(base), std::move(prefix));
}

std::shared_ptr<Store> MakeInMemoryStore() { return std::make_shared<InMemoryStore>(); }

Status StoreBarrier(Store& store, const std::string& name, int world_size, Timeout timeout) {
  const std::string arrived_key = name + "/arrived";
  const std::string done_key = name + "/done";
  TESSERA_ASSIGN_OR_RETURN(int64_t arrived, store.Add(arrived_key, 1));
  if (arrived > world_size) {
    return FailedPrecondition("store {}: barrier '{}' reached by {} participants but world size is {} (name reused?)",
                              store.Address(), name, arrived, world_size);
  }
  if (arrived == world_size) return store.SetString(done_key, "1");
  Status st = store.Wait({done_key}, timeout);
  if (st.code() == StatusCode::kDeadlineExceeded) {
    int64_t now = arrived;
    auto count = store.Add(arrived_key, 0);
    if (count.ok()) now = *count;
    return DeadlineExceeded("store {}: barrier '{}': only {} of {} participants arrived within {} ms",
                            store.Address(), name, now, world_size, timeout.count());
  }
  return st;
}

}  // namespace tessera::comm
