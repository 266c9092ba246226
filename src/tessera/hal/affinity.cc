#include "tessera/hal/affinity.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "tessera/base/knobs.h"
#include "tessera/hal/threading.h"

namespace tessera::hal {
namespace {

base::Knob<bool> kBindThreadsKnob("TESSERA_BIND_THREADS", true,
                                  "pin each rank's kernel threads to its share of the host's CPUs (tessera train)");

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

StatusOr<std::vector<int>> BindKernelThreads(int slot, int slots) {
  if (!kBindThreadsKnob.Get()) return std::vector<int>{};
  if (slots < 1 || slot < 0 || slot >= slots) {
    return InvalidArgument("BindKernelThreads: slot {} of {} slots is out of range", slot, slots);
  }
  const std::vector<int> allowed = AllowedCpus();
  const auto n = static_cast<int>(allowed.size());
  if (n < slots) {
    return InvalidArgument("BindKernelThreads: {} slots but only {} CPUs to share; not pinning", slots, n);
  }
  const int begin = slot * n / slots, end = (slot + 1) * n / slots;
  const int threads = NumThreads();
  std::vector<int> cpus(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) cpus[static_cast<size_t>(i)] = allowed[static_cast<size_t>(begin + i % (end - begin))];
  int failures = 0, first_error = 0;
#pragma omp parallel num_threads(threads) reduction(+ : failures) reduction(max : first_error)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<size_t>(omp_get_thread_num())], &one);
    const int rc = pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    if (rc != 0) {
      failures += 1;
      first_error = rc;
    }
  }
  if (failures > 0) {
    return Internal("BindKernelThreads: pinning {} of {} kernel threads failed: {}", failures, threads,
                    std::strerror(first_error));
  }
  return cpus;
}

}  // namespace tessera::hal
