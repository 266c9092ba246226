// Datasets for language-model training. A Dataset serves batches by global
// sample index, so any sample can be fetched by any rank in any order with
// the same result (data parallelism slices the index range; nothing depends
// on thread count or call order). Batches hold int64 inputs [B, T] and
// targets [B, T] where -100 marks positions that carry no loss.
// Each dataset defines its held-out metric: Score() counts hits on a batch
// from the model's logits. Implementations are immutable after construction
// and thread-safe for concurrent reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/base/status.h"
#include "tessera/tensor/tensor.h"

namespace tessera::data {

inline constexpr int64_t kIgnoreIndex = -100;

struct Batch {
  Tensor inputs;   // [B, T] int64
  Tensor targets;  // [B, T] int64, kIgnoreIndex where no loss
  int64_t num_target_tokens = 0;
};

struct MetricCounts {
  int64_t hits = 0;
  int64_t total = 0;
  double value() const { return total > 0 ? static_cast<double>(hits) / total : 0.0; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  // Every token id is < vocab_size().
  virtual int64_t vocab_size() const = 0;
  virtual int64_t seq_len() const = 0;
  // Training samples first .. first+batch_size-1 (the index space is
  // unbounded: it wraps or is generated on demand).
  virtual Batch TrainBatch(int64_t first, int64_t batch_size) const = 0;
  // Held-out samples; first + batch_size <= NumEvalSamples().
  virtual int64_t NumEvalSamples() const = 0;
  virtual Batch EvalBatch(int64_t first, int64_t batch_size) const = 0;
  // Name of the held-out metric, e.g. "exact_match" or "token_accuracy".
  virtual std::string metric_name() const = 0;
  // Metric hits/total of `logits` [B, T, V] on `batch`.
  virtual MetricCounts Score(const Batch& batch, const Tensor& logits) const = 0;
  // Accuracy of always guessing the most likely answer without the input
  // (for reports: how far above chance a result is).
  virtual double ChanceMetric() const = 0;
};

// Token-level argmax accuracy over positions with a target (shared helper).
MetricCounts TokenAccuracy(const Batch& batch, const Tensor& logits);
// Exact match over each maximal run of consecutive scored positions in a
// row: a run counts as one hit only if every position's argmax is right.
MetricCounts RunExactMatch(const Batch& batch, const Tensor& logits);

}  // namespace tessera::data
