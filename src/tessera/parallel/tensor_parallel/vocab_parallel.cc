// VocabParallelEmbedding, VocabParallelCrossEntropy and the tied LM head.
#include <cmath>
#include <limits>
#include <memory>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/tensor_parallel/collectives.h"
#include "tessera/parallel/tensor_parallel/layers.h"

namespace tessera::parallel {
namespace {

constexpr int64_t kIgnoreIndex = -100;
constexpr int64_t kParallelElements = 1 << 16;  // below this, one thread

// Per-row statistics of the forward, kept for the backward.
struct CrossEntropyStats {
  std::vector<float> row_max;  // global max over the full vocabulary
  std::vector<float> sum_exp;  // global Σ exp(logit - row_max)
  int64_t count = 0;           // rows not ignored
};

void AllReduceFloats(std::vector<float>& v, comm::ReduceOp op, comm::Communicator* tp) {
  if (IsTrivialGroup(tp) || v.empty()) return;
  ThrowIfFailed(tp->AllReduce(v.data(), v.data(), v.size(), comm::DataType::kFloat32, op),
                "VocabParallelCrossEntropy");
}

}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(const graph::nn::Embedding& full, comm::Communicator* tp,
                                               bool sequence_parallel)
    : tp_(tp), sequence_parallel_(sequence_parallel) {
  const Tensor& w = full.weight();
  vocab_size_ = w.size(0);
  const int size = GroupSize(tp);
  TESSERA_OP_CHECK(vocab_size_ % size == 0,
                   "VocabParallelEmbedding: vocab_size = {} is not divisible by tp = {} (weight {})", vocab_size_,
                   size, ShapeString(w.shape()));
  vocab_start_ = GroupRank(tp) * (vocab_size_ / size);
  graph::NoGradGuard no_grad;
  weight_ = RegisterParameter("weight", TensorShard(w, 0, GroupRank(tp), size));
}

Tensor VocabParallelEmbedding::Forward(const Tensor& ids) const {
  TESSERA_OP_CHECK(ids.defined() && (ids.dtype() == DType::kI64 || ids.dtype() == DType::kI32),
                   "VocabParallelEmbedding: ids must be int64/int32, got {}",
                   ids.defined() ? DTypeName(ids.dtype()) : std::string_view("undefined"));
  if (IsTrivialGroup(tp_)) return graph::Embedding(weight_, ids);
  const std::vector<int64_t> global = ids.ToIntVector();
  std::vector<int64_t> local(global.size());
  std::vector<float> mask(global.size());
  const int64_t end = vocab_end();
  for (size_t i = 0; i < global.size(); ++i) {
    const int64_t id = global[i];
    TESSERA_OP_CHECK(id >= 0 && id < vocab_size_, "VocabParallelEmbedding: id {} at {} outside [0, {})", id, i,
                     vocab_size_);
    const bool mine = id >= vocab_start_ && id < end;
    local[i] = mine ? id - vocab_start_ : 0;
    mask[i] = mine ? 1.0f : 0.0f;
  }
  Tensor rows = graph::Embedding(weight_, Tensor::FromInts(local, ids.shape()));
  Shape mask_shape = ids.shape();
  mask_shape.push_back(1);
  Tensor partial = graph::Mul(rows, Tensor::FromVector(mask, mask_shape, rows.dtype()));
  if (sequence_parallel_) {
    TESSERA_OP_CHECK(partial.dim() >= 2, "VocabParallelEmbedding: sequence parallelism needs ids [..., T], got {}",
                     ShapeString(ids.shape()));
    return ReduceScatterSequence(partial, partial.dim() - 2, tp_);
  }
  return ReduceFromTensorParallel(partial, tp_);
}

Tensor VocabParallelEmbedding::LmHead(const Tensor& x) const {
  return VocabParallelLmHead(x, weight_, tp_, sequence_parallel_);
}

Tensor VocabParallelLmHead(const Tensor& x, const Tensor& embedding_shard, comm::Communicator* tp,
                           bool sequence_parallel) {
  TESSERA_OP_CHECK(x.defined() && x.dim() >= 1 && embedding_shard.defined() && embedding_shard.dim() == 2 &&
                       x.size(-1) == embedding_shard.size(1),
                   "VocabParallelLmHead: x {} and embedding shard {} must be [..., d] and [V/tp, d]",
                   x.defined() ? ShapeString(x.shape()) : std::string("undefined"),
                   embedding_shard.defined() ? ShapeString(embedding_shard.shape()) : std::string("undefined"));
  Tensor in;
  if (sequence_parallel) {
    TESSERA_OP_CHECK(x.dim() >= 2, "VocabParallelLmHead: sequence parallelism needs x [..., T, d], got {}",
                     ShapeString(x.shape()));
    in = AllGatherSequence(x, x.dim() - 2, tp);
  } else {
    in = CopyToTensorParallel(x, tp);
  }
  return graph::MatMul(in, graph::Cast(embedding_shard, in.dtype()), false, true);
}

Tensor VocabParallelCrossEntropy(const Tensor& logits_shard, const Tensor& targets, int64_t vocab_start,
                                 comm::Communicator* tp) {
  TESSERA_OP_CHECK(logits_shard.defined() && logits_shard.dim() >= 1 && IsFloating(logits_shard.dtype()) &&
                       logits_shard.size(-1) > 0,
                   "VocabParallelCrossEntropy: logits_shard must be a floating [..., V/tp] tensor, got {}",
                   logits_shard.defined() ? ShapeString(logits_shard.shape()) : std::string("undefined"));
  const int64_t vs = logits_shard.size(-1);
  const int64_t n = logits_shard.numel() / vs;
  TESSERA_OP_CHECK(targets.defined() && targets.dtype() == DType::kI64 && targets.numel() == n,
                   "VocabParallelCrossEntropy: targets must be int64 with {} elements (logits_shard {}), got {} {}", n,
                   ShapeString(logits_shard.shape()),
                   targets.defined() ? ShapeString(targets.shape()) : std::string("undefined"),
                   targets.defined() ? DTypeName(targets.dtype()) : std::string_view(""));
  const int64_t vocab = vs * GroupSize(tp);
  TESSERA_OP_CHECK(vocab_start == GroupRank(tp) * vs,
                   "VocabParallelCrossEntropy: vocab_start = {} but rank {} of tp = {} holds [{}, {})", vocab_start,
                   GroupRank(tp), GroupSize(tp), GroupRank(tp) * vs, (GroupRank(tp) + 1) * vs);
  const std::vector<int64_t> tgt = targets.ToIntVector();
  for (int64_t i = 0; i < n; ++i) {
    TESSERA_OP_CHECK(tgt[i] == kIgnoreIndex || (tgt[i] >= 0 && tgt[i] < vocab),
                     "VocabParallelCrossEntropy: target {} at {} outside [0, {}) and not {}", tgt[i], i, vocab,
                     kIgnoreIndex);
  }
  const Tensor lf = logits_shard.To(DType::kF32).Contiguous();
  const float* logits = lf.data<float>();

  auto stats = std::make_shared<CrossEntropyStats>();
  stats->row_max.assign(n, -std::numeric_limits<float>::infinity());
#pragma omp parallel for schedule(static) if (n * vs > kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * vs;
    float m = row[0];
    for (int64_t v = 1; v < vs; ++v) m = std::max(m, row[v]);
    stats->row_max[i] = m;
  }
  AllReduceFloats(stats->row_max, comm::ReduceOp::kMax, tp);
  // [sum_exp (n), target logit (n)] in one reduction.
  std::vector<float> sums(2 * n, 0.0f);
#pragma omp parallel for schedule(static) if (n * vs > kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * vs;
    const float m = stats->row_max[i];
    float s = 0.0f;
    for (int64_t v = 0; v < vs; ++v) s += std::exp(row[v] - m);
    sums[i] = s;
    const int64_t t = tgt[i] - vocab_start;
    if (tgt[i] != kIgnoreIndex && t >= 0 && t < vs) sums[n + i] = row[t];
  }
  AllReduceFloats(sums, comm::ReduceOp::kSum, tp);
  stats->sum_exp.assign(sums.begin(), sums.begin() + n);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (tgt[i] == kIgnoreIndex) continue;
    total += std::log(static_cast<double>(sums[i])) + stats->row_max[i] - sums[n + i];
    ++stats->count;
  }
  Tensor loss = Tensor::Scalar(stats->count > 0 ? total / static_cast<double>(stats->count) : 0.0, DType::kF32);

  if (graph::ShouldRecord({logits_shard})) {
    graph::Record(
        "VocabParallelCrossEntropy", {logits_shard}, {loss},
        [lf, tgt, stats, vocab_start, n, vs, shape = logits_shard.shape(), dtype = logits_shard.dtype()](
            const std::vector<Tensor>& g, const std::vector<bool>&) {
          Tensor grad = Tensor::Zeros({n, vs}, DType::kF32);
          if (stats->count > 0) {
            const float scale = static_cast<float>(g[0].Item()) / static_cast<float>(stats->count);
            const float* logits = lf.data<float>();
            float* out = grad.data<float>();
#pragma omp parallel for schedule(static) if (n * vs > kParallelElements)
            for (int64_t i = 0; i < n; ++i) {
              if (tgt[i] == kIgnoreIndex) continue;
              const float m = stats->row_max[i];
              const float inv = scale / stats->sum_exp[i];
              for (int64_t v = 0; v < vs; ++v) out[i * vs + v] = std::exp(logits[i * vs + v] - m) * inv;
              const int64_t t = tgt[i] - vocab_start;
              if (t >= 0 && t < vs) out[i * vs + t] -= scale;
            }
          }
          return std::vector<Tensor>{grad.View(shape).To(dtype)};
        });
  }
  return loss;
}

}  // namespace tessera::parallel
