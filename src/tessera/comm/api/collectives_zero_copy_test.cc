// Zero-copy collectives (algo/shm_zero_copy.cc) with ranks as threads: every
// rank's buffers come from AllocShared, so all-reduce, reduce,
// reduce-scatter, all-gather, broadcast and all-to-all(v) read and write
// peers' buffers directly. Results are checked against the plain reference
// for every dtype x op, world sizes 1-8, in place and out of place; the
// operations are counted to prove the zero-copy path ran; a rank with a
// private buffer sends everyone down the copying path, still correct.
// (Ranks as processes, which map each other's memfds: tests/integration.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/comm/transport/shm/shared_memory.h"

namespace tessera::comm {
namespace {

using testing::InputValue;
using testing::Reference;
using testing::RunRanks;
using testing::TestOptions;

// A buffer from AllocShared (or private memory, for the mixed cases).
class Buffer {
 public:
  Buffer(size_t bytes, bool shared) : bytes_(bytes + 64), shared_(shared) {
    if (shared_) {
      StatusOr<void*> p = AllocShared(bytes_);
      EXPECT_TRUE(p.ok()) << p.status().ToString();
      data_ = p.ok() ? static_cast<uint8_t*>(*p) : nullptr;
    } else {
      data_ = new uint8_t[bytes_];
    }
    std::memset(data_, 0xcd, bytes_);
  }
  ~Buffer() {
    if (shared_) {
      EXPECT_TRUE(FreeShared(data_).ok());
    } else {
      delete[] data_;
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  size_t bytes_;
  bool shared_;
  uint8_t* data_ = nullptr;
};

// TestOptions with every reduction past the low-latency slot run direct
// (zero copy on shared buffers); by default only those of >= 256 KiB do.
CommOptions DirectOptions(const std::string& algo) {
  CommOptions o = TestOptions(algo);
  o.shm_direct_reduce_bytes = 1;
  return o;
}

// Past the 504-byte low-latency slot of TestOptions, where zero copy runs.
const size_t kCounts[] = {601, 1031, 4099, (1 << 17) + 5};

void ExpectReduced(const uint8_t* out, size_t count, int n, DataType dt, ReduceOp op, size_t offset,
                   const std::string& what) {
  for (size_t i = 0; i < count; ++i) {
    const double got = GetElement(out, dt, i);
    const double want = Reference(n, offset + i, dt, op);
    if (!testing::Close(got, want, dt, op)) {
      ADD_FAILURE() << what << ": element " << i << " got " << got << " want " << want;
      return;
    }
  }
}

// Every reduction with shared buffers (reduce-scatter too if asked);
// returns how many ops ran.
int ReductionsShared(int r, int n, Communicator& c, const std::string& tag, bool reduce_scatter) {
  int ops = 0, k = 0;
  for (DataType dt : kAllDataTypes) {
    const size_t elem = DataTypeSize(dt);
    for (ReduceOp op : kAllReduceOps) {
      const size_t count = kCounts[k % 4];
      const bool in_place = k % 2 == 1;
      const int root = k % n;
      ++k;
      const std::string what = tag + " " + std::string(DataTypeName(dt)) + " " + std::string(ReduceOpName(op)) +
                               " count " + std::to_string(count) + " n " + std::to_string(n) + " rank " +
                               std::to_string(r) + (in_place ? " in place" : "");
      {  // all_reduce
        Buffer send(count * elem, true), recv(count * elem, true);
        for (size_t i = 0; i < count; ++i) SetElement(send.data(), dt, i, InputValue(r, i, dt, op));
        uint8_t* out = in_place ? send.data() : recv.data();
        Status st = c.AllReduce(send.data(), out, count, dt, op);
        EXPECT_TRUE(st.ok()) << what << " all_reduce: " << st.ToString();
        ExpectReduced(out, count, n, dt, op, 0, what + " all_reduce");
        if (!in_place) {
          EXPECT_EQ(recv.data()[count * elem], 0xcd) << what << ": wrote past the end";
        }
        ++ops;
      }
      {  // reduce (non-roots pass no output)
        Buffer send(count * elem, true), recv(count * elem, true);
        for (size_t i = 0; i < count; ++i) SetElement(send.data(), dt, i, InputValue(r, i, dt, op));
        uint8_t* out = r != root ? nullptr : in_place ? send.data() : recv.data();
        Status st = c.Reduce(send.data(), out, count, dt, op, root);
        EXPECT_TRUE(st.ok()) << what << " reduce: " << st.ToString();
        if (r == root) ExpectReduced(out, count, n, dt, op, 0, what + " reduce");
        ++ops;
      }
      if (reduce_scatter) {
        const size_t per = count / n + 1;
        Buffer send(n * per * elem, true), recv(per * elem, true);
        for (size_t i = 0; i < n * per; ++i) SetElement(send.data(), dt, i, InputValue(r, i, dt, op));
        uint8_t* out = in_place ? send.data() + r * per * elem : recv.data();
        Status st = c.ReduceScatter(send.data(), out, per, dt, op);
        EXPECT_TRUE(st.ok()) << what << " reduce_scatter: " << st.ToString();
        ExpectReduced(out, per, n, dt, op, r * per, what + " reduce_scatter");
        ++ops;
      }
    }
  }
  return ops;
}

double Value(int rank, size_t i) { return static_cast<double>((rank * 31 + i * 7) % 97); }

void ExpectBlock(const uint8_t* buf, DataType dt, size_t count, int rank, size_t first, const std::string& what) {
  for (size_t i = 0; i < count; ++i) {
    if (GetElement(buf, dt, i) != Value(rank, first + i)) {
      ADD_FAILURE() << what << ": element " << i << " (from rank " << rank << ") got " << GetElement(buf, dt, i)
                    << " want " << Value(rank, first + i);
      return;
    }
  }
}

// Every data-movement collective with shared buffers; returns how many ops ran.
int DataMovementShared(int r, int n, Communicator& c, const std::string& tag) {
  int ops = 0, k = 0;
  for (DataType dt : {DataType::kUint8, DataType::kBFloat16, DataType::kFloat64}) {
    const size_t elem = DataTypeSize(dt);
    for (size_t count : kCounts) {
      const bool in_place = k % 2 == 1;
      const int root = k % n;
      ++k;
      const std::string what = tag + " " + std::string(DataTypeName(dt)) + " count " + std::to_string(count) +
                               " n " + std::to_string(n) + " rank " + std::to_string(r) +
                               (in_place ? " in place" : "");
      {  // broadcast
        Buffer buf(count * elem, true), src(count * elem, true);
        for (size_t i = 0; i < count; ++i) SetElement((in_place ? buf : src).data(), dt, i, Value(root, i));
        Status st = c.Broadcast(in_place || r != root ? buf.data() : src.data(), buf.data(), count, dt, root);
        EXPECT_TRUE(st.ok()) << what << " broadcast: " << st.ToString();
        ExpectBlock(buf.data(), dt, count, root, 0, what + " broadcast");
        ++ops;
      }
      {  // all_gather
        Buffer recv(n * count * elem, true), mine(count * elem, true);
        uint8_t* send = in_place ? recv.data() + r * count * elem : mine.data();
        for (size_t i = 0; i < count; ++i) SetElement(send, dt, i, Value(r, i));
        Status st = c.AllGather(send, recv.data(), count, dt);
        EXPECT_TRUE(st.ok()) << what << " all_gather: " << st.ToString();
        for (int j = 0; j < n; ++j) ExpectBlock(recv.data() + j * count * elem, dt, count, j, 0, what + " all_gather");
        ++ops;
      }
      {  // all_to_all (out of place: in place takes the copying path)
        Buffer send(n * count * elem, true), recv(n * count * elem, true);
        for (size_t i = 0; i < n * count; ++i) SetElement(send.data(), dt, i, Value(r, i));
        Status st = c.AllToAll(send.data(), recv.data(), count, dt);
        EXPECT_TRUE(st.ok()) << what << " all_to_all: " << st.ToString();
        for (int j = 0; j < n; ++j) {
          ExpectBlock(recv.data() + j * count * elem, dt, count, j, r * count, what + " all_to_all");
        }
        ++ops;
      }
    }
    // all_to_allv with gaps: rank r sends 200 + 37 * ((r + d) % 3) + d + r elements to d.
    auto amount = [](int from, int to) { return static_cast<size_t>(200 + ((from + to) % 3) * 37 + to + from); };
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t stotal = 0, rtotal = 0;
    for (int d = 0; d < n; ++d) {
      sc[d] = amount(r, d);
      sd[d] = stotal;
      stotal += sc[d] + 3;
      rc[d] = amount(d, r);
      rd[d] = rtotal;
      rtotal += rc[d] + 1;
    }
    Buffer send(stotal * elem, true), recv(rtotal * elem, true);
    for (int d = 0; d < n; ++d) {
      for (size_t i = 0; i < sc[d]; ++i) SetElement(send.data(), dt, sd[d] + i, Value(r, d * 1000 + i));
    }
    Status st = c.AllToAllV(send.data(), sc, sd, recv.data(), rc, rd, dt);
    EXPECT_TRUE(st.ok()) << tag << " all_to_allv: " << st.ToString();
    for (int j = 0; j < n; ++j) {
      ExpectBlock(recv.data() + rd[j] * elem, dt, rc[j], j, r * 1000, tag + " all_to_allv");
    }
    ++ops;
  }
  return ops;
}

TEST(CollectivesZeroCopy, EveryCollectiveDtypeOpWorldSizeRunsZeroCopy) {
  for (int n : {1, 2, 3, 5, 8}) {
    RunRanks(n, DirectOptions("shm_direct"), [&](int r, Communicator& c) {
      ASSERT_TRUE(c.zero_copy());
      const uint64_t before = c.zero_copy_ops();
      const int ops = ReductionsShared(r, n, c, "shm_direct", true) + DataMovementShared(r, n, c, "shm_direct");
      // Every op above ran zero copy (all-to-all in place is not among them).
      EXPECT_EQ(c.zero_copy_ops() - before, static_cast<uint64_t>(ops)) << "n " << n << " rank " << r;
    });
  }
}

TEST(CollectivesZeroCopy, TwoPhaseAllReduceAndReduceRunZeroCopy) {
  for (int n : {2, 3, 8}) {
    RunRanks(n, DirectOptions("shm_two_phase"), [&](int r, Communicator& c) {
      const uint64_t before = c.zero_copy_ops();
      const int ops = ReductionsShared(r, n, c, "shm_two_phase", false);
      EXPECT_EQ(c.zero_copy_ops() - before, static_cast<uint64_t>(ops)) << "n " << n << " rank " << r;
    });
  }
}

TEST(CollectivesZeroCopy, OneRankWithPrivateBuffersSendsEveryoneDownTheCopyingPath) {
  const int n = 3;
  RunRanks(n, DirectOptions("shm_two_phase"), [&](int r, Communicator& c) {
    const size_t count = 50001;
    for (int private_rank = 0; private_rank < n; ++private_rank) {
      const uint64_t before = c.zero_copy_ops();
      Buffer send(count * 4, r != private_rank), recv(count * 4, true);
      for (size_t i = 0; i < count; ++i) {
        SetElement(send.data(), DataType::kFloat32, i, InputValue(r, i, DataType::kFloat32, ReduceOp::kSum));
      }
      ASSERT_TRUE(c.AllReduce(send.data(), recv.data(), count, DataType::kFloat32, ReduceOp::kSum).ok());
      ExpectReduced(recv.data(), count, n, DataType::kFloat32, ReduceOp::kSum, 0, "mixed all_reduce");
      EXPECT_EQ(c.zero_copy_ops(), before) << "rank " << private_rank << " had a private buffer";
    }
  });
}

TEST(CollectivesZeroCopy, AllocSharedAndFreeSharedReportMisuse) {
  StatusOr<void*> p = AllocShared(100);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* bytes = static_cast<uint8_t*>(*p);
  EXPECT_EQ(bytes[99], 0);  // zeroed
  bytes[4095] = 1;          // rounded up to a page
  // A buffer counts as shared only if it lies wholly inside one allocation.
  transport::shm::SharedRef ref;
  EXPECT_TRUE(transport::shm::FindShared(bytes + 64, 4096 - 64, &ref));
  EXPECT_EQ(ref.offset, 64u);
  EXPECT_EQ(ref.bytes, 4096u);
  EXPECT_FALSE(transport::shm::FindShared(bytes + 64, 4096, &ref));
  int on_stack = 0;
  EXPECT_FALSE(transport::shm::FindShared(&on_stack, sizeof(on_stack), &ref));
  EXPECT_TRUE(FreeShared(nullptr).ok());
  Status inner = FreeShared(bytes + 8);
  EXPECT_EQ(inner.code(), StatusCode::kInvalidArgument) << inner.ToString();
  EXPECT_TRUE(FreeShared(bytes).ok());
  Status twice = FreeShared(bytes);
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument) << twice.ToString();
  EXPECT_NE(twice.message().find("AllocShared"), std::string::npos) << twice.ToString();
  EXPECT_EQ(AllocShared(0).status().code(), StatusCode::kInvalidArgument);
}

TEST(CollectivesZeroCopy, TurnedOffByOption) {
  CommOptions o = DirectOptions("shm_two_phase");
  o.shm_zero_copy = 0;
  RunRanks(2, o, [&](int r, Communicator& c) {
    EXPECT_FALSE(c.zero_copy());
    Buffer send(40000 * 4, true), recv(40000 * 4, true);
    for (size_t i = 0; i < 40000; ++i) {
      SetElement(send.data(), DataType::kFloat32, i, InputValue(r, i, DataType::kFloat32, ReduceOp::kSum));
    }
    ASSERT_TRUE(c.AllReduce(send.data(), recv.data(), 40000, DataType::kFloat32, ReduceOp::kSum).ok());
    ExpectReduced(recv.data(), 40000, 2, DataType::kFloat32, ReduceOp::kSum, 0, "zero copy off");
    EXPECT_EQ(c.zero_copy_ops(), 0u);
  });
}

}  // namespace
}  // namespace tessera::comm
