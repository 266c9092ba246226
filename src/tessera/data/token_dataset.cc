#include "tessera/data/token_dataset.h"

#include <algorithm>

#include "tessera/tensor/rng.h"

namespace tessera::data {

StatusOr<std::unique_ptr<TokenDataset>> TokenDataset::Create(const TokenDatasetConfig& config) {
  if (config.paths.empty()) return InvalidArgument("data.path: no data files given");
  if (!(config.val_fraction > 0.0 && config.val_fraction < 1.0)) {
    return InvalidArgument("data.val_fraction must be in (0, 1), got {}", config.val_fraction);
  }
  std::unique_ptr<TokenDataset> ds(new TokenDataset(config));
  const int64_t window = config.seq_len + 1;
  int64_t total_train = 0;
  for (size_t i = 0; i < config.paths.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(auto file, TokenFile::Open(config.paths[i], config.format, config.vocab_size));
    int64_t n = file->size();
    int64_t limit = static_cast<int64_t>(static_cast<double>(n) * (1.0 - config.val_fraction));
    int64_t train_starts = std::max<int64_t>(0, limit - window + 1);
    total_train += train_starts;
    ds->train_windows_cum_.push_back(total_train);
    ds->train_limit_.push_back(limit);
    for (int64_t s = limit; s + window <= n && static_cast<int64_t>(ds->eval_windows_.size()) < config.eval_samples;
         s += config.seq_len) {
      ds->eval_windows_.push_back({static_cast<int>(i), s});
    }
    ds->files_.push_back(std::move(file));
  }
  if (total_train == 0) {
    return InvalidArgument("data files hold too few tokens for one training window of model.seq_len+1 = {} tokens",
                           window);
  }
  if (ds->eval_windows_.empty()) {
    return InvalidArgument("data files hold too few held-out tokens (data.val_fraction = {}) for one window of {} tokens",
                           config.val_fraction, window);
  }
  return ds;
}

void TokenDataset::Fill(const std::vector<Window>& windows, Batch* batch) const {
  const int64_t t = config_.seq_len, b = static_cast<int64_t>(windows.size());
  batch->inputs = Tensor::Empty({b, t}, DType::kI64);
  batch->targets = Tensor::Empty({b, t}, DType::kI64);
  int64_t* in = batch->inputs.data<int64_t>();
  int64_t* tg = batch->targets.data<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const TokenFile& f = *files_[windows[r].file];
    for (int64_t p = 0; p < t; ++p) {
      in[r * t + p] = f.At(windows[r].start + p);
      tg[r * t + p] = f.At(windows[r].start + p + 1);
    }
  }
  batch->num_target_tokens = b * t;
}

Batch TokenDataset::TrainBatch(int64_t first, int64_t batch_size) const {
  std::vector<Window> windows;
  const int64_t total = train_windows_cum_.back();
  for (int64_t s = 0; s < batch_size; ++s) {
    auto r = Philox4x32(config_.seed, 7, static_cast<uint64_t>(first + s));
    int64_t g = static_cast<int64_t>(((static_cast<uint64_t>(r[0]) << 32) | r[1]) % static_cast<uint64_t>(total));
    int file = static_cast<int>(std::upper_bound(train_windows_cum_.begin(), train_windows_cum_.end(), g) -
                                train_windows_cum_.begin());
    int64_t before = file == 0 ? 0 : train_windows_cum_[file - 1];
    windows.push_back({file, g - before});
  }
  Batch batch;
  Fill(windows, &batch);
  return batch;
}

Batch TokenDataset::EvalBatch(int64_t first, int64_t batch_size) const {
  TESSERA_CHECK(first >= 0 && first + batch_size <= NumEvalSamples(), "eval batch out of range");
  std::vector<Window> windows(eval_windows_.begin() + first, eval_windows_.begin() + first + batch_size);
  Batch batch;
  Fill(windows, &batch);
  return batch;
}

}  // namespace tessera::data
