// The built-in dataset: generated integer addition. Each example is
//   a+b=s   with a, b zero-padded to `digits` digits and the sum written
//           reversed (least significant digit first) in digits+1 digits,
// e.g. digits=3: "042+913=5590" for 42+913=955 (reversed "559", padded).
// Examples are packed back to back into sequences of seq_len tokens; only
// the sum's digits carry loss. The held-out split is every operand pair
// (a, b) whose hash falls in the held-out bucket (~1/16 of all pairs), so no
// held-out pair is ever trained on. Generation is a pure function of
// (seed, sample index). Metric: exact match of each example's sum (with
// teacher forcing, which equals greedy decoding when all digits are right).
#pragma once

#include "tessera/data/dataset.h"

namespace tessera::data {

struct ArithmeticConfig {
  int digits = 3;
  int64_t seq_len = 48;
  uint64_t seed = 1;
  int64_t eval_samples = 512;  // held-out sequences
};

class ArithmeticDataset final : public Dataset {
 public:
  // Vocabulary: '0'..'9' → 0..9, '+' → 10, '=' → 11, ';' (separator) → 12.
  static constexpr int64_t kVocab = 13;
  static StatusOr<std::unique_ptr<ArithmeticDataset>> Create(const ArithmeticConfig& config);

  std::string name() const override { return "arithmetic"; }
  int64_t vocab_size() const override { return kVocab; }
  int64_t seq_len() const override { return config_.seq_len; }
  Batch TrainBatch(int64_t first, int64_t batch_size) const override;
  int64_t NumEvalSamples() const override { return config_.eval_samples; }
  Batch EvalBatch(int64_t first, int64_t batch_size) const override;
  std::string metric_name() const override { return "exact_match"; }
  MetricCounts Score(const Batch& batch, const Tensor& logits) const override;
  double ChanceMetric() const override;

  int example_len() const { return 3 * config_.digits + 3; }
  // Decodes token ids to text (for logs and tests).
  static std::string Decode(const std::vector<int64_t>& ids);
  // True if (a, b) belongs to the held-out split.
  bool IsHeldOut(int64_t a, int64_t b) const;

 private:
  explicit ArithmeticDataset(const ArithmeticConfig& config) : config_(config) {}
  Batch MakeBatch(int64_t first, int64_t batch_size, bool held_out) const;
  void WriteExample(int64_t a, int64_t b, int64_t* inputs_tokens) const;

  ArithmeticConfig config_;
};

}  // namespace tessera::data
