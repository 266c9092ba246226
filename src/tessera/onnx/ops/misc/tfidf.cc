// TfIdfVectorizer: counts the pool's n-grams (with skips) in each row of an
// int32 / int64 / string tensor [C] or [N, C] and writes TF, IDF or TF-IDF
// weights at the n-grams' output indexes.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {

Status TfIdfVectorizerKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  const Node& node = ctx.node();
  TESSERA_ASSIGN_OR_RETURN(int64_t max_gram, node.Int("max_gram_length", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t min_gram, node.Int("min_gram_length", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t max_skip, node.Int("max_skip_count", 0));
  TESSERA_ASSIGN_OR_RETURN(std::string mode, node.String("mode", ""));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> counts, node.Ints("ngram_counts", {}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> indexes, node.Ints("ngram_indexes", {}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> pool_ints, node.Ints("pool_int64s", {}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> pool_strings, node.Strings("pool_strings", {}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<float> weights, node.Floats("weights", {}));
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return ctx.Error("mode must be TF, IDF or TFIDF, got '{}'", mode);
  if (min_gram < 1 || max_gram < min_gram || max_skip < 0) {
    return ctx.Error("need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  }
  const bool strings = x.type() == ElemType::kString;
  if (!strings && x.type() != ElemType::kInt32 && x.type() != ElemType::kInt64) {
    return ctx.Error("input must be int32, int64 or string, got {}", ElemName(x.type()));
  }
  if (x.rank() > 2) return ctx.Error("input must be [C] or [N, C], got {}", x.ShapeString());
  // Pool tokens as ids: strings are numbered by first appearance in the pool.
  std::vector<int64_t> pool;
  std::unordered_map<std::string, int64_t> string_ids;
  if (strings) {
    for (const std::string& s : pool_strings) {
      pool.push_back(string_ids.emplace(s, static_cast<int64_t>(string_ids.size())).first->second);
    }
  } else {
    pool = pool_ints;
  }
  const int64_t pool_size = static_cast<int64_t>(pool.size());
  // ngram_counts[k]: where the (k+1)-grams start in the pool.
  std::map<std::vector<int64_t>, int64_t> ngram_slot;  // n-gram -> position in pool order
  int64_t slot = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t start = counts[k], end = k + 1 < counts.size() ? counts[k + 1] : pool_size;
    const int64_t n = static_cast<int64_t>(k) + 1;
    if (start < 0 || end < start || end > pool_size || (end - start) % n != 0) {
      return ctx.Error("ngram_counts {} does not fit a pool of {}", k, pool_size);
    }
    for (int64_t p = start; p < end; p += n) {
      ngram_slot.emplace(std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n), slot);
      ++slot;
    }
  }
  if (static_cast<int64_t>(indexes.size()) != slot) {
    return ctx.Error("ngram_indexes has {} entries for {} n-grams", indexes.size(), slot);
  }
  if (!weights.empty() && weights.size() != indexes.size()) {
    return ctx.Error("weights has {} entries for {} n-grams", weights.size(), indexes.size());
  }
  int64_t out_dim = 0;
  for (int64_t idx : indexes) {
    if (idx < 0 || idx >= kMaxDerivedSize) return ctx.Error("ngram index {} is out of range", idx);
    out_dim = std::max(out_dim, idx + 1);
  }
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
  const int64_t cols = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  std::vector<int64_t> tokens(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (strings) {
      auto it = string_ids.find(x.data<std::string>()[i]);
      tokens[i] = it == string_ids.end() ? -1 : it->second;
    } else {
      tokens[i] = x.GetInt(i);
    }
  }
  Array out(ElemType::kFloat, x.rank() == 2 ? std::vector<int64_t>{rows, out_dim} : std::vector<int64_t>{out_dim});
  float* po = out.data<float>();
  std::vector<int64_t> freq(indexes.size());
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(freq.begin(), freq.end(), 0);
    const int64_t* row = tokens.data() + r * cols;
    // Longer n-grams than the pool's levels or the row, or skips past the row, match nothing.
    const int64_t top_gram = std::min({max_gram, static_cast<int64_t>(counts.size()), cols});
    for (int64_t n = min_gram; n <= top_gram; ++n) {
      for (int64_t skip = 0; skip <= (n == 1 ? 0 : std::min(max_skip, cols)); ++skip) {
        const int64_t stride = skip + 1;
        for (int64_t s = 0; s + (n - 1) * stride < cols; ++s) {
          gram.clear();
          for (int64_t j = 0; j < n; ++j) gram.push_back(row[s + j * stride]);
          auto it = ngram_slot.find(gram);
          if (it != ngram_slot.end()) ++freq[static_cast<size_t>(it->second)];
        }
      }
    }
    for (size_t k = 0; k < indexes.size(); ++k) {
      if (freq[k] == 0) continue;
      const double w = weights.empty() ? 1.0 : weights[k];
      const double v = mode == "TF"    ? static_cast<double>(freq[k])
                       : mode == "IDF" ? w
                                       : static_cast<double>(freq[k]) * w;
      po[r * out_dim + indexes[k]] = static_cast<float>(v);
    }
  }
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
