#include "tessera/comm/transport/shm/waiter.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "tessera/base/knobs.h"

namespace tessera::comm::transport::shm {
namespace {

base::Knob<int64_t> kSpinUsKnob("TESSERA_SHM_SPIN_US", -1,
                                "shm waits: microseconds to busy-wait before yielding/sleeping (-1 = auto: 50 "
                                "when every local rank has a core, 0 when ranks outnumber cores)");
base::Knob<int64_t> kYieldUsKnob("TESSERA_SHM_YIELD_US", -1,
                                 "shm waits: microseconds to sched_yield after spinning, before sleeping in a futex "
                                 "(-1 = auto: 20000)");

}  // namespace

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  struct timespec ts;
  ts.tv_sec = timeout_ns / 1'000'000'000;
  ts.tv_nsec = timeout_ns % 1'000'000'000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

void YieldCore() { sched_yield(); }

SpinPolicy MakeSpinPolicy(int local_ranks) {
  SpinPolicy p;
  const bool oversubscribed = local_ranks > UsableCpus();
  const int64_t spin_us = kSpinUsKnob.Get();
  const int64_t yield_us = kYieldUsKnob.Get();
  p.spin_ns = (spin_us >= 0 ? spin_us : oversubscribed ? 0 : 50) * 1000;
  p.yield_ns = (yield_us >= 0 ? yield_us : 20000) * 1000;
  return p;
}

}  // namespace tessera::comm::transport::shm
