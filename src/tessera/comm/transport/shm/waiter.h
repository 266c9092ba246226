// Waiting on shared memory: futex words that live in shared segments (so
// other processes can wake them; non-private futexes), and the
// spin-then-sleep loop every shm wait goes through, in three phases:
//   1. busy-wait (pause) for TESSERA_SHM_SPIN_US (default 50 us when every
//      rank has a core, 0 when ranks outnumber cores): the latency path;
//   2. yield the core (sched_yield) for TESSERA_SHM_YIELD_US (default
//      20 ms): if the peer we wait for shares this core (ranks outnumber
//      cores, or the scheduler stacked two ranks on one core while another
//      job holds the other), handing it the core is far faster than
//      spinning until the next scheduler tick (4 ms per operation) or a
//      futex sleep and wake-up (26 us per 4-rank operation vs 3 us); when
//      nothing else is runnable here, sched_yield returns at once, so this
//      is still polling (Open MPI's yield_when_idle does the same);
//   3. sleep in FUTEX_WAIT in bounded slices, re-checking the deadline, the
//      abort flags and peer liveness between slices.
// Wake-ups are only issued when a waiter announced itself (the `waiters`
// count), so a publish costs one atomic add when nobody sleeps. The
// protocol (waiter: waiters++, read value, re-check, sleep on the value;
// waker: change value, read waiters) is sequentially consistent, so no
// wake-up is lost. Thread-safe.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tessera/base/status.h"

namespace tessera::comm::transport::shm {

struct alignas(64) FutexWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> waiters{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

void FutexWakeAll(std::atomic<uint32_t>* word);
// Sleeps while *word == expected, for at most timeout_ns; returns on a
// wake-up, a changed value, the timeout or a signal.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);

// Wakes sleepers of `w` (after its value changed), if any announced.
inline void WakeIfWaiting(FutexWord& w) {
  if (w.waiters.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&w.value);
}
// value++ then wake: a doorbell.
inline void Ring(FutexWord& w) {
  w.value.fetch_add(1, std::memory_order_seq_cst);
  WakeIfWaiting(w);
}

struct SpinPolicy {
  int64_t spin_ns = 50'000;      // busy-wait budget
  int64_t yield_ns = 20'000'000; // then sched_yield budget, before sleeping
  int64_t slice_ns = 20'000'000; // longest single sleep between checks
};
// The policy for `local_ranks` ranks sharing this host's cores (knobs
// TESSERA_SHM_SPIN_US / TESSERA_SHM_YIELD_US, defaults above).
SpinPolicy MakeSpinPolicy(int local_ranks);
// Online CPUs this process may run on.
int UsableCpus();
void YieldCore();  // sched_yield

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A futex word packed with its waiter count and no padding (so data can
// share its cache line: the low-latency slots of context.h).
struct PackedFutexWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> waiters{0};
};
inline void WakeIfWaiting(PackedFutexWord& w) {
  if (w.waiters.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&w.value);
}

// Waits until ready() is true: spins for policy.spin_ns, then sleeps on
// `word` (a FutexWord or PackedFutexWord) in slices, calling check() before
// each sleep; a non-OK check() ends the wait with that status.
template <typename Word, typename Ready, typename Check>
Status SpinThenSleep(Word& word, const SpinPolicy& policy, Ready&& ready, Check&& check) {
  // A short spin without reading the clock (a vDSO call per round is
  // measurable on the latency path; 256 pauses are a few microseconds),
  // then the timed phases.
  if (policy.spin_ns >= 20'000) {
    for (int i = 0; i < 256; ++i) {
      if (ready()) return Status::Ok();
      _mm_pause();
    }
  }
  if (ready()) return Status::Ok();
  const int64_t spin_end = NowNs() + policy.spin_ns;
  while (true) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return Status::Ok();
      _mm_pause();
    }
    if (NowNs() >= spin_end) break;
  }
  if (policy.yield_ns > 0) {
    const int64_t yield_end = NowNs() + policy.yield_ns;
    while (NowNs() < yield_end) {
      if (ready()) return Status::Ok();
      YieldCore();
    }
  }
  while (true) {
    if (ready()) return Status::Ok();
    Status st = check();
    if (!st.ok()) return st;
    word.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = word.value.load(std::memory_order_seq_cst);
    if (ready()) {
      word.waiters.fetch_sub(1, std::memory_order_seq_cst);
      return Status::Ok();
    }
    FutexWait(&word.value, seen, policy.slice_ns);
    word.waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace tessera::comm::transport::shm
