// Gpt::Forward against an independent scalar implementation written from
// the architecture description (plain loops in double, no ops/ kernels),
// for a dense and an MoE configuration.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <gtest/gtest.h>

#include "tessera/graph/tape.h"
#include "tessera/models/gpt.h"

namespace tessera::models {
namespace {

using Mat = std::vector<double>;  // row-major [rows, cols]

class NaiveGpt {
 public:
  NaiveGpt(const GptConfig& c, const Gpt& model) : c_(c) {
    for (const auto& [name, t] : model.StateDict()) {
      std::vector<float> v = t.ToFloatVector();
      p_[name] = Mat(v.begin(), v.end());
    }
  }

  // ids [B, T] -> logits [B, T, V].
  Mat Forward(const std::vector<int64_t>& ids, int64_t b, int64_t t) const {
    const int64_t d = c_.d_model, n = b * t;
    Mat x(n * d);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t k = 0; k < d; ++k) {
        x[r * d + k] = p_.at("tok_emb.weight")[ids[r] * d + k];
        if (!c_.rope) x[r * d + k] += p_.at("pos_emb.weight")[(r % t) * d + k];
      }
    }
    for (int l = 0; l < c_.n_layers; ++l) {
      const std::string pre = "blocks." + std::to_string(l) + ".";
      Mat a = Attention(Norm(x, n, pre + "norm1"), b, t, pre + "attn.");
      for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
      Mat h = Norm(x, n, pre + "norm2");
      Mat f = c_.IsMoeLayer(l) ? Moe(h, n, pre + "moe.") : Mlp(h, n, pre + "ffn.");
      for (size_t i = 0; i < x.size(); ++i) x[i] += f[i];
    }
    x = Norm(x, n, "norm_f");
    return Linear(x, n, c_.tie_embeddings ? "tok_emb" : "lm_head");
  }

 private:
  // y = x Wᵀ (+ b) with W [out, in] stored under "<name>.weight".
  Mat Linear(const Mat& x, int64_t n, const std::string& name) const {
    const Mat& w = p_.at(name + ".weight");
    const int64_t in = static_cast<int64_t>(x.size()) / n, out = static_cast<int64_t>(w.size()) / in;
    auto bias = p_.find(name + ".bias");
    Mat y(n * out);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double s = bias != p_.end() ? bias->second[o] : 0.0;
        for (int64_t k = 0; k < in; ++k) s += x[r * in + k] * w[o * in + k];
        y[r * out + o] = s;
      }
    }
    return y;
  }

  Mat Norm(const Mat& x, int64_t n, const std::string& name) const {
    const int64_t d = c_.d_model;
    const Mat& w = p_.at(name + ".weight");
    Mat y(x.size());
    for (int64_t r = 0; r < n; ++r) {
      const double* row = &x[r * d];
      double mean = 0, sq = 0;
      if (c_.norm == NormKind::kLayerNorm) mean = std::accumulate(row, row + d, 0.0) / d;
      for (int64_t k = 0; k < d; ++k) sq += (row[k] - mean) * (row[k] - mean);
      const double rstd = 1.0 / std::sqrt(sq / d + c_.norm_eps);
      for (int64_t k = 0; k < d; ++k) {
        y[r * d + k] = (row[k] - mean) * rstd * w[k] + (c_.norm == NormKind::kLayerNorm ? p_.at(name + ".bias")[k] : 0);
      }
    }
    return y;
  }

  void Rope(Mat& x, int64_t b, int64_t t) const {  // x [B, T, H, Dh]
    const int64_t h = c_.n_heads, dh = c_.head_dim(), half = dh / 2;
    for (int64_t r = 0; r < b * t; ++r) {
      const int64_t pos = r % t;
      for (int64_t head = 0; head < h; ++head) {
        double* v = &x[(r * h + head) * dh];
        for (int64_t i = 0; i < half; ++i) {
          const double angle = pos * std::pow(static_cast<double>(c_.rope_base), -2.0 * i / dh);
          const double x0 = v[i], x1 = v[i + half];
          v[i] = x0 * std::cos(angle) - x1 * std::sin(angle);
          v[i + half] = x0 * std::sin(angle) + x1 * std::cos(angle);
        }
      }
    }
  }

  Mat Attention(const Mat& x, int64_t b, int64_t t, const std::string& pre) const {
    const int64_t n = b * t, d = c_.d_model, h = c_.n_heads, dh = c_.head_dim();
    Mat q = Linear(x, n, pre + "wq"), k = Linear(x, n, pre + "wk"), v = Linear(x, n, pre + "wv");
    if (c_.rope) {
      Rope(q, b, t);
      Rope(k, b, t);
    }
    Mat o(n * d, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t head = 0; head < h; ++head) {
        for (int64_t i = 0; i < t; ++i) {
          std::vector<double> s(i + 1);
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < dh; ++e) dot += q[((bi * t + i) * h + head) * dh + e] * k[((bi * t + j) * h + head) * dh + e];
            s[j] = dot * scale;
          }
          const double m = *std::max_element(s.begin(), s.end());
          double z = 0;
          for (double& w : s) z += (w = std::exp(w - m));
          for (int64_t j = 0; j <= i; ++j) {
            for (int64_t e = 0; e < dh; ++e) {
              o[((bi * t + i) * h + head) * dh + e] += s[j] / z * v[((bi * t + j) * h + head) * dh + e];
            }
          }
        }
      }
    }
    return Linear(o, n, pre + "wo");
  }

  Mat Mlp(const Mat& x, int64_t n, const std::string& pre) const {
    Mat up = Linear(x, n, pre + "w_up");
    if (c_.activation == ActivationKind::kSwiGlu) {
      Mat gate = Linear(x, n, pre + "w_gate");
      for (size_t i = 0; i < up.size(); ++i) up[i] *= gate[i] / (1.0 + std::exp(-gate[i]));
    } else {
      for (double& u : up) u = 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
    }
    return Linear(up, n, pre + "w_down");
  }

  Mat Moe(const Mat& x, int64_t n, const std::string& pre) const {
    const int64_t d = c_.d_model, e_count = c_.moe.num_experts, k = c_.moe.top_k;
    Mat logits = Linear(x, n, pre + "router");
    Mat y(n * d, 0.0);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> prob(logits.begin() + r * e_count, logits.begin() + (r + 1) * e_count);
      const double m = *std::max_element(prob.begin(), prob.end());
      double z = 0;
      for (double& p : prob) z += (p = std::exp(p - m));
      for (double& p : prob) p /= z;
      std::vector<int64_t> order(e_count);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b2) { return prob[a] > prob[b2]; });
      double total = 0;
      for (int64_t j = 0; j < k; ++j) total += prob[order[j]];
      Mat row(x.begin() + r * d, x.begin() + (r + 1) * d);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = order[j];
        const double gate = c_.moe.normalize_top_k ? prob[e] / total : prob[e];
        Mat out = Mlp(row, 1, pre + "experts." + std::to_string(e) + ".");
        for (int64_t c = 0; c < d; ++c) y[r * d + c] += gate * out[c];
      }
    }
    return y;
  }

  GptConfig c_;
  std::map<std::string, Mat> p_;
};

void ExpectMatchesNaive(const GptConfig& c) {
  Gpt model(c);
  const int64_t b = 2, t = 5;
  std::vector<int64_t> ids(b * t);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + 3) % c.vocab_size);
  std::vector<float> got;
  {
    graph::NoGradGuard no_grad;
    got = model.Forward(Tensor::FromInts(ids, {b, t})).logits.ToFloatVector();
  }
  Mat want = NaiveGpt(c, model).Forward(ids, b, t);
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  ASSERT_GT(scale, 0.05);  // logits are not trivially small
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5 + 1e-4 * scale) << "logit " << i;
}

GptConfig Small() {
  GptConfig c;
  c.vocab_size = 11;
  c.seq_len = 8;
  c.n_layers = 2;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 12;
  c.init_std = 0.3f;
  return c;
}

TEST(GptReferenceTest, DenseLayerNormGeluLearnedPositionsUntiedWithBias) {
  GptConfig c = Small();
  c.bias = true;
  c.tie_embeddings = false;
  ExpectMatchesNaive(c);
}

TEST(GptReferenceTest, MoeRmsNormSwiGluRopeTied) {
  GptConfig c = Small();
  c.norm = NormKind::kRmsNorm;
  c.activation = ActivationKind::kSwiGlu;
  c.rope = true;
  c.moe.num_experts = 3;
  c.moe.top_k = 2;
  c.moe.layers = {1};
  c.moe.d_ff_expert = 6;
  ExpectMatchesNaive(c);
  c.moe.top_k = 1;
  c.moe.normalize_top_k = false;
  c.moe.layers = {0, 1};
  ExpectMatchesNaive(c);
}

}  // namespace
}  // namespace tessera::models
