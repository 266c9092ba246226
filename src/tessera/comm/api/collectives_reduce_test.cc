// Reduction collectives (all_reduce, reduce, reduce_scatter) against a
// plain reference: every dtype x op, sizes 0, 1, primes and a few MiB,
// world sizes 1-8 as threads, every algorithm forced in turn, in place and
// out of place, over shm (and tcp for a subset).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"

namespace tessera::comm {
namespace {

using testing::InputValue;
using testing::Reference;
using testing::RunRanks;
using testing::TestOptions;

const size_t kSmallSizes[] = {0, 1, 7, 131, 1031};

// Returns the number of wrong elements (reporting the first few).
int CheckReduced(const void* out, size_t count, int n, DataType dt, ReduceOp op, size_t offset, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const double got = GetElement(out, dt, i);
    const double want = Reference(n, offset + i, dt, op);
    if (!testing::Close(got, want, dt, op)) {
      if (++bad <= 3) { ADD_FAILURE() << what << ": element " << i << " got " << got << " want " << want; }
    }
  }
  return bad;
}

void AllReduceCase(Communicator& c, int r, int n, DataType dt, ReduceOp op, size_t count, bool in_place,
                   const std::string& tag) {
  const size_t elem = DataTypeSize(dt);
  std::vector<uint8_t> send(count * elem + 8), recv(count * elem + 8, 0xcd);
  for (size_t i = 0; i < count; ++i) SetElement(send.data(), dt, i, InputValue(r, i, dt, op));
  void* out = in_place ? send.data() : recv.data();
  Status st = c.AllReduce(send.data(), out, count, dt, op);
  const std::string what = tag + " all_reduce " + std::string(DataTypeName(dt)) + " " +
                           std::string(ReduceOpName(op)) + " count " + std::to_string(count) + " n " +
                           std::to_string(n) + (in_place ? " in-place" : "") + " rank " + std::to_string(r);
  ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
  CheckReduced(out, count, n, dt, op, 0, what);
  if (!in_place) { EXPECT_EQ(recv[count * elem], 0xcd) << what << ": wrote past the end"; }
}

TEST(CollectivesReduce, AllReduceEveryDtypeOpSizeWorldAlgorithm) {
  const char* algos[] = {"shm_direct", "shm_two_phase", "ring", "halving_doubling", "binomial_tree"};
  for (const char* algo : algos) {
    for (int n = 1; n <= 8; ++n) {
      RunRanks(n, TestOptions(algo), [&](int r, Communicator& c) {
        int k = 0;
        for (DataType dt : kAllDataTypes) {
          for (ReduceOp op : kAllReduceOps) {
            for (size_t count : kSmallSizes) AllReduceCase(c, r, n, dt, op, count, (k++ % 3) == 1, algo);
          }
        }
      });
    }
  }
}

TEST(CollectivesReduce, AllReduceSeveralMiB) {
  const char* algos[] = {"shm_direct", "shm_two_phase", "ring", "halving_doubling", "binomial_tree"};
  for (const char* algo : algos) {
    for (int n : {2, 3, 8}) {
      // The shm algorithms run these sizes direct (single copy) by default;
      // direct_reduce_bytes = 0 keeps them in the windows (many chunks).
      for (int64_t direct : {int64_t{-1}, int64_t{0}}) {
        CommOptions o = TestOptions(algo);
        o.shm_direct_reduce_bytes = direct;
        const std::string tag = std::string(algo) + (direct == 0 ? " windows" : "");
        RunRanks(n, o, [&](int r, Communicator& c) {
          AllReduceCase(c, r, n, DataType::kFloat32, ReduceOp::kSum, (1 << 20) + 3, false, tag);
          AllReduceCase(c, r, n, DataType::kBFloat16, ReduceOp::kMax, (3 << 19) + 1, true, tag);
        });
      }
    }
  }
}

// Reduce of several MiB (direct: single copy, or the windows): every root,
// in place and out of place; only the root's output is written.
TEST(CollectivesReduce, ReduceSeveralMiBEveryRoot) {
  for (int n : {2, 3, 4}) {
    for (int64_t direct : {int64_t{-1}, int64_t{0}}) {
      CommOptions o = TestOptions("shm_two_phase");
      o.shm_direct_reduce_bytes = direct;
      RunRanks(n, o, [&](int r, Communicator& c) {
        const size_t count = (1 << 19) + 77;
        for (int root = 0; root < n; ++root) {
          const bool in_place = root % 2 == 1;
          std::vector<float> send(count), recv(count, -7.0f);
          for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(r + 1) * static_cast<float>(i % 13);
          float* out = in_place ? send.data() : recv.data();
          Status st = c.Reduce(send.data(), out, count, DataType::kFloat32, ReduceOp::kSum, root);
          ASSERT_TRUE(st.ok()) << st.ToString();
          size_t bad = 0, first_bad = 0;  // no early return: the other ranks go on to the next root
          for (size_t i = 0; i < count; ++i) {
            const float want = r == root ? static_cast<float>(n * (n + 1) / 2) * static_cast<float>(i % 13)
                                         : (in_place ? static_cast<float>(r + 1) * static_cast<float>(i % 13) : -7.0f);
            if (out[i] != want && bad++ == 0) first_bad = i;
          }
          EXPECT_EQ(bad, 0u) << "n " << n << " root " << root << " rank " << r << " first at " << first_bad
                             << (direct == 0 ? " windows" : " direct") << (in_place ? " in place" : "");
        }
      });
    }
  }
}

TEST(CollectivesReduce, ReduceEveryRootAndAlgorithm) {
  const char* algos[] = {"shm_direct", "shm_two_phase", "binomial_tree"};
  const DataType dtypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16, DataType::kInt8,
                             DataType::kUint8, DataType::kInt64};
  for (const char* algo : algos) {
    for (int n : {1, 2, 3, 5, 8}) {
      RunRanks(n, TestOptions(algo), [&](int r, Communicator& c) {
        int k = 0;
        for (DataType dt : dtypes) {
          for (ReduceOp op : kAllReduceOps) {
            for (size_t count : {size_t{0}, size_t{1}, size_t{131}, size_t{4099}}) {
              const int root = k++ % n;
              const size_t elem = DataTypeSize(dt);
              std::vector<uint8_t> send(count * elem + 8), recv(count * elem + 8);
              for (size_t i = 0; i < count; ++i) SetElement(send.data(), dt, i, InputValue(r, i, dt, op));
              const bool in_place = k % 2 == 0;
              void* out = in_place ? send.data() : recv.data();
              Status st = c.Reduce(send.data(), out, count, dt, op, root);
              ASSERT_TRUE(st.ok()) << st.ToString();
              if (r == root) {
                CheckReduced(out, count, n, dt, op, 0,
                             std::string(algo) + " reduce " + std::string(DataTypeName(dt)) + " " +
                                 std::string(ReduceOpName(op)) + " n " + std::to_string(n) + " count " +
                                 std::to_string(count));
              }
            }
          }
        }
      });
    }
  }
}

TEST(CollectivesReduce, ReduceScatterEveryDtypeOp) {
  const char* algos[] = {"shm_direct", "ring"};
  for (const char* algo : algos) {
    for (int n = 1; n <= 8; ++n) {
      RunRanks(n, TestOptions(algo), [&](int r, Communicator& c) {
        int k = 0;
        for (DataType dt : kAllDataTypes) {
          for (ReduceOp op : kAllReduceOps) {
            for (size_t count : {size_t{0}, size_t{1}, size_t{131}, size_t{1031}}) {
              const size_t elem = DataTypeSize(dt);
              std::vector<uint8_t> send(n * count * elem + 8), recv(count * elem + 8);
              for (size_t i = 0; i < n * count; ++i) SetElement(send.data(), dt, i, InputValue(r, i, dt, op));
              const bool in_place = k++ % 2 == 1;
              void* out = in_place ? send.data() + r * count * elem : recv.data();
              Status st = c.ReduceScatter(send.data(), out, count, dt, op);
              ASSERT_TRUE(st.ok()) << st.ToString();
              CheckReduced(out, count, n, dt, op, r * count,
                           std::string(algo) + " reduce_scatter " + std::string(DataTypeName(dt)) + " " +
                               std::string(ReduceOpName(op)) + " n " + std::to_string(n) + " count " +
                               std::to_string(count) + (in_place ? " in-place" : ""));
            }
          }
        }
        // A few MiB.
        const size_t count = (1 << 19) + 5;
        std::vector<float> send(n * count), recv(count);
        for (size_t i = 0; i < n * count; ++i) send[i] = static_cast<float>(InputValue(r, i, DataType::kFloat32, ReduceOp::kSum));
        ASSERT_TRUE(c.ReduceScatter(send.data(), recv.data(), count, DataType::kFloat32, ReduceOp::kSum).ok());
        CheckReduced(recv.data(), count, n, DataType::kFloat32, ReduceOp::kSum, r * count,
                     std::string(algo) + " reduce_scatter large");
      });
    }
  }
}

TEST(CollectivesReduce, OverTcp) {
  const char* algos[] = {"ring", "halving_doubling", "binomial_tree"};
  const DataType dtypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kInt8, DataType::kInt64};
  for (const char* algo : algos) {
    for (int n : {2, 3, 5}) {
      CommOptions o = TestOptions(algo);
      o.transport = transport::TransportKind::kTcp;
      o.tcp_checksum = n == 3;
      RunRanks(n, o, [&](int r, Communicator& c) {
        ASSERT_EQ(c.transport_kind(), transport::TransportKind::kTcp);
        int k = 0;
        for (DataType dt : dtypes) {
          for (ReduceOp op : kAllReduceOps) {
            for (size_t count : kSmallSizes) AllReduceCase(c, r, n, dt, op, count, (k++ % 2) == 1, algo);
          }
        }
        AllReduceCase(c, r, n, DataType::kFloat32, ReduceOp::kSum, (1 << 20) + 3, false, algo);
        // reduce_scatter over tcp (ring).
        const size_t count = 1031;
        std::vector<int32_t> send(n * count), recv(count);
        for (size_t i = 0; i < n * count; ++i) send[i] = static_cast<int32_t>(InputValue(r, i, DataType::kInt32, ReduceOp::kMax));
        ASSERT_TRUE(c.ReduceScatter(send.data(), recv.data(), count, DataType::kInt32, ReduceOp::kMax).ok());
        CheckReduced(recv.data(), count, n, DataType::kInt32, ReduceOp::kMax, r * count, "tcp reduce_scatter");
      });
    }
  }
}

}  // namespace
}  // namespace tessera::comm
