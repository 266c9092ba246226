// Data-movement collectives (broadcast, all_gather, all_to_all(v), gather,
// scatter, barrier) against the expected placement of every rank's data:
// world sizes 1-8 as threads, every algorithm, several dtypes, sizes 0, 1,
// primes and ~1 MiB, in place and out of place, over shm and tcp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"

namespace tessera::comm {
namespace {

using testing::RunRanks;
using testing::TestOptions;

// Identifies (rank, index); exact in every dtype (0..96).
double Value(int rank, size_t i) { return static_cast<double>((rank * 31 + i * 7) % 97); }

const DataType kDtypes[] = {DataType::kUint8, DataType::kBFloat16, DataType::kFloat64};
const size_t kSizes[] = {0, 1, 7, 1031, (1 << 18) + 3};

std::vector<uint8_t> Filled(int rank, DataType dt, size_t count, size_t index_offset = 0) {
  std::vector<uint8_t> v(count * DataTypeSize(dt) + 8, 0xee);
  for (size_t i = 0; i < count; ++i) SetElement(v.data(), dt, i, Value(rank, index_offset + i));
  return v;
}

// Expects buf[i] == Value(rank, first + i) for i < count.
void ExpectBlock(const uint8_t* buf, DataType dt, size_t count, int rank, size_t first, const std::string& what) {
  for (size_t i = 0; i < count; ++i) {
    const double got = GetElement(buf, dt, i);
    if (got != Value(rank, first + i)) {
      ADD_FAILURE() << what << ": element " << i << " (from rank " << rank << ") got " << got << " want "
                    << Value(rank, first + i);
      return;
    }
  }
}

void DataCollectives(int r, int n, Communicator& c, const std::string& tag, bool with_v) {
  int k = 0;
  for (DataType dt : kDtypes) {
    const size_t elem = DataTypeSize(dt);
    for (size_t count : kSizes) {
      const std::string what = tag + " " + std::string(DataTypeName(dt)) + " count " + std::to_string(count) +
                               " n " + std::to_string(n) + " rank " + std::to_string(r);
      const bool in_place = (k++ % 2) == 1;
      const int root = k % n;
      {  // broadcast
        std::vector<uint8_t> buf = r == root ? Filled(root, dt, count) : std::vector<uint8_t>(count * elem + 8);
        std::vector<uint8_t> src = Filled(root, dt, count);
        Status st = in_place || r != root ? c.Broadcast(buf.data(), buf.data(), count, dt, root)
                                          : c.Broadcast(src.data(), buf.data(), count, dt, root);
        ASSERT_TRUE(st.ok()) << what << " broadcast: " << st.ToString();
        ExpectBlock(buf.data(), dt, count, root, 0, what + " broadcast");
      }
      {  // all_gather
        std::vector<uint8_t> recv(n * count * elem + 8);
        std::vector<uint8_t> mine = Filled(r, dt, count);
        if (in_place) std::memcpy(recv.data() + r * count * elem, mine.data(), count * elem);
        const void* send = in_place ? recv.data() + r * count * elem : mine.data();
        Status st = c.AllGather(send, recv.data(), count, dt);
        ASSERT_TRUE(st.ok()) << what << " all_gather: " << st.ToString();
        for (int j = 0; j < n; ++j) ExpectBlock(recv.data() + j * count * elem, dt, count, j, 0, what + " all_gather");
      }
      {  // all_to_all: block d of rank r holds Value(r, d*count + i)
        std::vector<uint8_t> send = Filled(r, dt, n * count);
        std::vector<uint8_t> recv(n * count * elem + 8);
        Status st = in_place ? c.AllToAll(send.data(), send.data(), count, dt)
                             : c.AllToAll(send.data(), recv.data(), count, dt);
        ASSERT_TRUE(st.ok()) << what << " all_to_all: " << st.ToString();
        const uint8_t* out = in_place ? send.data() : recv.data();
        for (int j = 0; j < n; ++j) ExpectBlock(out + j * count * elem, dt, count, j, r * count, what + " all_to_all");
      }
      {  // gather
        std::vector<uint8_t> recv(n * count * elem + 8);
        std::vector<uint8_t> mine = Filled(r, dt, count);
        const void* send = mine.data();
        if (in_place && r == root) {
          std::memcpy(recv.data() + root * count * elem, mine.data(), count * elem);
          send = recv.data() + root * count * elem;
        }
        Status st = c.Gather(send, recv.data(), count, dt, root);
        ASSERT_TRUE(st.ok()) << what << " gather: " << st.ToString();
        if (r == root) {
          for (int j = 0; j < n; ++j) ExpectBlock(recv.data() + j * count * elem, dt, count, j, 0, what + " gather");
        }
      }
      {  // scatter: root's block d is Value(root, d*count + i)
        std::vector<uint8_t> send = Filled(root, dt, n * count);
        std::vector<uint8_t> recv(count * elem + 8);
        void* out = in_place && r == root ? send.data() + root * count * elem : recv.data();
        Status st = c.Scatter(send.data(), out, count, dt, root);
        ASSERT_TRUE(st.ok()) << what << " scatter: " << st.ToString();
        ExpectBlock(static_cast<uint8_t*>(out), dt, count, root, r * count, what + " scatter");
      }
      ASSERT_TRUE(c.Barrier().ok());
    }
  }
  if (!with_v) return;
  // all_to_allv: rank r sends (r + d) % 3 * 37 + d elements to rank d, packed.
  for (DataType dt : kDtypes) {
    const size_t elem = DataTypeSize(dt);
    auto amount = [](int from, int to) { return static_cast<size_t>(((from + to) % 3) * 37 + to + from); };
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t stotal = 0, rtotal = 0;
    for (int d = 0; d < n; ++d) {
      sc[d] = amount(r, d);
      sd[d] = stotal;
      stotal += sc[d] + 3;  // gaps between blocks
      rc[d] = amount(d, r);
      rd[d] = rtotal;
      rtotal += rc[d] + 1;
    }
    std::vector<uint8_t> send(stotal * elem + 8), recv(rtotal * elem + 8);
    for (int d = 0; d < n; ++d) {
      for (size_t i = 0; i < sc[d]; ++i) SetElement(send.data(), dt, sd[d] + i, Value(r, d * 1000 + i));
    }
    Status st = c.AllToAllV(send.data(), sc, sd, recv.data(), rc, rd, dt);
    ASSERT_TRUE(st.ok()) << tag << " all_to_allv: " << st.ToString();
    for (int j = 0; j < n; ++j) {
      ExpectBlock(recv.data() + rd[j] * elem, dt, rc[j], j, r * 1000, tag + " all_to_allv " + std::string(DataTypeName(dt)));
    }
  }
}

TEST(CollectivesData, ShmDirectEveryWorldSize) {
  // Through the windows, and single copy (pulling peers' buffers).
  for (int single_copy : {0, 1}) {
    for (int n = 1; n <= 8; ++n) {
      CommOptions o = TestOptions("shm_direct");
      o.shm_single_copy = single_copy;
      o.shm_alltoall_single_copy_bytes = single_copy ? 1 : 0;  // all-to-all single copy at every size
      RunRanks(n, o, [&](int r, Communicator& c) {
        DataCollectives(r, n, c, single_copy ? "shm_direct single-copy" : "shm_direct windows", true);
      });
    }
  }
}

// Ranks may differ in whether their all-to-all is in place: every rank
// then takes the windows (peers must not read blocks being overwritten),
// on the shm direct path with and without single copy.
TEST(CollectivesData, AllToAllInPlaceOnSomeRanksOnly) {
  for (int single_copy : {0, 1}) {
    for (int n : {2, 3, 4}) {
      CommOptions o = TestOptions("shm_direct");
      o.shm_single_copy = single_copy;
      o.shm_alltoall_single_copy_bytes = single_copy ? 1 : 0;  // out-of-place ranks would take single copy
      RunRanks(n, o, [&](int r, Communicator& c) {
        const size_t count = 70001;  // blocks far beyond the LL slot
        const bool in_place = r % 2 == 1;
        std::vector<float> send(count * n), recv(count * n, -1.0f);
        for (int d = 0; d < n; ++d) {
          for (size_t i = 0; i < count; ++i) send[d * count + i] = static_cast<float>(r * 1000 + d * 10) + i % 7;
        }
        float* out = in_place ? send.data() : recv.data();
        Status st = c.AllToAll(send.data(), out, count, DataType::kFloat32);
        ASSERT_TRUE(st.ok()) << st.ToString();
        size_t bad = 0;
        for (int j = 0; j < n; ++j) {
          for (size_t i = 0; i < count; ++i) bad += out[j * count + i] != static_cast<float>(j * 1000 + r * 10) + i % 7;
        }
        EXPECT_EQ(bad, 0u) << "n " << n << " rank " << r << (in_place ? " in place" : "")
                           << (single_copy ? " single copy" : " windows");
      });
    }
  }
}

TEST(CollectivesData, PointToPointAlgorithmsEveryWorldSize) {
  // Tree broadcast/barrier, ring all_gather, pairwise all_to_all(v), linear gather/scatter.
  for (int n = 1; n <= 8; ++n) {
    RunRanks(n, TestOptions("broadcast=binomial_tree,all_gather=ring,all_to_all=pairwise,all_to_allv=pairwise,"
                            "gather=pairwise,scatter=pairwise,barrier=binomial_tree"),
             [&](int r, Communicator& c) { DataCollectives(r, n, c, "p2p", true); });
  }
}

TEST(CollectivesData, DefaultSelectionOverTcp) {
  for (int n : {2, 3, 4}) {
    CommOptions o = TestOptions();
    o.transport = transport::TransportKind::kTcp;
    o.tcp_streams = n == 2 ? 3 : 1;
    RunRanks(n, o, [&](int r, Communicator& c) { DataCollectives(r, n, c, "tcp", true); });
  }
}

TEST(CollectivesData, AllToAllVSizeMismatchIsAnError) {
  RunRanks(2, TestOptions("shm_direct"), [&](int r, Communicator& c) {
    std::vector<float> send(8), recv(8);
    // Rank 0 sends 2 to rank 1, but rank 1 expects 3.
    std::vector<size_t> sc = {1, 2}, sd = {0, 4}, rc = {1, r == 1 ? size_t{3} : size_t{2}}, rd = {0, 4};
    if (r == 1) {
      sc = {2, 1};
      rc = {3, 1};
    }
    Status st = c.AllToAllV(send.data(), sc, sd, recv.data(), rc, rd, DataType::kFloat32);
    EXPECT_FALSE(st.ok());
    if (r == 1) { EXPECT_NE(st.message().find("expects"), std::string::npos) << st.ToString(); }
  });
}

// In place, a rank that sends nothing still receives (pairwise exchange:
// its empty send copy must not touch a null scratch buffer -- UBSan's
// "null pointer passed as argument 1" in the sanitizer suite before the fix).
TEST(CollectivesData, PairwiseInPlaceAllToAllOfARankThatSendsNothing) {
  RunRanks(2, TestOptions("all_to_all=pairwise,all_to_allv=pairwise"), [&](int r, Communicator& c) {
    std::vector<float> buf = {10.0f + r, 11.0f + r, -1.0f, -1.0f};
    std::vector<size_t> sc = {0, 0}, sd = {0, 0}, rc = {0, 2}, rd = {0, 0};
    if (r == 1) {
      sc = {2, 0};
      rc = {0, 0};
    }
    Status st = c.AllToAllV(buf.data(), sc, sd, buf.data(), rc, rd, DataType::kFloat32);
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (r == 0) {
      EXPECT_EQ(buf[0], 11.0f);
      EXPECT_EQ(buf[1], 12.0f);
    }
    // Nothing at all, in place.
    st = c.AllToAll(buf.data(), buf.data(), 0, DataType::kFloat32);
    ASSERT_TRUE(st.ok()) << st.ToString();
  });
}

}  // namespace
}  // namespace tessera::comm
