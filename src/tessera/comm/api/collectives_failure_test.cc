// A collective that fails must not leave a peer copying from or into memory
// its owner has freed. Ranks are threads (one address space): a peer stalls
// while inside another rank's buffers in the middle of a single-copy or
// zero-copy transfer (shm::SetPeerAccessHookForTesting), the owner times
// out waiting for it, and as soon as the owner's call returns its buffers
// are made inaccessible (PROT_NONE or FreeShared's munmap). A stalled peer
// that went on copying afterwards would crash the test with SIGSEGV (and is
// a use-after-free under AddressSanitizer); with the exposure protocol
// (transport/shm/context.h) the owner returns only once the peer left, and
// the peer gives up at its next piece.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/comm/transport/shm/context.h"

namespace tessera::comm {
namespace {

using testing::RunRanks;
using testing::TestOptions;

// Page-aligned private memory that can be sealed (PROT_NONE): any later
// touch faults.
class SealableBuffer {
 public:
  explicit SealableBuffer(size_t bytes) : bytes_((bytes + 4095) / 4096 * 4096) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    data_ = static_cast<float*>(p);
    for (size_t i = 0; i < bytes_ / sizeof(float); ++i) data_[i] = static_cast<float>(i % 97);
  }
  ~SealableBuffer() { munmap(data_, bytes_); }
  SealableBuffer(const SealableBuffer&) = delete;
  SealableBuffer& operator=(const SealableBuffer&) = delete;
  float* data() { return data_; }
  void Seal() { ASSERT_EQ(mprotect(data_, bytes_, PROT_NONE), 0); }

 private:
  size_t bytes_;
  float* data_ = nullptr;
};

// The second time any rank is inside a peer's buffers in an operation (the
// hook runs on entering and between pieces: mid-transfer), it stalls for
// longer than the timeout; every other access passes.
std::atomic<int> g_accesses{0};
std::atomic<int> g_stall_ms{0};
void StallOnce(int, int) {
  if (g_accesses.fetch_add(1) == 1) std::this_thread::sleep_for(std::chrono::milliseconds(g_stall_ms.load()));
}

struct Case {
  std::string op;
  bool shared = false;  // buffers from AllocShared: zero copy
};

Status RunOp(const std::string& op, Communicator& c, float* send, float* recv, size_t count) {
  if (op == "broadcast") return c.Broadcast(send, recv, count, DataType::kFloat32, 0);
  if (op == "all_gather") return c.AllGather(send, recv, count, DataType::kFloat32);
  if (op == "gather") return c.Gather(send, recv, count, DataType::kFloat32, 0);
  if (op == "scatter") return c.Scatter(send, recv, count, DataType::kFloat32, 0);
  if (op == "all_to_all") return c.AllToAll(send, recv, count, DataType::kFloat32);
  if (op == "all_reduce") return c.AllReduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum);
  return InvalidArgument("unknown op {}", op);
}

TEST(CollectivesFailure, TimedOutDirectCollectiveLeavesNoPeerInsideFreedMemory) {
  const int n = 3;
  const size_t count = (3u << 20) / sizeof(float);  // 3 MiB per block: several 1 MiB pieces
  const std::vector<Case> cases = {{"broadcast"},         {"all_gather"},        {"gather"},
                                   {"scatter"},           {"all_to_all"},        {"all_reduce"},
                                   {"all_gather", true},  {"all_reduce", true}};
  // Margins for the sanitizers' slowdown: the operation before the stall
  // takes milliseconds, the owner times out after 1 s, the stall lasts 3 s.
  g_stall_ms = 3000;
  transport::shm::SetPeerAccessHookForTesting(&StallOnce);
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.op + (cs.shared ? " zero copy" : " single copy"));
    g_accesses = 0;
    CommOptions o = TestOptions("shm_direct");
    o.timeout = std::chrono::milliseconds(1000);
    o.shm_single_copy = 1;
    o.shm_zero_copy = cs.shared ? 1 : 0;
    o.shm_direct_reduce_bytes = 1;
    o.shm_alltoall_single_copy_bytes = 1;
    std::atomic<int> failed{0};
    RunRanks(n, o, [&](int, Communicator& c) {
      const size_t bytes = count * n * sizeof(float);
      if (cs.shared) {
        StatusOr<void*> send = AllocShared(bytes), recv = AllocShared(bytes);
        ASSERT_TRUE(send.ok() && recv.ok());
        Status st = RunOp(cs.op, c, static_cast<float*>(*send), static_cast<float*>(*recv), count);
        // Gone the moment the call returns (munmap: a later touch faults).
        ASSERT_TRUE(FreeShared(*send).ok());
        ASSERT_TRUE(FreeShared(*recv).ok());
        failed += !st.ok();
      } else {
        SealableBuffer send(bytes), recv(bytes);
        Status st = RunOp(cs.op, c, send.data(), recv.data(), count);
        send.Seal();
        recv.Seal();
        failed += !st.ok();
      }
    });
    EXPECT_GE(g_accesses.load(), 2) << "no rank stalled inside a peer's buffers: the direct path did not run";
    EXPECT_GE(failed.load(), 1) << "the stall did not make the operation fail";
  }
  transport::shm::SetPeerAccessHookForTesting(nullptr);
}

}  // namespace
}  // namespace tessera::comm
