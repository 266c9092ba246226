// VocabParallelEmbedding, VocabParallelCrossEntropy and the tied LM head.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/graph/apply.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/loss/cross_entropy.h"
#include "tessera/ops/softmax/softmax.h"
#include "tessera/parallel/tensor_parallel/collectives.h"
#include "tessera/parallel/tensor_parallel/layers.h"

namespace tessera::parallel {
namespace {

constexpr int64_t kIgnoreIndex = -100;
constexpr int64_t kParallelElements = 1 << 16;  // below this, one thread

void AllReduceFloats(std::vector<float>& v, comm::ReduceOp op, comm::Communicator* tp) {
  if (IsTrivialGroup(tp) || v.empty()) return;
  ThrowIfFailed(tp->AllReduce(v.data(), v.data(), v.size(), comm::DataType::kFloat32, op), "VocabParallelCrossEntropy");
}

}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(const graph::nn::Embedding& full, comm::Communicator* tp,
                                               bool sequence_parallel)
    : tp_(tp), sequence_parallel_(sequence_parallel) {
  const Tensor& w = full.weight();
  vocab_size_ = w.size(0);
  const int size = GroupSize(tp);
  TESSERA_OP_CHECK(vocab_size_ % size == 0,
                   "VocabParallelEmbedding: vocab_size = {} is not divisible by tp = {} (weight {})", vocab_size_, size,
                   ShapeString(w.shape()));
  vocab_start_ = GroupRank(tp) * (vocab_size_ / size);
  graph::NoGradGuard no_grad;
  weight_ = RegisterParameter("weight", TensorShard(w, 0, GroupRank(tp), size));
}

Tensor VocabParallelEmbedding::Forward(const Tensor& ids) const {
  TESSERA_OP_CHECK(ids.defined() && (ids.dtype() == DType::kI64 || ids.dtype() == DType::kI32),
                   "VocabParallelEmbedding: ids must be int64/int32, got {}",
                   ids.defined() ? DTypeName(ids.dtype()) : std::string_view("undefined"));
  if (IsTrivialGroup(tp_)) return graph::Embedding(weight_, ids);
  // This rank's row of each id (0 when another rank holds it) and a 0/1
  // mask: an operator of its own, so graph mode replays it on new ids.
  const int64_t start = vocab_start_, end = vocab_end(), vocab = vocab_size_;
  const DType mask_dtype = weight_.dtype();
  std::vector<Tensor> shard = graph::Apply(
      {"VocabShardIds", graph::OpKind::kElementwise, fmt::format("start={} end={}", start, end)}, {ids},
      [start, end, vocab, mask_dtype](const std::vector<Tensor>& in) {
        const Tensor ids64 = in[0].dtype() == DType::kI64 ? in[0].Contiguous() : in[0].To(DType::kI64);
        const int64_t* global = ids64.data<int64_t>();
        const int64_t n = ids64.numel();
        Tensor local = Tensor::Empty(ids64.shape(), DType::kI64);
        Shape mask_shape = ids64.shape();
        mask_shape.push_back(1);
        Tensor mask = Tensor::Empty(mask_shape, DType::kF32);
        int64_t* l = local.data<int64_t>();
        float* m = mask.data<float>();
        for (int64_t i = 0; i < n; ++i) {
          const int64_t id = global[i];
          TESSERA_OP_CHECK(id >= 0 && id < vocab, "VocabParallelEmbedding: id {} at {} outside [0, {})", id, i, vocab);
          const bool mine = id >= start && id < end;
          l[i] = mine ? id - start : 0;
          m[i] = mine ? 1.0f : 0.0f;
        }
        return std::vector<Tensor>{local, mask_dtype == DType::kF32 ? mask : mask.To(mask_dtype)};
      },
      nullptr);
  Tensor rows = graph::Embedding(weight_, shard[0]);
  Tensor partial = graph::Mul(rows, shard[1]);  // the mask is in the weight's dtype, as rows
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
  // One Apply (graph/apply.h): its forward talks to the other ranks of tp
  // (a communication node with side effects). Outputs: the loss, then what
  // the backward needs, as tensors: local_targets [n] (int64: target -
  // vocab_start inside the shard, else -1), row_scale [n] (fp32:
  // exp(lse_shard - lse) for counted rows, 0 for ignored ones) and the count
  // of rows not ignored (int64 scalar).
  using Ins = std::vector<Tensor>;
  return graph::Apply1(
      {"VocabParallelCrossEntropy", graph::OpKind::kCommunication,
       fmt::format("vocab_start={} group={} rank={} size={}", vocab_start, fmt::ptr(tp), GroupRank(tp), GroupSize(tp)),
       graph::SaveBit(0), graph::SaveBit(1) | graph::SaveBit(2) | graph::SaveBit(3), 1, true},
      {logits_shard, targets},
      [n, vs, vocab, vocab_start, tp](const Ins& in) {
        // Read without ToIntVector: this is the op's own forward, which a
        // captured graph re-runs on new targets (not control flow outside it).
        const Tensor targets_c = in[1].Contiguous();
        const int64_t* tgt = targets_c.data<int64_t>();
        for (int64_t i = 0; i < n; ++i) {
          TESSERA_OP_CHECK(tgt[i] == kIgnoreIndex || (tgt[i] >= 0 && tgt[i] < vocab),
                           "VocabParallelCrossEntropy: target {} at {} outside [0, {}) and not {}", tgt[i], i, vocab,
                           kIgnoreIndex);
        }
        // Per row, the shard's log-sum-exp (the ops kernel; no target counts)
        // and the target logit where this shard holds it.
        const Tensor x2d = in[0].Contiguous().View({n, vs});
        std::vector<int64_t> local_targets(n, -1);
        std::vector<int64_t> no_targets(n, kIgnoreIndex);
        const Tensor lse_shard = ops::CrossEntropy(x2d, Tensor::FromInts(no_targets, {n})).lse;
        const float* lse_local = lse_shard.data<float>();
        std::vector<float> row_max(lse_local, lse_local + n);
        AllReduceFloats(row_max, comm::ReduceOp::kMax, tp);
        // [Σ_ranks exp(lse_shard - max) (n), target logit (n)] in one reduction.
        std::vector<float> sums(2 * n, 0.0f);
        DispatchFloating(x2d.dtype(), [&]<typename T>() {
          const T* logits = x2d.data<T>();
          for (int64_t i = 0; i < n; ++i) {
            sums[i] = std::exp(lse_local[i] - row_max[i]);
            const int64_t t = tgt[i] - vocab_start;
            if (tgt[i] != kIgnoreIndex && t >= 0 && t < vs) {
              local_targets[i] = t;
              sums[n + i] = ToF32(logits[i * vs + t]);
            }
          }
        });
        AllReduceFloats(sums, comm::ReduceOp::kSum, tp);
        std::vector<float> row_scale(n, 0.0f);
        int64_t count = 0;
        double total = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          if (tgt[i] == kIgnoreIndex) continue;
          const double lse = row_max[i] + std::log(static_cast<double>(sums[i]));
          total += lse - sums[n + i];
          row_scale[i] = static_cast<float>(std::exp(lse_local[i] - lse));
          ++count;
        }
        Tensor loss = Tensor::Scalar(count > 0 ? total / static_cast<double>(count) : 0.0, DType::kF32);
        return Ins{loss, Tensor::FromInts(local_targets, {n}), Tensor::FromVector(row_scale, {n}),
                   Tensor::Scalar(static_cast<double>(count), DType::kI64)};
      },
      [n, vs](const Ins& g, const Ins& in, const Ins& out, const std::vector<bool>&) {
        // d loss / d logit = (softmax over the full vocabulary - onehot) / count;
        // the full softmax is the shard's softmax times exp(lse_shard - lse).
        const Tensor x2d = in[0].Contiguous().View({n, vs});
        const int64_t* local_targets = out[1].data<int64_t>();
        const float* row_scale = out[2].data<float>();
        const int64_t count = *out[3].data<int64_t>();
        Tensor grad = ops::Softmax(x2d.To(DType::kF32), -1);
        float* dst = grad.data<float>();
        const float scale = count > 0 ? static_cast<float>(g[0].Item()) / static_cast<float>(count) : 0.0f;
#pragma omp parallel for schedule(static) if (n * vs > kParallelElements && n > 1)
        for (int64_t i = 0; i < n; ++i) {
          const float c = scale * row_scale[i];
          float* row = dst + i * vs;
          for (int64_t v = 0; v < vs; ++v) row[v] *= c;
          if (local_targets[i] >= 0) row[local_targets[i]] -= scale;
        }
        return Ins{grad.View(in[0].shape()).To(x2d.dtype()), Tensor()};
      });
}

}  // namespace tessera::parallel
