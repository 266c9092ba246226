// ZeroOptimizer: data-parallel gradient synchronization and AdamW with
// ZeRO stages 0–3 (Rajbhandari et al. 2020), over flat per-bucket buffers.
//
// Parameters come in buckets (normally one per model segment: the
// embedding, each transformer block, the head), each with the
// communicator that holds its replicas (the data-parallel group, or the
// expert-data-parallel group for expert weights). At creation the fp32
// parameters of a bucket are moved into one flat buffer (padded to a
// multiple of the group size) that the parameter tensors then view; rank r
// of the group owns the shard [r·S, (r+1)·S) of it.
//
//   ReduceGradients(b)  after the last backward that touches bucket b:
//                       copies the parameters' .grad() into a flat fp32
//                       buffer and starts, asynchronously, an all-reduce
//                       (stages 0–1) or a reduce-scatter (stages 2–3) of it;
//                       a parameter without a gradient on any rank (an
//                       expert no token reached) keeps "no gradient".
//   FinishReductions()  waits for them (bounded by the communicator timeout)
//                       and averages over the group.
//   SquaredGradNorm()   this rank's share of the global squared norm: each
//                       element counted once across the whole mesh (own
//                       shard only; copies replicated over tensor-parallel
//                       ranks are counted on one of them). Sum it over the
//                       world to get the global norm.
//   ScaleGradients(f)   clipping / loss-scale unscaling.
//   Step(lr)            AdamW (the fused optim:: kernel) on the elements
//                       this rank updates — the whole bucket at stage 0,
//                       its shard at stages 1–3 — then (stages 1–2) an
//                       all-gather of the updated shards into the flat
//                       parameter buffer (asynchronous: bucket b's gather
//                       runs while bucket b+1 is updated). Optimizer state exists only for
//                       those elements.
//   Gather(b)/Release(b) stage 3 only: parameters live as shards; Gather
//                       all-gathers bucket b's full parameters (the
//                       parameter tensors view them) and Release frees
//                       them again. Tensors recorded on a tape keep their
//                       identity, so a released bucket can be gathered
//                       again for its backward.
// Gradient compression (options.grad_compression: a codec per bucket name,
// grad_compression_policy.h; comm/compress): the bucket's all-reduce
// (stages 0–1) or reduce-scatter (stages 2–3) runs compressed, with error feedback per bucket (the residual is carried to
// the next step); the flag all-reduce stays exact. Every replica still gets
// the same reduced gradient. GradCommBytes() counts the gradient bytes this
// rank sent, and what fp32 would have sent.
// Gradients are dropped from the parameters once copied (stages 2–3 keep
// only the own shard). Optimizer state can live in the host memory tier
// (offload, as ZeRO-Offload); on the CPU device the tiers are separate pools.
// AdamW semantics are those of optim::AdamW (per-parameter step counts, no
// update for a parameter without a gradient, no decay for tensors of rank
// < 2 via the per-parameter weight_decay given here).
// Thread-safety: one thread drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/api/work.h"
#include "tessera/comm/compress/codec.h"
#include "tessera/optim/adamw.h"
#include "tessera/parallel/grad_compression_policy.h"
#include "tessera/tensor/tensor.h"

namespace tessera::parallel {

struct ZeroParam {
  std::string name;  // full dotted name (messages, state dicts)
  Tensor param;      // fp32 leaf, contiguous
  double weight_decay = 0.0;
  // False for a copy that other tensor-parallel ranks also hold (norm gains,
  // replicated biases) on every tp rank but one: counted once in norms.
  bool count_in_norm = true;
  // The box this tensor is of the single-process model's tensor of the same
  // name (a tensor-parallel shard is a block of rows or columns): its global
  // shape and offset. Empty: the tensor is the whole of it.
  std::vector<int64_t> global_shape;
  std::vector<int64_t> global_offset;
};

struct ZeroBucketSpec {
  std::string name;  // "blocks.3" — messages, trace
  std::vector<ZeroParam> params;
  comm::Communicator* group = nullptr;  // the replicas of these parameters
  // Multiplies the group-averaged gradient (expert weights under expert
  // parallelism: 1/ep, as their gradient already sums ep ranks' tokens).
  double grad_scale = 1.0;
};

struct ZeroOptions {
  int stage = 0;  // 0–3
  optim::AdamWOptions adam;
  bool offload_optimizer = false;  // optimizer state in the host tier
  GradCompressionPolicy grad_compression;  // per bucket (by name); none: exact fp32 reductions
};

// Gradient-reduction bytes this rank sent (summed over buckets and steps).
struct ZeroCommBytes {
  uint64_t sent = 0;             // on the wire (compressed when compression is on)
  uint64_t fp32_equivalent = 0;  // what exact fp32 reductions send (ring/bandwidth-optimal)
};

// Bytes this rank holds, by category (from the buffers' sizes).
struct ZeroMemory {
  int64_t parameters = 0;       // flat parameter buffers (full or shard)
  int64_t gradients = 0;        // reduced gradients kept for the update
  int64_t optimizer_state = 0;  // exp_avg + exp_avg_sq (device tier)
  int64_t offloaded_optimizer_state = 0;  // the same in the host tier
};

class ZeroOptimizer {
 public:
  static StatusOr<std::unique_ptr<ZeroOptimizer>> Create(std::vector<ZeroBucketSpec> buckets,
                                                         const ZeroOptions& options);
  ~ZeroOptimizer();
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  int num_buckets() const;
  const std::string& bucket_name(int b) const;
  int stage() const;

  Status Gather(int b);  // no-op below stage 3
  void Release(int b);   // no-op below stage 3
  Status GatherAll();

  Status ReduceGradients(int b);
  Status FinishReductions();
  double SquaredGradNorm() const;
  void ScaleGradients(double factor);
  Status Step(double lr);
  // Silent-corruption check (stages 0–1, where every rank of a bucket's
  // group holds the same reduced gradient): an XXH3 digest of each bucket's
  // reduced gradient, compared across its group (one all-gather per
  // distinct group). `mismatch` stays empty when all replicas agree, else it
  // names the buckets and the group ranks in the minority. Collective over
  // every bucket group; call after FinishReductions(). No-op at stages 2–3.
  Status CompareReplicaGradients(std::string* mismatch);
  // Testing: damages the first element this rank owns of bucket `bucket`'s
  // reduced gradient, on this rank only: a NaN, or one flipped mantissa bit
  // (silent corruption of one replica).
  void CorruptGradientForTesting(int bucket, bool nan);
  // Drops the reduced gradients without updating (a skipped step).
  Status DiscardGradients();

  // Checkpoint access to the flat buffers. A span is the elements
  // [begin, end) (row-major) of one parameter as this rank holds it, and
  // where they live in the buffers.
  struct Span {
    const ZeroParam* param = nullptr;
    int bucket = 0;
    int index = 0;  // of the parameter in its bucket
    int64_t begin = 0, end = 0;
    float* value = nullptr;       // null in HeldStateSpans
    float* exp_avg = nullptr;     // null in HeldValueSpans
    float* exp_avg_sq = nullptr;
  };
  // This rank's canonical shard of every bucket (values and moments): over
  // a bucket's group these tile every parameter exactly once.
  std::vector<Span> OwnedSpans();
  // Every parameter element this rank holds a value for (the whole
  // parameter at stages 0–2, the own shard at stage 3).
  std::vector<Span> HeldValueSpans();
  // Every element this rank keeps optimizer state for.
  std::vector<Span> HeldStateSpans();
  // AdamW's step count of parameter `index` of `bucket` (the same on every
  // rank of the bucket's group), and the number of Step() calls.
  int64_t& param_step(int bucket, int index);
  int64_t steps_taken() const { return steps_taken_; }
  void set_steps_taken(int64_t steps) { steps_taken_ = steps; }

  ZeroMemory Memory() const;
  ZeroCommBytes GradCommBytes() const;
  // Seconds spent waiting for reductions and all-gathers (not overlapped).
  double comm_wait_seconds() const;
  void reset_comm_wait_seconds();
  // Gradient reductions only (cumulative): the time they ran on the
  // communicator's progress thread, and the part of it the caller waited
  // for in FinishReductions / Step. 1 − wait / comm is the fraction of the
  // gradient communication hidden behind the backward pass.
  double grad_comm_seconds() const;
  double grad_wait_seconds() const;

  struct Bucket;

 private:
  ZeroOptimizer() = default;
  Status Reduce(Bucket& bucket);

  ZeroOptions options_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  double comm_wait_s_ = 0;
  double grad_comm_s_ = 0, grad_wait_s_ = 0;
  int64_t steps_taken_ = 0;
};

}  // namespace tessera::parallel
