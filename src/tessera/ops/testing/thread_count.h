// Test helper: runs a computation with one OpenMP thread and with several
// (max(current, 3)), restoring the thread count, and returns both results —
// for tests that results do not depend on the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <utility>

namespace tessera::ops::testing {

template <typename F>
auto RunWithOneAndManyThreads(F&& run) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = run();
  omp_set_num_threads(std::max(saved, 3));
  auto many = run();
  omp_set_num_threads(saved);
  return std::make_pair(std::move(one), std::move(many));
}

}  // namespace tessera::ops::testing
