// MoE dispatch / combine with ranks as separate processes under `tessera
// launch`: the zero-copy same-host path (comm/moe/shm_path.h), where each
// rank reads its peers' shared stagings through its own mappings of their
// memfds, checked element by element against values every rank can compute
// itself — normal mode (exact fp32 and an fp8 payload; random routing and
// all tokens to rank 0's experts, so the others receive nothing) and the low-latency
// mode; with 4 ranks, large outputs go through the streaming-store copies.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/moe/buffer.h"
#include "tessera/comm/moe/low_latency.h"

namespace tessera {
namespace {

using comm::DataType;
using comm::moe::Payload;

constexpr int kExperts = 8;
constexpr int kTopK = 3;
constexpr int64_t kTokens = 40;
constexpr int64_t kHidden = 1024;  // 4 KiB fp32 rows: many pages per staging

// Skewed: every choice goes to rank 0's first two experts, so the other
// ranks receive nothing (and send nothing back).
bool g_skewed = false;

std::vector<int64_t> Routing(int rank) {
  std::mt19937 rng(700 + rank);
  std::vector<int64_t> idx(kTokens * kTopK);
  for (int64_t t = 0; t < kTokens; ++t) {
    std::vector<int64_t> pool(kExperts);
    for (int e = 0; e < kExperts; ++e) pool[e] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int j = 0; j < kTopK; ++j) {
      idx[t * kTopK + j] = t % 9 == 4 ? -1 : g_skewed ? (t + j) % 2 : pool[j];  // token 4, 13, ...: nowhere
    }
  }
  return idx;
}
float Weight(int rank, int64_t t, int j) { return 0.25f + 0.125f * static_cast<float>((rank + t + j) % 5); }
float Token(int rank, int64_t t, int64_t c) {
  return static_cast<float>(rank * 64 + t) + 0.5f * static_cast<float>(c % 13);
}
float Scale(int64_t expert) { return 1.0f + 0.5f * static_cast<float>(expert); }

// What a row looks like after the wire (fp8 payloads are lossy).
std::vector<float> Wire(Payload p, int rank, int64_t t) {
  std::vector<float> x(kHidden), y(kHidden);
  for (int64_t c = 0; c < kHidden; ++c) x[c] = Token(rank, t, c);
  std::vector<uint8_t> enc(comm::moe::RowBytes(p, kHidden));
  comm::moe::EncodeRow(p, x.data(), DataType::kFloat32, kHidden, enc.data());
  comm::moe::DecodeRow(p, enc.data(), kHidden, DataType::kFloat32, y.data());
  return y;
}

// Expected rows of this rank's local expert j: by source, then token order.
std::vector<std::vector<float>> ExpectedRows(int n, int me, int j, Payload p) {
  const int local = kExperts / n;
  std::vector<std::vector<float>> rows;
  for (int s = 0; s < n; ++s) {
    const auto idx = Routing(s);
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int k = 0; k < kTopK; ++k) {
        if (idx[t * kTopK + k] == me * local + j) rows.push_back(Wire(p, s, t));
      }
    }
  }
  return rows;
}

Status CheckCombined(const std::vector<float>& out, int me, Payload p, const char* what) {
  const auto idx = Routing(me);
  for (int64_t t = 0; t < kTokens; ++t) {
    const auto x = Wire(p, me, t);
    for (int64_t c = 0; c < kHidden; c += 7) {
      double want = 0;
      for (int k = 0; k < kTopK; ++k) {
        if (idx[t * kTopK + k] >= 0) want += Weight(me, t, k) * Scale(idx[t * kTopK + k]) * x[c];
      }
      const double tol = p == Payload::kFloat32 ? 1e-5 : 1e-2;
      if (!(std::fabs(out[t * kHidden + c] - want) <= tol * (1 + std::fabs(want)))) {
        return Internal("{}: token {} element {} is {}, want {}", what, t, c, out[t * kHidden + c], want);
      }
    }
  }
  return Status::Ok();
}

Status RunNormal(comm::Communicator& c, Payload p) {
  const int n = c.size(), me = c.rank(), local = kExperts / n;
  TESSERA_ASSIGN_OR_RETURN(auto buf, comm::moe::MoeBuffer::Create(&c, kExperts, kHidden));
  const auto idx = Routing(me);
  std::vector<float> w(idx.size()), x(kTokens * kHidden);
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int k = 0; k < kTopK; ++k) w[t * kTopK + k] = Weight(me, t, k);
    for (int64_t cc = 0; cc < kHidden; ++cc) x[t * kHidden + cc] = Token(me, t, cc);
  }
  for (int round = 0; round < 3; ++round) {  // the stagings are reused across calls
    TESSERA_ASSIGN_OR_RETURN(auto h, buf->Layout(idx, kTopK, w));
    std::vector<float> rows(h->num_recv_rows() * kHidden, std::nanf(""));
    TESSERA_RETURN_IF_ERROR(buf->Dispatch(*h, x.data(), DataType::kFloat32, p, rows.data()));
    for (int j = 0; j < local; ++j) {
      const auto want = ExpectedRows(n, me, j, p);
      if (static_cast<int64_t>(want.size()) != h->rows_of_expert(j)) {
        return Internal("expert {}: {} rows, want {}", me * local + j, h->rows_of_expert(j), want.size());
      }
      for (size_t r = 0; r < want.size(); ++r) {
        for (int64_t cc = 0; cc < kHidden; ++cc) {
          if (rows[(h->expert_offsets[j] + r) * kHidden + cc] != want[r][cc]) {
            return Internal("dispatch ({}): expert {} row {} element {} wrong", comm::moe::PayloadName(p), j, r, cc);
          }
        }
      }
    }
    for (int j = 0; j < local; ++j) {
      for (int64_t r = h->expert_offsets[j]; r < h->expert_offsets[j + 1]; ++r) {
        for (int64_t cc = 0; cc < kHidden; ++cc) rows[r * kHidden + cc] *= Scale(me * local + j);
      }
    }
    std::vector<float> out(x.size(), std::nanf(""));
    const Payload back = p == Payload::kFp8E4m3 ? Payload::kBFloat16 : p;
    TESSERA_RETURN_IF_ERROR(buf->CombineGated(*h, rows.data(), DataType::kFloat32, /*gates=*/true, back, out.data()));
    TESSERA_RETURN_IF_ERROR(CheckCombined(out, me, p, "combine"));
    // The weights' adjoint: 2 · weight back to each (token, choice).
    std::vector<float> per_row(h->row_weights.size()), back_w(idx.size(), -1.0f);
    for (size_t r = 0; r < per_row.size(); ++r) per_row[r] = 2 * h->row_weights[r];
    TESSERA_RETURN_IF_ERROR(buf->ReturnScalars(*h, per_row.data(), back_w.data()));
    for (size_t i = 0; i < idx.size(); ++i) {
      if (back_w[i] != (idx[i] >= 0 ? 2 * w[i] : 0.0f)) return Internal("return scalars: choice {} wrong", i);
    }
  }
  return Status::Ok();
}

Status RunLowLatency(comm::Communicator& c) {
  const int n = c.size(), me = c.rank(), local = kExperts / n;
  TESSERA_ASSIGN_OR_RETURN(
      auto ll, comm::moe::LowLatencyBuffer::Create(&c, kExperts, kHidden, kTokens, kTopK, Payload::kFloat32));
  const auto idx = Routing(me);
  std::vector<float> w(idx.size()), x(kTokens * kHidden);
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int k = 0; k < kTopK; ++k) w[t * kTopK + k] = Weight(me, t, k);
    for (int64_t cc = 0; cc < kHidden; ++cc) x[t * kHidden + cc] = Token(me, t, cc);
  }
  for (int round = 0; round < 3; ++round) {
    std::vector<float> packed(ll->recv_bytes(DataType::kFloat32) / 4, std::nanf(""));
    TESSERA_ASSIGN_OR_RETURN(auto hook, ll->Dispatch(x.data(), DataType::kFloat32, idx, w, packed.data()));
    TESSERA_RETURN_IF_ERROR(hook.Wait());
    for (int j = 0; j < local; ++j) {
      const auto want = ExpectedRows(n, me, j, Payload::kFloat32);
      if (ll->count(j) != static_cast<int64_t>(want.size())) return Internal("low-latency expert {}: rows", j);
      for (size_t r = 0; r < want.size(); ++r) {
        float* row = &packed[(j * ll->slab_rows() + r) * kHidden];
        for (int64_t cc = 0; cc < kHidden; ++cc) {
          if (row[cc] != want[r][cc]) return Internal("low-latency dispatch: expert {} row {} wrong", j, r);
          row[cc] *= Scale(me * local + j);
        }
      }
    }
    std::vector<float> out(x.size(), std::nanf(""));
    TESSERA_ASSIGN_OR_RETURN(auto chook, ll->Combine(packed.data(), DataType::kFloat32, out.data()));
    TESSERA_RETURN_IF_ERROR(chook.Wait());
    TESSERA_RETURN_IF_ERROR(CheckCombined(out, me, Payload::kFloat32, "low-latency combine"));
  }
  return Status::Ok();
}

TEST(MoeChild, Rank) {
  if (std::getenv("TESSERA_MOE_CHILD") == nullptr) GTEST_SKIP() << "runs only as a rank process of MoeProcess";
  auto comm = comm::Communicator::FromEnvironment();
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  comm::Communicator& c = **comm;
  ASSERT_TRUE(c.zero_copy()) << "zero copy unavailable between these processes";
  for (bool skewed : {false, true}) {
    g_skewed = skewed;
    for (Payload p : {Payload::kFloat32, Payload::kFp8E4m3}) {
      Status st = RunNormal(c, p);
      ASSERT_TRUE(st.ok()) << "rank " << c.rank() << (skewed ? " (skewed routing)" : "") << ": " << st.ToString();
    }
  }
  g_skewed = false;
  Status st = RunLowLatency(c);
  ASSERT_TRUE(st.ok()) << "rank " << c.rank() << ": " << st.ToString();
  std::printf("MOE-CHILD-OK rank %d of %d\n", c.rank(), c.size());
  std::fflush(stdout);
}

std::string Self() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST(MoeProcess, ZeroCopyDispatchAndCombineBetweenProcesses) {
  for (int n : {2, 4}) {
    // 4 ranks: outputs past 64 KiB are written with streaming stores.
    std::map<std::string, std::string> env = {{"TESSERA_MOE_CHILD", "1"}};
    if (n == 4) env["TESSERA_STREAM_KB"] = "64";
    testing::ProcResult r = testing::RunCommand(
        {TESSERA_BIN, "launch", "--nproc", std::to_string(n), "--", Self(), "--gtest_filter=MoeChild.Rank"},
        std::chrono::milliseconds(120000), env);
    ASSERT_EQ(r.exit_code, 0) << r.out << "\n" << r.err;
    for (int k = 0; k < n; ++k) {
      EXPECT_NE(r.out.find("MOE-CHILD-OK rank " + std::to_string(k) + " of " + std::to_string(n)), std::string::npos)
          << r.out << "\n"
          << r.err;
    }
  }
}

}  // namespace
}  // namespace tessera
