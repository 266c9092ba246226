// Low-latency dispatch / combine against the normal mode on the same
// routing: the same rows per expert (in the same order) and the same
// combined output; the hook contract; the max_tokens bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/comm/moe/buffer.h"
#include "tessera/comm/moe/low_latency.h"

namespace tessera::comm::moe {
namespace {

using testing::RunRanks;
using testing::TestOptions;

void CompareWithNormalMode(int ranks, int experts, int top_k, int64_t tokens, int64_t hidden, Payload payload,
                           bool direct = true) {
  CommOptions options = TestOptions();
  if (!direct) {  // whole-block all-to-all instead of reading the peers' blocks in place
    options.shm_single_copy = 0;
    options.shm_zero_copy = 0;
  }
  RunRanks(ranks, options, [&](int rank, Communicator& comm) {
    if (ranks > 1) {
      ASSERT_EQ(comm.zero_copy(), direct);
    }
    std::mt19937 rng(50 + rank);
    std::vector<int64_t> idx(static_cast<size_t>(tokens) * top_k);
    std::vector<float> w(idx.size()), x(static_cast<size_t>(tokens * hidden));
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<int64_t> pool(experts);
      for (int e = 0; e < experts; ++e) pool[e] = e;
      std::shuffle(pool.begin(), pool.end(), rng);
      // Token 5, 11, ...: routed nowhere.
      for (int j = 0; j < top_k; ++j) idx[t * top_k + j] = (t + j) % 5 == 4 || t % 6 == 5 ? -1 : pool[j];
    }
    std::uniform_real_distribution<float> u(0.1f, 1.0f);
    std::normal_distribution<float> nd(0, 1);
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = nd(rng);

    auto normal = MoeBuffer::Create(&comm, experts, hidden);
    ASSERT_TRUE(normal.ok());
    auto h = (*normal)->Layout(idx, top_k, w);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    std::vector<float> rows(static_cast<size_t>((*h)->num_recv_rows() * hidden));
    ASSERT_TRUE((*normal)->Dispatch(**h, x.data(), DataType::kFloat32, payload, rows.data()).ok());

    auto ll = LowLatencyBuffer::Create(&comm, experts, hidden, /*max_tokens=*/tokens + 3, top_k, payload);
    ASSERT_TRUE(ll.ok()) << ll.status().ToString();
    std::vector<float> packed((*ll)->recv_bytes(DataType::kFloat32) / 4, -1.0f);
    auto hook = (*ll)->Dispatch(x.data(), DataType::kFloat32, idx, w, packed.data());
    ASSERT_TRUE(hook.ok()) << hook.status().ToString();
    Status st = hook->Wait();  // (the caller could compute before this)
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_FALSE(hook->Wait().ok());  // once only

    const int local = experts / ranks;
    std::vector<float> y(packed.size(), 0.0f), y_normal(rows.size());
    for (int j = 0; j < local; ++j) {
      ASSERT_EQ((*ll)->count(j), (*h)->rows_of_expert(j)) << "expert " << rank * local + j;
      for (int64_t r = 0; r < (*ll)->count(j); ++r) {
        for (int64_t c = 0; c < hidden; ++c) {
          const float got = packed[(j * (*ll)->slab_rows() + r) * hidden + c];
          const int64_t nrow = (*h)->expert_offsets[j] + r;
          ASSERT_EQ(got, rows[nrow * hidden + c]) << "expert " << j << " row " << r;
          y[(j * (*ll)->slab_rows() + r) * hidden + c] = got * (1.0f + static_cast<float>(j));
          y_normal[nrow * hidden + c] = rows[nrow * hidden + c] * (1.0f + static_cast<float>(j));
        }
      }
    }
    std::vector<float> out_ll(x.size(), std::nanf("")), out_normal(x.size(), std::nanf(""));  // all must be written
    auto chook = (*ll)->Combine(y.data(), DataType::kFloat32, out_ll.data());
    ASSERT_TRUE(chook.ok()) << chook.status().ToString();
    ASSERT_TRUE(chook->Wait().ok());
    const Payload back = payload == Payload::kFp8E4m3 ? Payload::kBFloat16 : payload;
    ASSERT_TRUE((*normal)->Combine(**h, y_normal.data(), DataType::kFloat32, (*h)->row_weights.data(), back,
                                   out_normal.data())
                    .ok());
    for (size_t i = 0; i < out_ll.size(); ++i) {
      ASSERT_EQ(out_ll[i], out_normal[i]) << "token " << i / hidden << " element " << i % hidden;
    }

    // More tokens than the buffer holds: refused before anything is sent.
    std::vector<int64_t> too_many(static_cast<size_t>(tokens + 4) * top_k, 0);
    std::vector<float> big(static_cast<size_t>((tokens + 4) * hidden));
    auto refused = (*ll)->Dispatch(big.data(), DataType::kFloat32, too_many, {}, packed.data());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("exceed the buffer's max_tokens"), std::string::npos);

    // One exchange in flight: a second one before Wait is refused (nothing
    // sent), and a buffer destroyed with its hook unwaited waits for the
    // exchange instead of freeing memory the progress thread writes.
    auto first = (*ll)->Dispatch(x.data(), DataType::kFloat32, idx, w, packed.data());
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto second = (*ll)->Dispatch(x.data(), DataType::kFloat32, idx, w, packed.data());
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("not waited on"), std::string::npos) << second.status().ToString();
    ll->reset();  // (first's hook dropped unwaited below)
  });
}

TEST(MoeLowLatency, MatchesNormalModeFp32) { CompareWithNormalMode(4, 8, 2, 12, 64, Payload::kFloat32); }
TEST(MoeLowLatency, MatchesNormalModeFp8) { CompareWithNormalMode(4, 8, 3, 9, 256, Payload::kFp8E4m3); }
TEST(MoeLowLatency, MatchesNormalModeEightRanksTopEight) { CompareWithNormalMode(8, 16, 8, 5, 32, Payload::kBFloat16); }
TEST(MoeLowLatency, MatchesNormalModeWithoutDirectReads) {
  CompareWithNormalMode(4, 8, 3, 9, 256, Payload::kFp8E4m3, /*direct=*/false);
}
TEST(MoeLowLatency, OneRank) { CompareWithNormalMode(1, 4, 2, 6, 16, Payload::kFloat32); }

}  // namespace
}  // namespace tessera::comm::moe
