// Internal state of a Communicator (shared by communicator.cc and
// communicator_ops.cc; not part of the public API).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/selector.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/api/executor.h"
#include "tessera/comm/transport/topology.h"

namespace tessera::comm {

struct Communicator::Impl {
  std::shared_ptr<Store> base_store;  // as given to Create
  std::shared_ptr<Store> store;       // prefixed "tessera/<name>/"
  int rank = 0;
  int size = 1;
  CommOptions options;
  std::chrono::milliseconds timeout{0};
  transport::TopologyPlan topology;
  std::unique_ptr<transport::Transport> transport;
  transport::shm::Context* shm = nullptr;
  std::unique_ptr<algo::HierarchyContext> hierarchy;
  algo::Scratch scratch;
  std::unique_ptr<algo::Selector> selector;
  std::atomic<bool> aborted{false};
  std::atomic<bool> failed{false};
  mutable std::mutex failure_mu;
  Status failure;
  std::atomic<int> split_count{0};
  uint64_t op_seq = 0;                                 // executor thread only
  struct CachedChoice {
    bool valid = false;
    size_t bytes = 0;
    algo::Choice choice;
  };
  CachedChoice choice_cache[kNumCollectiveKinds];      // executor thread only
  std::map<std::pair<int, int>, algo::Algorithm> logged;  // (kind, log2 bytes) -> last logged choice
  std::unique_ptr<Executor> executor;                  // last: destroyed first

  ~Impl();
  Status Execute(const CollectiveArgs& a);
  Status Validate(const CollectiveArgs& a) const;
  void Fail(const Status& st);
  Status Health() const;
};

}  // namespace tessera::comm
