// The algorithm layer's common vocabulary: which algorithms exist, what one
// gets to run (AlgoEnv: the rank, the transport, the shm context when the
// transport is shm, persistent scratch memory, the op's context), and the
// entry point of every (collective, algorithm) pair. Each algorithm lives
// in its own file (shm_direct*.cc, ring.cc, halving_doubling.cc,
// binomial_tree.cc, pairwise.cc, hierarchical.cc); selector.h picks one per
// call. Every rank of a communicator must run the same algorithm for the
// same call (the selector is deterministic given the agreed cost model).
// Algorithms run on the communicator's executor thread; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/types.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::transport::shm {
class Context;
}

namespace tessera::comm::algo {

enum class Algorithm : uint8_t {
  kShmDirect,        // every rank reads peers' shm windows directly (one-shot)
  kShmTwoPhase,      // shm windows: reduce-scatter then all-gather per chunk
  kRing,             // ring over point-to-point channels
  kHalvingDoubling,  // recursive halving-doubling (Rabenseifner), any size
  kBinomialTree,     // binomial tree rooted at the root
  kPairwise,         // pairwise exchange (all-to-all) / direct linear (gather, scatter)
  kHierarchical,     // shm inside each host, tcp across hosts
};
inline constexpr int kNumAlgorithms = 7;
std::string_view AlgorithmName(Algorithm algo);  // "shm_direct", "ring", ...
StatusOr<Algorithm> ParseAlgorithm(std::string_view text);

// Persistent scratch buffers (private memory, huge-page advised, grown
// geometrically, never shrunk): allocating per call would pay first-touch
// page faults (~15 us per 4 KiB page on some VMs) on every operation.
class Scratch {
 public:
  Scratch() = default;
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // A buffer of at least `bytes` for slot `slot` (0..3); its contents are
  // not preserved across calls that grow it.
  uint8_t* Get(int slot, size_t bytes);

 private:
  struct Buffer {
    uint8_t* data = nullptr;
    size_t bytes = 0;
  };
  Buffer buffers_[4];
};

class HierarchyContext;  // hierarchical.h

struct AlgoEnv {
  int rank = 0;
  int size = 1;
  transport::Transport* transport = nullptr;
  transport::shm::Context* shm = nullptr;  // set when the transport is shm
  HierarchyContext* hierarchy = nullptr;   // set for multi-host communicators
  Scratch* scratch = nullptr;
  const transport::OpContext* ctx = nullptr;
};

// Entry points. Preconditions (checked by the API layer): valid counts,
// roots and dtypes; the algorithm is applicable (shm ones need env.shm).
Status ShmDirectAllReduce(const CollectiveArgs& a, AlgoEnv& env);    // also kReduce
Status ShmTwoPhaseAllReduce(const CollectiveArgs& a, AlgoEnv& env);  // also kReduce
Status ShmDirectBroadcast(const CollectiveArgs& a, AlgoEnv& env);
Status ShmDirectAllGather(const CollectiveArgs& a, AlgoEnv& env);
Status ShmDirectReduceScatter(const CollectiveArgs& a, AlgoEnv& env);
Status ShmDirectAllToAll(const CollectiveArgs& a, AlgoEnv& env);  // also kAllToAllV
Status ShmDirectGather(const CollectiveArgs& a, AlgoEnv& env);
Status ShmDirectScatter(const CollectiveArgs& a, AlgoEnv& env);
Status ShmDirectBarrier(const CollectiveArgs& a, AlgoEnv& env);
// What every rank published in the first step of a direct op (below): its
// buffers' addresses and, for all-to-all(v), where each destination's block
// lies in its send buffer.
class PeerBuffers {
 public:
  uint64_t send_addr(int rank) const;
  uint64_t recv_addr(int rank) const;
  uint64_t block_offset(int rank, int dest) const;  // bytes into rank's send buffer
  uint64_t block_bytes(int rank, int dest) const;
  bool any_in_place() const;  // some rank's all-to-all(v) is in place

 private:
  friend Status ShmZeroCopy(const CollectiveArgs&, AlgoEnv&, bool*, PeerBuffers*);
  std::vector<uint64_t> words_;
  size_t stride_ = 0;
};
// Zero copy (shm_zero_copy.cc): one LL step publishes every rank's buffers;
// when every rank's buffers are shared (AllocShared) it runs all-reduce,
// reduce, reduce-scatter, all-gather, broadcast or all-to-all(v) reading and
// writing peers' buffers directly and sets *taken. Otherwise, with `peers`,
// it returns what everyone published (for a single-copy path, which must
// end with a closing LL step), and without, it was just a barrier. Every
// rank must call it at the same point of the same op with the same
// `peers`-ness; PublishWords(a, n) * 8 must fit the LL slot.
size_t PublishWords(const CollectiveArgs& a, int n);
Status ShmZeroCopy(const CollectiveArgs& a, AlgoEnv& env, bool* taken, PeerBuffers* peers = nullptr);
// Single-copy all-reduce / reduce between processes with private buffers
// (shm_single_copy_reduce.cc): after ShmZeroCopy published the buffers,
// per chunk, rank r pulls slice r of the peers' inputs (process_vm_readv),
// reduces it into its window and output, and after a barrier everyone
// copies the other slices out of the peers' windows; then the closing LL
// step.
Status ShmSingleCopyReduce(const CollectiveArgs& a, AlgoEnv& env, const PeerBuffers& peers);
// Large all-reduce / reduce on the shm transport, shared by the window
// algorithms: zero copy, else single copy, when the message is at least
// shm::Context::direct_reduce_bytes(); sets *done when one of them ran.
Status ShmDirectReduce(const CollectiveArgs& a, AlgoEnv& env, bool* done);
// How the shm algorithm `algo` moves `a`'s data beyond its windows, for
// logs and `tessera topo` ("" when it uses the windows or the LL slot):
// e.g. "direct: zero copy if every rank's buffers are shared, else single copy".
std::string ShmRoute(Algorithm algo, const CollectiveArgs& a, const transport::shm::Context& shm, int n);

Status RingAllReduce(const CollectiveArgs& a, AlgoEnv& env);
Status RingAllGather(const CollectiveArgs& a, AlgoEnv& env);
Status RingReduceScatter(const CollectiveArgs& a, AlgoEnv& env);

Status HalvingDoublingAllReduce(const CollectiveArgs& a, AlgoEnv& env);  // also kReduce

Status TreeBroadcast(const CollectiveArgs& a, AlgoEnv& env);
Status TreeReduce(const CollectiveArgs& a, AlgoEnv& env);
Status TreeAllReduce(const CollectiveArgs& a, AlgoEnv& env);  // reduce to 0 + broadcast
Status TreeBarrier(const CollectiveArgs& a, AlgoEnv& env);    // dissemination

Status PairwiseAllToAll(const CollectiveArgs& a, AlgoEnv& env);  // also kAllToAllV
Status LinearGather(const CollectiveArgs& a, AlgoEnv& env);
Status LinearScatter(const CollectiveArgs& a, AlgoEnv& env);

// Point-to-point (the Send/Recv API and the building block above).
Status PointToPoint(const CollectiveArgs& a, AlgoEnv& env);

// Helpers shared by the algorithm files.
// Element range [begin, end) of part `i` of `count` elements split into `n`
// parts whose boundaries fall on multiples of `align` elements.
struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};
Range SplitRange(size_t count, int n, int i, size_t align);
// Copies unless src == dst (in-place) or n == 0.
void CopyBytes(void* dst, const void* src, size_t n);

// Outputs of large operations are written with non-temporal (streaming)
// stores: the result goes straight to memory without first reading the
// destination lines (saves a third of the memory traffic of a copy) and
// without evicting the shm windows from the cache.
// True for outputs of at least TESSERA_STREAM_KB (default 8 MiB; 0 = never).
bool StreamOutput(size_t total_output_bytes);
// For `a`: large and out of place (in place, the output lines were just
// read and sit in the cache, where streaming stores would evict them).
bool StreamOutput(const CollectiveArgs& a, size_t total_output_bytes);
// Copy to an output; streaming stores when `stream` (and n is large enough).
void CopyOut(void* dst, const void* src, size_t n, bool stream);

// n source pointers, on the stack for up to 32 (no allocation per call).
class PointerList {
 public:
  explicit PointerList(int n) : big_(n > 32 ? n : 0), p_(n > 32 ? big_.data() : small_) {}
  PointerList(const PointerList&) = delete;
  PointerList& operator=(const PointerList&) = delete;
  const void*& operator[](int i) { return p_[i]; }
  const void* const* data() const { return p_; }

 private:
  const void* small_[32];
  std::vector<const void*> big_;
  const void** p_;
};

}  // namespace tessera::comm::algo
