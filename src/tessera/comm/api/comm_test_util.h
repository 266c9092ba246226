// Test support for comm tests (header only): runs N ranks as threads of this
// process, each with its own Communicator over one in-memory Store, and
// element access by DataType for building inputs and checking results
// against a plain reference. Not used by the library itself.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tessera/base/float16.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/api/element_access.h"
#include "tessera/comm/store.h"

namespace tessera::comm::testing {

// Small windows, channels and low-latency slots: cheap to create, many
// chunks per message, and both the low-latency and the window paths run.
inline CommOptions TestOptions(const std::string& algo = "", const std::string& name = "t") {
  CommOptions o;
  o.name = name;
  o.timeout = std::chrono::milliseconds(60000);  // generous: loaded CI hosts
  o.shm_window_bytes = 16 << 10;
  o.shm_p2p_bytes = 64 << 10;
  o.shm_ll_bytes = 512;  // messages up to 504 bytes take the low-latency path
  o.algo = algo;
  o.calibrate = false;
  return o;
}

// Creates `size` communicators (one per thread) and runs fn on each.
inline void RunRanks(int size, const std::function<CommOptions(int)>& options,
                     const std::function<void(int, Communicator&)>& fn) {
  auto store = MakeInMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Communicator::Create(store, r, size, options(r));
      ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status().ToString();
      fn(r, **comm);
    });
  }
  for (auto& t : threads) t.join();
}

inline void RunRanks(int size, const CommOptions& options, const std::function<void(int, Communicator&)>& fn) {
  RunRanks(size, [&](int) { return options; }, fn);
}

// SetElement / GetElement come from comm/api/element_access.h.

inline double InputValue(int rank, size_t i, DataType dtype, ReduceOp op) {
  const int64_t h = static_cast<int64_t>((static_cast<uint64_t>(rank) * 7919u + i * 104729u) % 5u);
  if (op == ReduceOp::kProd) return dtype == DataType::kUint8 ? (h % 2) + 1 : (h % 3) - 1 == 0 ? 2 : (h % 3) - 1;
  return dtype == DataType::kUint8 ? static_cast<double>(h) : static_cast<double>(h - 2);
}

// Reference reduction of element i over `size` ranks, in the dtype's
// arithmetic (integers wrap; avg truncates for integers).
inline double Reference(int size, size_t i, DataType dtype, ReduceOp op) {
  if (IsFloatingPoint(dtype)) {
    double acc = InputValue(0, i, dtype, op);
    for (int r = 1; r < size; ++r) {
      const double v = InputValue(r, i, dtype, op);
      acc = ReduceReference(op, acc, v);
    }
    if (op == ReduceOp::kAvg) acc /= size;
    uint8_t tmp[8];
    SetElement(tmp, dtype, 0, acc);
    return GetElement(tmp, dtype, 0);
  }
  int64_t acc = static_cast<int64_t>(InputValue(0, i, dtype, op));
  for (int r = 1; r < size; ++r) {
    const int64_t v = static_cast<int64_t>(InputValue(r, i, dtype, op));
    acc = ReduceReference(op, acc, v);
  }
  uint8_t tmp[8];
  if (op == ReduceOp::kAvg) {
    // The sum wraps in the dtype first, then divides.
    SetElement(tmp, dtype, 0, static_cast<double>(acc));
    acc = static_cast<int64_t>(GetElement(tmp, dtype, 0)) / size;
  }
  SetElement(tmp, dtype, 0, static_cast<double>(acc));
  return GetElement(tmp, dtype, 0);
}

inline bool Close(double got, double want, DataType dtype, ReduceOp op) {
  if (op != ReduceOp::kAvg || !IsFloatingPoint(dtype)) return got == want;
  const double tol = dtype == DataType::kBFloat16 ? 1e-2 : dtype == DataType::kFloat16 ? 2e-3 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

}  // namespace tessera::comm::testing
