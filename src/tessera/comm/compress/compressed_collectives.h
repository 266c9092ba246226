// Compressed collectives with error feedback (1-bit Adam / PowerSGD /
// DeepSpeed-style gradient compression) on top of a Communicator.
//
//   CompressedCollectives cc(comm, ParseCompressionSpec("int8").value());
//   cc.AllReduce("blocks.3", grad, n);        // sum over ranks, in place
//   cc.bytes().sent                           // bytes this rank sent
//
// Dense codecs (bf16, fp16, int8, fp8; codec.h):
//   all-reduce = (1) each rank adds its residual for `key`, encodes chunk p
//   of the buffer (ceil(n/P) elements) for rank p and keeps the encoding
//   error as the new residual; an all-to-all of the encoded chunks; rank r
//   decodes and sums (fp32, rank order) its chunk; (2) rank r adds a second
//   residual to the sum, encodes it (error again kept), and an all-gather of
//   the encoded sums gives every rank the same decoded result.
//   reduce-scatter = phase (1) only: rank r gets the sum of its chunk.
//   Chunks are cut into segments of 65536 elements whose exchanges are
//   pipelined with the encoding and decoding of the neighbouring segments.
// Top-k (topk:F): each rank adds its residual, keeps its k = ceil(F·n)
//   largest |values| as (uint32 index, fp32 value) pairs, the rest stays in
//   the residual; an all-gather of the pairs, summed densely in rank order.
//   Reduce-scatter keeps the pairs of the own chunk.
// Every rank obtains bit-identical results. Without error feedback
// (spec.error_feedback = false) the residuals are dropped: each call is
// within the bound of codec.h (summed over the ranks, plus the re-encoding
// of the sum), but systematic errors accumulate over calls.
// Residuals and exchange buffers (reused, so large calls do not pay page
// faults each time) are keyed by `key` (a bucket name): one outstanding
// call per key. A key called with another size starts from a zero residual. Every rank must make the same calls in the same
// order (collective semantics of Communicator); the blocking waits carry
// the communicator's per-operation timeout.
// Thread-safety: one thread per object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/api/work.h"
#include "tessera/comm/compress/codec.h"

namespace tessera::comm::compress {

// Bytes this rank put on the wire for compressed collectives, and what the
// same calls send uncompressed in fp32 with a bandwidth-optimal algorithm
// (all-reduce 2(P-1)/P·4n, reduce-scatter (P-1)·4·shard).
struct CommBytes {
  uint64_t calls = 0;
  uint64_t sent = 0;
  uint64_t fp32_equivalent = 0;
};

class ErrorFeedback {
 public:
  // The residual of `key` (n elements; zeros when new or resized).
  float* Residual(const std::string& key, size_t n);
  void Clear() { residuals_.clear(); }
  size_t size() const { return residuals_.size(); }

 private:
  std::map<std::string, std::vector<float>> residuals_;
};

class CompressedCollectives {
 public:
  CompressedCollectives(Communicator* comm, CompressionSpec spec);
  ~CompressedCollectives();

  // In place sum over the ranks of n fp32 elements.
  Status AllReduce(const std::string& key, float* data, size_t n);
  // send: shard·P elements (overwritten: send + residual); recv: the sum of
  // block `rank` (shard elements).
  Status ReduceScatter(const std::string& key, float* send, float* recv, size_t shard);

  // The same in two halves, so that the first exchange overlaps with other
  // work: Start submits it asynchronously, Finish completes the call.
  // Calls must be finished in the order they were started on every rank.
  struct Pending;
  StatusOr<std::unique_ptr<Pending>> StartAllReduce(const std::string& key, float* data, size_t n);
  StatusOr<std::unique_ptr<Pending>> StartReduceScatter(const std::string& key, float* send, float* recv,
                                                        size_t shard);
  Status Finish(Pending& pending);
  // Waits for a started call's exchange and drops the call (no result;
  // for teardown: Finish would start the second exchange).
  void Cancel(Pending& pending);

  const CompressionSpec& spec() const { return spec_; }
  const CommBytes& bytes() const { return bytes_; }
  void reset_bytes() { bytes_ = {}; }
  ErrorFeedback& error_feedback() { return feedback_; }

 private:
  StatusOr<std::unique_ptr<Pending>> StartDense(const std::string& key, float* x, size_t chunk, size_t n_total,
                                                bool all_reduce, float* recv);
  StatusOr<std::unique_ptr<Pending>> StartTopK(const std::string& key, float* x, size_t n_total, bool all_reduce,
                                               float* recv, size_t shard);
  Status FinishDense(Pending& p);
  Status FinishTopK(Pending& p);

  struct Scratch {
    std::unique_ptr<uint8_t[]> send, recv;
    size_t send_size = 0, recv_size = 0;
  };
  // The key's exchange buffers, grown as needed (contents undefined).
  Scratch& ScratchFor(const std::string& key, size_t send_bytes, size_t recv_bytes);

  Communicator* comm_;
  CompressionSpec spec_;
  std::map<std::string, Scratch> scratch_;
  std::vector<float> sum_, sample_;
  struct Candidate {
    float magnitude;
    uint32_t index;
  };
  static void CollectCandidates(const float* x, float* res, size_t n, float thr, std::vector<Candidate>& out);
  std::vector<Candidate> candidates_;
  ErrorFeedback feedback_;
  CommBytes bytes_;
};

// A started call (opaque to callers: pass it to Finish or Cancel).
struct CompressedCollectives::Pending {
  std::string key;
  bool all_reduce = true;
  bool topk = false;
  float* data = nullptr;  // all-reduce: in/out; reduce-scatter: input (clobbered)
  float* recv = nullptr;  // reduce-scatter output
  size_t n_total = 0;     // elements of `data`
  size_t chunk = 0;       // elements per rank's chunk (dense) / shard (top-k reduce-scatter)
  size_t slot = 0;        // top-k: bytes per rank
  uint8_t* send = nullptr;  // top-k (the key's scratch)
  uint8_t* recv_buf = nullptr;
  Work work;  // top-k
  struct Segment {
    size_t begin = 0, len = 0;  // within each rank's chunk
    size_t slot = 0;            // encoded bytes of len elements
    uint8_t* send = nullptr;  // into the key's scratch
    uint8_t* recv = nullptr;
    Work work;
  };
  std::vector<Segment> segments;  // dense
  bool finished = false;
  // The exchanges' time on the progress thread (Work::run_seconds), summed
  // as Finish completes them; encoding and decoding are not included.
  double run_seconds = 0;
};

}  // namespace tessera::comm::compress
