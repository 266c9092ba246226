// The twin's op inventory (internal to sim/twin.cc): every autograd op of
// one micro-batch of Tessera's GPT (models/gpt.h, parallel/gpt_stage.cc) on
// one rank of a pipeline stage, with its size, priced forward and backward
// with the calibrated costs (calibrate.h), and the elements of every op
// output the tape keeps until the backward (activation memory).
// Sizes are what the runtime's allocator reserves (its size classes,
// hal/pooled_allocator.h), tensor by tensor.
// Pure; thread-safe.
#pragma once

#include <vector>

#include "tessera/sim/calibrate.h"
#include "tessera/sim/twin.h"

namespace tessera::sim::twin_detail {

// Bytes the allocator reserves for one tensor of `floats` fp32 elements.
double AllocatedBytes(double floats);
// The same in fp32 elements.
inline double AllocatedFloats(double floats) { return AllocatedBytes(floats) / 4; }

class StageWork {
 public:
  explicit StageWork(const HostCalibration& h) : h_(&h) {}
  // Empty work priced with the same calibration.
  StageWork Fresh() const { return StageWork(*h_); }

  // y[m, n] = x[m, k] W^T: forward (1 GEMM) and backward (2).
  void Linear(double m, double n, double k);
  // Fused causal attention over `batch` sequences of `seq` tokens, width `d`
  // over `heads` heads.
  void Attention(double batch, double seq, double d, double heads);
  // `outputs`: elements of the op's output (default: `elements`).
  void Op(OpKind kind, double elements, double outputs = -1);
  // The output of a communication op recorded on the tape (tp all-reduce,
  // sequence-parallel gather / scatter, expert all-to-all, a stage's
  // received activations): memory only, its time is priced apart.
  void Received(double elements) { out_floats += AllocatedFloats(elements); }

  // Forward + backward seconds, and the split (GEMMs and attention: 1/3
  // forward, element-wise ops: 1/2).
  double Seconds() const { return gemm_s + other_s; }
  double fwd_s = 0, bwd_s = 0;
  double gemm_s = 0;   // linear layers and attention
  double other_s = 0;  // every other op
  double fixed_s = 0;  // the per-op fixed part (included above)
  double ops = 0;
  // Elements of all op outputs of one micro-batch: Tessera's tape keeps
  // every recorded op's output (and the inputs it saves, themselves earlier
  // outputs) until the micro-batch's backward.
  double out_floats = 0;
  // Elements alive only while one recomputed part runs again in the backward.
  double transient_floats = 0;
  // The largest single op output (elements): the backward of that op holds
  // its output gradient and its inputs' gradients at once.
  double largest_out = 0;

 private:
  void Add(double seconds, double forward_share, bool gemm);
  const HostCalibration* h_;
};

struct StageParams {
  double params = 0;          // on this rank
  double tensors = 0;
  double tensor_bytes = 0;    // allocated, tensor by tensor (a gradient tensor each too)
  double expert_params = 0;   // of which experts (replicated over dp / ep ranks)
  double largest_block = 0;   // parameters of the largest block (a ZeRO-3 gather)
  // ZeroOptimizer's buckets (parallel/gpt_stage.cc): one per segment
  // (embedding, each block, head) and, under expert parallelism, one more
  // per block for its experts (elements each; the two lists align).
  std::vector<double> dense_buckets, expert_buckets;

  void Segment() {
    dense_buckets.push_back(0);
    expert_buckets.push_back(0);
  }
  // One parameter tensor of `numel` elements; `expert_bucket`: it goes to
  // the segment's expert bucket (expert parallelism).
  void Add(double numel, bool expert = false, bool expert_bucket = false);
};

// The work of pipeline stage `s` holding layers [first, first + n) on one
// rank: embedding on the first stage, final norm, head, loss and aux-loss
// terms on the last. Recompute: "selective" re-runs each block's attention
// part in the backward and keeps only its input, "full" re-runs the whole
// block (its forward added to the backward, only block inputs kept).
void AddStage(const TwinModel& m, const TwinRun& r, int s, int first, int n, StageWork& w, StageParams& p);

bool IsMoeLayer(const TwinModel& m, int layer);
int MoeLayers(const TwinModel& m, int begin, int end);
// TwinModel::expert_load of `layer` (1 when not measured).
double ExpertLoad(const TwinModel& m, int layer);
// Expected ranks a token's vector goes to under expert parallelism `ep`
// (distinct ranks among its top_k experts, uniformly routed; 1 without ep).
double RanksPerToken(const TwinModel& m, int ep);

}  // namespace tessera::sim::twin_detail
