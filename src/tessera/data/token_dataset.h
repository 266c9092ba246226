// TokenDataset: next-token prediction over token files (text or binary
// shards, see token_file.h). The last `val_fraction` of every file is held
// out. Training sample i is a window of seq_len+1 tokens starting at a
// position drawn from (seed, i) by the counter-based RNG; held-out samples
// are consecutive non-overlapping windows of the held-out parts. Windows
// never cross file boundaries. Metric: next-token accuracy.
#pragma once

#include <vector>

#include "tessera/data/dataset.h"
#include "tessera/data/token_file.h"

namespace tessera::data {

struct TokenDatasetConfig {
  std::vector<std::string> paths;
  TokenFormat format = TokenFormat::kText;
  int64_t vocab_size = 256;
  int64_t seq_len = 128;
  double val_fraction = 0.1;
  int64_t eval_samples = 64;  // at most this many held-out windows
  uint64_t seed = 1;
};

class TokenDataset final : public Dataset {
 public:
  static StatusOr<std::unique_ptr<TokenDataset>> Create(const TokenDatasetConfig& config);

  std::string name() const override { return config_.format == TokenFormat::kText ? "text" : "shards"; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t seq_len() const override { return config_.seq_len; }
  Batch TrainBatch(int64_t first, int64_t batch_size) const override;
  int64_t NumEvalSamples() const override { return static_cast<int64_t>(eval_windows_.size()); }
  Batch EvalBatch(int64_t first, int64_t batch_size) const override;
  std::string metric_name() const override { return "token_accuracy"; }
  MetricCounts Score(const Batch& batch, const Tensor& logits) const override { return TokenAccuracy(batch, logits); }
  double ChanceMetric() const override { return 1.0 / static_cast<double>(config_.vocab_size); }

 private:
  struct Window {
    int file;
    int64_t start;
  };
  explicit TokenDataset(const TokenDatasetConfig& config) : config_(config) {}
  void Fill(const std::vector<Window>& windows, Batch* batch) const;

  TokenDatasetConfig config_;
  std::vector<std::unique_ptr<TokenFile>> files_;
  std::vector<int64_t> train_windows_cum_;  // cumulative count of training window starts per file
  std::vector<int64_t> train_limit_;        // per file: training part is [0, limit)
  std::vector<Window> eval_windows_;
};

}  // namespace tessera::data
