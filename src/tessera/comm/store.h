// Store: the rendezvous key-value store ranks use to find each other
// (addresses, shared-memory segment names, unique ids) before any
// transport exists. Keys are strings, values are bytes.
//   - Get and Wait block until the key(s) exist or the timeout passes
//     (DeadlineExceeded naming the store, the key and how long it waited);
//     nothing waits forever. A timeout of 0 checks once without waiting.
//   - Add is an atomic counter (creates the key at 0), used for barriers.
//     Counters are stored as decimal ASCII text ("12"), so Get on a counter
//     key returns its value as text; Add on a key holding anything else is
//     InvalidArgument.
//   - Delete of a missing key is OK (idempotent).
// Implementations: InMemoryStore (ranks as threads of one process, tests)
// and the TCP store (tcp_store.h: a server hosted by the launcher or rank 0,
// clients authenticated with the per-job token). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::comm {

using Bytes = std::vector<uint8_t>;
using Timeout = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;
  virtual Status Set(const std::string& key, const Bytes& value) = 0;
  virtual StatusOr<Bytes> Get(const std::string& key, Timeout timeout) = 0;
  virtual StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  virtual Status Wait(const std::vector<std::string>& keys, Timeout timeout) = 0;
  virtual Status Delete(const std::string& key) = 0;
  // Where this store lives, for error messages ("in-memory",
  // "tcp://10.0.0.1:29500", "tcp://...:29500 prefix 'comm3/'").
  virtual std::string Address() const = 0;

  // Convenience: string values.
  Status SetString(const std::string& key, const std::string& value);
  StatusOr<std::string> GetString(const std::string& key, Timeout timeout);
};

// A Store view that prefixes every key (e.g. "comm3/"), so sub-communicators
// and successive jobs on one server do not collide.
std::unique_ptr<Store> MakePrefixStore(std::shared_ptr<Store> base, std::string prefix);

// In-process store for ranks run as threads (tests, single-process use).
std::shared_ptr<Store> MakeInMemoryStore();

// A barrier of `world_size` participants over the store: each calls Add on
// "<name>/arrived" and waits for "<name>/done", which the last arrival sets.
// Each barrier name must be used once (use a fresh name per round).
// DeadlineExceeded names the barrier, how many arrived and the timeout.
Status StoreBarrier(Store& store, const std::string& name, int world_size, Timeout timeout);

// Helpers shared by the implementations.
std::string BytesToString(const Bytes& bytes);
Bytes StringToBytes(const std::string& text);
// Parses a counter value ("-12"); false if it is not a decimal int64.
bool ParseCounter(const Bytes& value, int64_t* out);

}  // namespace tessera::comm
