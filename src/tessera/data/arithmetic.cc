#include "tessera/data/arithmetic.h"

#include <cmath>

#include "tessera/tensor/rng.h"

namespace tessera::data {
namespace {
constexpr int64_t kPlus = 10, kEquals = 11, kSeparator = 12;
constexpr uint64_t kHeldOutBuckets = 16;
}  // namespace

StatusOr<std::unique_ptr<ArithmeticDataset>> ArithmeticDataset::Create(const ArithmeticConfig& config) {
  if (config.digits < 1 || config.digits > 9) {
    return InvalidArgument("data.digits must be in [1, 9], got {}", config.digits);
  }
  int64_t example = 3 * config.digits + 3;
  if (config.seq_len < example) {
    return InvalidArgument("model.seq_len {} is shorter than one {}-digit addition example ({} tokens)",
                           config.seq_len, config.digits, example);
  }
  if (config.eval_samples < 1) return InvalidArgument("eval.samples must be >= 1, got {}", config.eval_samples);
  return std::unique_ptr<ArithmeticDataset>(new ArithmeticDataset(config));
}

bool ArithmeticDataset::IsHeldOut(int64_t a, int64_t b) const {
  auto r = Philox4x32(config_.seed ^ 0x5eed0ffbadc0ffeeULL, static_cast<uint64_t>(a), static_cast<uint64_t>(b));
  return r[0] % kHeldOutBuckets == 0;
}

void ArithmeticDataset::WriteExample(int64_t a, int64_t b, int64_t* out) const {
  const int d = config_.digits;
  auto write_padded = [&](int64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) {
      out[i] = v % 10;
      v /= 10;
    }
    out += n;
  };
  write_padded(a, d);
  *out++ = kPlus;
  write_padded(b, d);
  *out++ = kEquals;
  int64_t s = a + b;
  for (int i = 0; i <= d; ++i) {  // reversed: least significant digit first
    *out++ = s % 10;
    s /= 10;
  }
}

Batch ArithmeticDataset::MakeBatch(int64_t first, int64_t batch_size, bool held_out) const {
  const int64_t t = config_.seq_len;
  const int64_t ex = example_len();
  const int64_t per_seq = (t + 1) / (ex + 1);
  const int64_t limit = static_cast<int64_t>(std::pow(10, config_.digits));
  Batch batch;
  batch.inputs = Tensor::Empty({batch_size, t}, DType::kI64);
  batch.targets = Tensor::Empty({batch_size, t}, DType::kI64);
  int64_t* in = batch.inputs.data<int64_t>();
  int64_t* tg = batch.targets.data<int64_t>();
  std::vector<int64_t> tokens(t + 1);
  std::vector<bool> scored(t + 1);
  const uint64_t stream_seed = DeriveSeed(config_.seed, held_out ? 2 : 1);
  for (int64_t s = 0; s < batch_size; ++s) {
    const uint64_t sample = static_cast<uint64_t>(first + s);
    std::fill(tokens.begin(), tokens.end(), kSeparator);
    std::fill(scored.begin(), scored.end(), false);
    uint64_t draw = 0;
    for (int64_t e = 0; e < per_seq; ++e) {
      int64_t a, b;
      do {  // rejection-sample a pair from the requested split
        auto r = Philox4x32(stream_seed, sample, draw++);
        a = static_cast<int64_t>(r[0] % static_cast<uint64_t>(limit));
        b = static_cast<int64_t>(r[1] % static_cast<uint64_t>(limit));
      } while (IsHeldOut(a, b) != held_out);
      int64_t base = e * (ex + 1);
      WriteExample(a, b, &tokens[base]);
      for (int64_t k = ex - (config_.digits + 1); k < ex; ++k) scored[base + k] = true;
    }
    for (int64_t p = 0; p < t; ++p) {
      in[s * t + p] = tokens[p];
      tg[s * t + p] = scored[p + 1] ? tokens[p + 1] : kIgnoreIndex;
      batch.num_target_tokens += scored[p + 1];
    }
  }
  return batch;
}

Batch ArithmeticDataset::TrainBatch(int64_t first, int64_t batch_size) const {
  return MakeBatch(first, batch_size, /*held_out=*/false);
}

Batch ArithmeticDataset::EvalBatch(int64_t first, int64_t batch_size) const {
  TESSERA_CHECK(first >= 0 && first + batch_size <= NumEvalSamples(), "eval batch [{}, {}) outside [0, {})",
                first, first + batch_size, NumEvalSamples());
  return MakeBatch(first, batch_size, /*held_out=*/true);
}

MetricCounts ArithmeticDataset::Score(const Batch& batch, const Tensor& logits) const {
  return RunExactMatch(batch, logits);
}

double ArithmeticDataset::ChanceMetric() const {
  // Uniform guess among the 2·10^d − 1 possible sums.
  return 1.0 / (2.0 * std::pow(10.0, config_.digits) - 1.0);
}

std::string ArithmeticDataset::Decode(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    if (id >= 0 && id <= 9) {
      s += static_cast<char>('0' + id);
    } else if (id == kPlus) {
      s += '+';
    } else if (id == kEquals) {
      s += '=';
    } else if (id == kSeparator) {
      s += ';';
    } else {
      s += '?';
    }
  }
  return s;
}

}  // namespace tessera::data
