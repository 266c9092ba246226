#include "tessera/data/dataset.h"


namespace tessera::data {
namespace {

// Argmax over the last axis of logits [B, T, V] for every (b, t) that has a
// target; -1 elsewhere.
std::vector<int64_t> ScoredArgmax(const Batch& batch, const Tensor& logits) {
  Tensor l = logits.To(DType::kF32).Contiguous();
  const int64_t b = batch.targets.size(0), t = batch.targets.size(1), v = l.size(-1);
  TESSERA_CHECK(l.numel() == b * t * v, "logits {} do not match targets {}", ShapeString(logits.shape()),
                ShapeString(batch.targets.shape()));
  const float* lp = l.data<float>();
  const int64_t* tp = batch.targets.data<int64_t>();
  std::vector<int64_t> out(b * t, -1);
  for (int64_t i = 0; i < b * t; ++i) {
    if (tp[i] == kIgnoreIndex) continue;
    const float* row = lp + i * v;
    int64_t best = 0;
    for (int64_t k = 1; k < v; ++k) {
      if (row[k] > row[best]) best = k;
    }
    out[i] = best;
  }
  return out;
}

}  // namespace

MetricCounts TokenAccuracy(const Batch& batch, const Tensor& logits) {
  std::vector<int64_t> pred = ScoredArgmax(batch, logits);
  const int64_t* tp = batch.targets.data<int64_t>();
  MetricCounts m;
  for (size_t i = 0; i < pred.size(); ++i) {
    if (tp[i] == kIgnoreIndex) continue;
    m.total++;
    m.hits += pred[i] == tp[i];
  }
  return m;
}

MetricCounts RunExactMatch(const Batch& batch, const Tensor& logits) {
  std::vector<int64_t> pred = ScoredArgmax(batch, logits);
  const int64_t* tp = batch.targets.data<int64_t>();
  const int64_t b = batch.targets.size(0), t = batch.targets.size(1);
  MetricCounts m;
  for (int64_t r = 0; r < b; ++r) {
    bool in_run = false, all_right = true;
    for (int64_t c = 0; c <= t; ++c) {
      int64_t i = r * t + c;
      bool scored = c < t && tp[i] != kIgnoreIndex;
      if (scored) {
        if (!in_run) {
          in_run = true;
          all_right = true;
        }
        all_right &= pred[i] == tp[i];
      } else if (in_run) {
        in_run = false;
        m.total++;
        m.hits += all_right;
      }
    }
  }
  return m;
}

}  // namespace tessera::data
