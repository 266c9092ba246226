// MoE dispatch / combine (comm/moe/) against a single-process reference:
// thread ranks, random routings and the edge cases (experts that receive
// nothing, every token to one expert, several choices on one rank, masked
// choices), every payload and input dtype; each payload's error bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tessera/base/float16.h"
#include "tessera/comm/api/comm_test_util.h"
#include "tessera/comm/moe/buffer.h"

namespace tessera::comm::moe {
namespace {

using testing::RunRanks;
using testing::TestOptions;

TEST(MoePayload, RoundTripErrorsWithinTheDocumentedBounds) {
  std::mt19937 rng(7);
  const int64_t hidden = 300;  // a partial last fp8 block
  for (Payload p : {Payload::kFloat32, Payload::kBFloat16, Payload::kFloat16, Payload::kFp8E4m3}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(hidden);
      const float mag = std::pow(10.0f, static_cast<float>(trial % 10) - 5);
      std::normal_distribution<float> nd(0, mag);
      for (auto& v : x) v = nd(rng);
      if (trial == 3) std::fill(x.begin(), x.begin() + 128, 0.0f);  // an all-zero block
      std::vector<uint8_t> enc(RowBytes(p, hidden));
      EncodeRow(p, x.data(), DataType::kFloat32, hidden, enc.data());
      std::vector<float> y(hidden);
      DecodeRow(p, enc.data(), hidden, DataType::kFloat32, y.data());
      for (int64_t b = 0; b * 128 < hidden; ++b) {
        float amax = 0;
        for (int64_t i = b * 128; i < std::min<int64_t>(hidden, (b + 1) * 128); ++i) amax = std::max(amax, std::fabs(x[i]));
        for (int64_t i = b * 128; i < std::min<int64_t>(hidden, (b + 1) * 128); ++i) {
          const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
          double bound = 0;
          if (p == Payload::kBFloat16) bound = std::ldexp(std::fabs(x[i]), -8);
          if (p == Payload::kFloat16) {
            if (std::fabs(x[i]) > 65504 || std::fabs(x[i]) < 6.2e-5) continue;  // outside fp16's normal range
            bound = std::ldexp(std::fabs(x[i]), -11);
          }
          if (p == Payload::kFp8E4m3) bound = std::ldexp(std::fabs(x[i]), -4) + std::ldexp(amax / 448.0, -10);
          ASSERT_LE(err, bound * (1 + 1e-6) + 1e-30) << PayloadName(p) << " x=" << x[i] << " y=" << y[i];
        }
      }
    }
  }
}

// Routing cases.
enum class Routing { kRandom, kAllToOneExpert, kSameRankTwice, kSomeExpertsIdle, kMasked };

struct Case {
  int ranks;
  int experts;
  int top_k;
  int64_t tokens;
  int64_t hidden;
  Routing routing;
  Payload payload;
  DataType dtype;
  bool direct = true;  // ranks map each other's shared memory: the zero-copy path; else pack / all-to-all-v / unpack
};

CommOptions Options(bool direct) {
  CommOptions o = TestOptions();
  if (!direct) {
    o.shm_single_copy = 0;
    o.shm_zero_copy = 0;
  }
  return o;
}

std::vector<int64_t> MakeRouting(const Case& c, int rank) {
  std::mt19937 rng(1000 + rank);
  std::vector<int64_t> idx(static_cast<size_t>(c.tokens) * c.top_k, -1);
  const int local = c.experts / c.ranks;
  for (int64_t t = 0; t < c.tokens; ++t) {
    std::vector<int64_t> pool(c.experts);
    for (int e = 0; e < c.experts; ++e) pool[e] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int j = 0; j < c.top_k; ++j) {
      int64_t e = pool[j];
      switch (c.routing) {
        case Routing::kRandom: break;
        case Routing::kAllToOneExpert: e = j == 0 ? 1 % c.experts : -1; break;
        case Routing::kSameRankTwice: e = (t % c.ranks) * local + (j % local); break;  // choices on one rank
        case Routing::kSomeExpertsIdle: e = pool[j] % std::max(1, c.experts / 2) * 2 % c.experts; break;
        case Routing::kMasked: e = (t + j) % 3 == 0 || t % 7 == 3 ? -1 : pool[j]; break;  // 3, 10, ...: nowhere
      }
      idx[t * c.top_k + j] = e;
    }
    // Duplicate choices of one expert are legal but not what routers emit;
    // keep them only in kSomeExpertsIdle (which can collide) as -1.
    for (int j = 0; j < c.top_k; ++j) {
      for (int i = 0; i < j; ++i) {
        if (idx[t * c.top_k + j] >= 0 && idx[t * c.top_k + j] == idx[t * c.top_k + i]) idx[t * c.top_k + j] = -1;
      }
    }
  }
  return idx;
}

std::vector<float> MakeWeights(const Case& c, int rank) {
  std::mt19937 rng(2000 + rank);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  std::vector<float> w(static_cast<size_t>(c.tokens) * c.top_k);
  for (auto& v : w) v = u(rng);
  return w;
}

std::vector<float> MakeTokens(const Case& c, int rank) {
  std::mt19937 rng(3000 + rank);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x(static_cast<size_t>(c.tokens * c.hidden));
  for (auto& v : x) v = nd(rng);
  if (c.dtype == DataType::kBFloat16) {
    for (auto& v : x) v = bf16(v).ToFloat();  // representable
  }
  return x;
}

// The value a row has after crossing in `payload` (encode + decode here).
std::vector<float> ThroughWire(const Case& c, const float* row) {
  std::vector<uint8_t> enc(RowBytes(c.payload, c.hidden));
  EncodeRow(c.payload, row, DataType::kFloat32, c.hidden, enc.data());
  std::vector<float> out(c.hidden);
  DecodeRow(c.payload, enc.data(), c.hidden, DataType::kFloat32, out.data());
  return out;
}

// Tokens after one trip through the dispatch payload (what the experts see).
std::vector<float> ThroughWireAll(const Case& c, const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (int64_t t = 0; t < c.tokens; ++t) {
    const auto row = ThroughWire(c, &x[t * c.hidden]);
    std::copy(row.begin(), row.end(), out.begin() + t * c.hidden);
  }
  return out;
}

std::vector<uint8_t> ToDtype(const std::vector<float>& v, DataType dtype) {
  std::vector<uint8_t> out(v.size() * (dtype == DataType::kBFloat16 ? 2 : 4));
  if (dtype == DataType::kBFloat16) {
    auto* o = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < v.size(); ++i) o[i] = bf16::FromFloat(v[i]);
  } else {
    if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  }
  return out;
}

std::vector<float> FromDtype(const std::vector<uint8_t>& b, DataType dtype) {
  const size_t n = b.size() / (dtype == DataType::kBFloat16 ? 2 : 4);
  std::vector<float> out(n);
  if (dtype == DataType::kBFloat16) {
    const auto* p = reinterpret_cast<const uint16_t*>(b.data());
    for (size_t i = 0; i < n; ++i) out[i] = bf16::FromBits(p[i]).ToFloat();
  } else {
    if (n > 0) std::memcpy(out.data(), b.data(), n * 4);
  }
  return out;
}

float ExpertScale(int64_t e) { return 1.0f + 0.125f * static_cast<float>(e); }

void RunCase(const Case& c) {
  RunRanks(c.ranks, Options(c.direct), [&](int rank, Communicator& comm) {
    if (!c.direct) {
      ASSERT_FALSE(comm.zero_copy());
    } else if (c.ranks > 1) {
      ASSERT_TRUE(comm.zero_copy());  // thread ranks share one address space
    }
    auto buf = MoeBuffer::Create(&comm, c.experts, c.hidden);
    ASSERT_TRUE(buf.ok()) << buf.status().ToString();
    const auto idx = MakeRouting(c, rank);
    const auto w = MakeWeights(c, rank);
    const auto x = MakeTokens(c, rank);
    auto h = (*buf)->Layout(idx, c.top_k, w);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const DispatchHandle& hd = **h;
    const int local = c.experts / c.ranks;
    const int first = rank * local;

    // Expected rows: expert j, then source, then token order.
    std::vector<std::vector<float>> want_rows;
    std::vector<float> want_w;
    std::vector<int64_t> want_counts(local, 0);
    for (int j = 0; j < local; ++j) {
      for (int s = 0; s < c.ranks; ++s) {
        const auto sidx = MakeRouting(c, s);
        const auto sw = MakeWeights(c, s);
        const auto sx = MakeTokens(c, s);
        for (int64_t t = 0; t < c.tokens; ++t) {
          for (int k = 0; k < c.top_k; ++k) {
            if (sidx[t * c.top_k + k] != first + j) continue;
            want_rows.push_back(ThroughWire(c, &sx[t * c.hidden]));
            want_w.push_back(sw[t * c.top_k + k]);
            ++want_counts[j];
          }
        }
      }
    }
    ASSERT_EQ(hd.num_recv_rows(), static_cast<int64_t>(want_rows.size()));
    for (int j = 0; j < local; ++j) EXPECT_EQ(hd.rows_of_expert(j), want_counts[j]) << "expert " << first + j;
    EXPECT_EQ(hd.row_weights, want_w);

    // Dispatch.
    const size_t esz = c.dtype == DataType::kBFloat16 ? 2 : 4;
    std::vector<uint8_t> recv(static_cast<size_t>(hd.num_recv_rows() * c.hidden) * esz);
    const auto xin = ToDtype(x, c.dtype);
    Status st = (*buf)->Dispatch(hd, xin.data(), c.dtype, c.payload, recv.data());
    ASSERT_TRUE(st.ok()) << st.ToString();
    const auto got = FromDtype(recv, c.dtype);
    for (size_t r = 0; r < want_rows.size(); ++r) {
      for (int64_t i = 0; i < c.hidden; ++i) {
        const float want = c.dtype == DataType::kBFloat16 ? bf16(want_rows[r][i]).ToFloat() : want_rows[r][i];
        ASSERT_EQ(got[r * c.hidden + i], want) << "row " << r << " element " << i;
      }
    }

    // Experts: row · scale(expert); combine with the dispatched weights.
    std::vector<float> y(got.size());
    for (int j = 0; j < local; ++j) {
      for (int64_t r = hd.expert_offsets[j]; r < hd.expert_offsets[j + 1]; ++r) {
        for (int64_t i = 0; i < c.hidden; ++i) y[r * c.hidden + i] = got[r * c.hidden + i] * ExpertScale(first + j);
      }
    }
    const Payload back = c.payload == Payload::kFp8E4m3 ? Payload::kBFloat16 : c.payload;
    // NaNs: every element must be written.
    std::vector<uint8_t> out(static_cast<size_t>(c.tokens * c.hidden) * esz, 0xff);
    const auto yin = ToDtype(y, c.dtype);
    st = (*buf)->Combine(hd, yin.data(), c.dtype, hd.row_weights.data(), back, out.data());
    ASSERT_TRUE(st.ok()) << st.ToString();
    const auto comb = FromDtype(out, c.dtype);
    const auto mine = ThroughWireAll(c, x);
    double tol = back == Payload::kFloat32 ? 1e-5 : 2e-2;
    if (c.dtype == DataType::kBFloat16) tol = 3e-2;
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t i = 0; i < c.hidden; ++i) {
        double want = 0;
        for (int k = 0; k < c.top_k; ++k) {
          const int64_t e = idx[t * c.top_k + k];
          if (e >= 0) want += static_cast<double>(w[t * c.top_k + k]) * ExpertScale(e) * mine[t * c.hidden + i];
        }
        ASSERT_NEAR(comb[t * c.hidden + i], want, tol * (1 + std::fabs(want))) << "token " << t << " element " << i;
      }
    }
    // The gated form (the weights given to Layout, or 1) gives the sums of
    // Combine with those weights, bitwise.
    for (const bool gates : {true, false}) {
      std::vector<uint8_t> want_out(out.size(), 0xff), got_out(out.size(), 0xff);
      st = (*buf)->Combine(hd, yin.data(), c.dtype, gates ? hd.row_weights.data() : nullptr, back, want_out.data());
      ASSERT_TRUE(st.ok()) << st.ToString();
      st = (*buf)->CombineGated(hd, yin.data(), c.dtype, gates, back, got_out.data());
      ASSERT_TRUE(st.ok()) << st.ToString();
      const auto a = FromDtype(want_out, c.dtype), b = FromDtype(got_out, c.dtype);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(b[i], a[i]) << "gates " << gates << " element " << i;
    }

    // The weights' adjoint: 2·weight back to each (token, choice).
    std::vector<float> per_row(hd.row_weights.size());
    for (size_t r = 0; r < per_row.size(); ++r) per_row[r] = 2 * hd.row_weights[r];
    std::vector<float> scal(static_cast<size_t>(c.tokens * c.top_k));
    st = (*buf)->ReturnScalars(hd, per_row.data(), scal.data());
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (size_t i = 0; i < scal.size(); ++i) EXPECT_EQ(scal[i], idx[i] >= 0 ? 2 * w[i] : 0.0f) << i;
  });
}

class MoeDispatchCombine : public ::testing::TestWithParam<Case> {};

TEST_P(MoeDispatchCombine, MatchesTheSingleProcessReference) { RunCase(GetParam()); }

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const char* routing[] = {"random", "all_to_one_expert", "same_rank_twice", "some_experts_idle", "masked"};
  return fmt::format("r{}_e{}_k{}_{}_{}_{}{}", c.ranks, c.experts, c.top_k, routing[static_cast<int>(c.routing)],
                     PayloadName(c.payload), c.dtype == DataType::kBFloat16 ? "bf16" : "fp32",
                     c.direct ? "" : "_exchange");
}

INSTANTIATE_TEST_SUITE_P(
    Routings, MoeDispatchCombine,
    ::testing::Values(Case{1, 4, 2, 16, 64, Routing::kRandom, Payload::kFloat32, DataType::kFloat32},
                      Case{2, 4, 2, 24, 64, Routing::kRandom, Payload::kFloat32, DataType::kFloat32},
                      Case{3, 6, 3, 17, 40, Routing::kRandom, Payload::kFloat32, DataType::kFloat32},
                      Case{4, 8, 2, 33, 72, Routing::kRandom, Payload::kFloat32, DataType::kFloat32},
                      Case{4, 8, 2, 20, 64, Routing::kAllToOneExpert, Payload::kFloat32, DataType::kFloat32},
                      Case{4, 8, 4, 20, 64, Routing::kSameRankTwice, Payload::kFloat32, DataType::kFloat32},
                      Case{4, 16, 2, 20, 64, Routing::kSomeExpertsIdle, Payload::kFloat32, DataType::kFloat32},
                      Case{4, 8, 3, 20, 64, Routing::kMasked, Payload::kFloat32, DataType::kFloat32},
                      Case{4, 8, 2, 20, 200, Routing::kRandom, Payload::kBFloat16, DataType::kFloat32},
                      Case{4, 8, 2, 20, 200, Routing::kRandom, Payload::kBFloat16, DataType::kBFloat16},
                      Case{4, 8, 2, 20, 300, Routing::kRandom, Payload::kFp8E4m3, DataType::kFloat32},
                      Case{4, 8, 4, 20, 300, Routing::kSameRankTwice, Payload::kFp8E4m3, DataType::kBFloat16},
                      Case{8, 8, 8, 9, 32, Routing::kRandom, Payload::kFloat32, DataType::kFloat32},
                      // The pack / all-to-all-v / unpack path (no direct peer reads).
                      Case{3, 6, 3, 17, 40, Routing::kRandom, Payload::kFloat32, DataType::kFloat32, false},
                      Case{4, 8, 4, 20, 64, Routing::kSameRankTwice, Payload::kFloat32, DataType::kFloat32, false},
                      Case{4, 8, 3, 20, 64, Routing::kMasked, Payload::kFloat32, DataType::kFloat32, false},
                      Case{4, 8, 2, 20, 200, Routing::kRandom, Payload::kBFloat16, DataType::kFloat32, false},
                      Case{4, 8, 4, 20, 300, Routing::kSameRankTwice, Payload::kFp8E4m3, DataType::kBFloat16, false}),
    CaseName);

TEST(MoeLayout, RejectsBadExpertIdsAndShardings) {
  auto l = GetDispatchLayout(std::vector<int64_t>{0, 9}, 1, 2, 8, 4);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("token 0 choice 1 names expert 9"), std::string::npos) << l.status().ToString();
  l = GetDispatchLayout(std::vector<int64_t>{0}, 1, 1, 6, 4);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("6 experts cannot be sharded over 4 ranks"), std::string::npos);
  auto p = ParsePayload("int4");
  EXPECT_FALSE(p.ok());
}

TEST(MoeLayout, CountsTokensOncePerRank) {
  // 2 tokens, top-3, 8 experts on 4 ranks (2 each): token 0 -> experts 0, 1 (rank 0 twice), 7 (rank 3).
  auto l = GetDispatchLayout(std::vector<int64_t>{0, 1, 7, 2, -1, 4}, 2, 3, 8, 4);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->tokens_per_rank, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(l->tokens_per_expert, (std::vector<int64_t>{1, 1, 1, 0, 1, 0, 0, 1}));
  EXPECT_EQ(l->token_in_rank, (std::vector<uint8_t>{1, 0, 0, 1, 0, 1, 1, 0}));
}

TEST(MoeBufferErrors, FloatPayloadNeedsFloatInputAndHandlesStayWithTheirGroup) {
  RunRanks(2, TestOptions(), [&](int, Communicator& comm) {
    auto buf = MoeBuffer::Create(&comm, 4, 8);
    ASSERT_TRUE(buf.ok());
    auto h = (*buf)->Layout(std::vector<int64_t>{0, 3}, 2);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    std::vector<uint16_t> x(8);
    std::vector<uint16_t> recv(8 * 2);
    Status st = (*buf)->Dispatch(**h, x.data(), DataType::kBFloat16, Payload::kFloat32, recv.data());
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("fp32 payload needs float32 input"), std::string::npos) << st.ToString();
    st = (*buf)->Dispatch(**h, x.data(), DataType::kInt32, Payload::kBFloat16, recv.data());
    EXPECT_FALSE(st.ok());
  });
  EXPECT_FALSE(MoeBuffer::Create(nullptr, 0, 8).ok());
  EXPECT_FALSE(MoeBuffer::Create(nullptr, 4, 0).ok());
  EXPECT_TRUE(MoeBuffer::Create(nullptr, 4, 8).ok());  // one rank
}

}  // namespace
}  // namespace tessera::comm::moe
