// The NCCL C API with threads as ranks: ids, init (blocking, non-blocking,
// all-in-one), every collective and datatype against a reference,
// PreMulSum, split, grouped send/recv, streams, abort, bad arguments.
#include "tessera/nccl.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/base/float16.h"

namespace {

using Clock = std::chrono::steady_clock;

#define NCCL_OK(call) ASSERT_EQ((call), ncclSuccess) << #call << ": " << ncclGetLastError(nullptr)

// Runs fn(rank, comm) on n threads, each with its own communicator made
// from one unique id; destroys them afterwards.
void RunRanks(int n, const std::function<void(int, ncclComm_t)>& fn) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ncclResult_t res = ncclCommInitRank(&comm, n, id, r);
      ASSERT_EQ(res, ncclSuccess) << ncclGetLastError(comm);
      fn(r, comm);
      EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
}

size_t Size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

void Put(ncclDataType_t t, void* p, size_t i, double v) {
  char* b = static_cast<char*>(p) + i * Size(t);
  switch (t) {
    case ncclInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(b, &x, 1); break; }
    case ncclUint8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(b, &x, 1); break; }
    case ncclInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(b, &x, 4); break; }
    case ncclUint32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(b, &x, 4); break; }
    case ncclInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(b, &x, 8); break; }
    case ncclUint64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(b, &x, 8); break; }
    case ncclFloat16: { tessera::fp16 x(static_cast<float>(v)); std::memcpy(b, &x.bits, 2); break; }
    case ncclBfloat16: { tessera::bf16 x(static_cast<float>(v)); std::memcpy(b, &x.bits, 2); break; }
    case ncclFloat32: { float x = static_cast<float>(v); std::memcpy(b, &x, 4); break; }
    case ncclFloat64: std::memcpy(b, &v, 8); break;
    default: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(b, &x, 1); break; }
  }
}

double Get(ncclDataType_t t, const void* p, size_t i) {
  const char* b = static_cast<const char*>(p) + i * Size(t);
  switch (t) {
    case ncclInt8: { int8_t x; std::memcpy(&x, b, 1); return x; }
    case ncclUint8: { uint8_t x; std::memcpy(&x, b, 1); return x; }
    case ncclInt32: { int32_t x; std::memcpy(&x, b, 4); return x; }
    case ncclUint32: { uint32_t x; std::memcpy(&x, b, 4); return x; }
    case ncclInt64: { int64_t x; std::memcpy(&x, b, 8); return static_cast<double>(x); }
    case ncclUint64: { uint64_t x; std::memcpy(&x, b, 8); return static_cast<double>(x); }
    case ncclFloat16: { tessera::fp16 x; std::memcpy(&x.bits, b, 2); return x.ToFloat(); }
    case ncclBfloat16: { tessera::bf16 x; std::memcpy(&x.bits, b, 2); return x.ToFloat(); }
    case ncclFloat32: { float x; std::memcpy(&x, b, 4); return x; }
    case ncclFloat64: { double x; std::memcpy(&x, b, 8); return x; }
    default: { uint8_t x; std::memcpy(&x, b, 1); return x; }
  }
}

// Small integers: exact in every type, sums too.
double Value(int rank, size_t i) { return static_cast<double>(rank + 1 + static_cast<int>(i % 5)); }

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                 ncclUint64,  ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};

TEST(Nccl, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(NCCL_VERSION_CODE, NCCL_VERSION(2, 21, 5));
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_NE(std::string(ncclGetErrorString(ncclRemoteError)).find("remote"), std::string::npos);
  EXPECT_EQ(static_cast<int>(ncclBfloat16), 9);
  EXPECT_EQ(static_cast<int>(ncclAvg), 4);
  EXPECT_EQ(static_cast<int>(ncclInProgress), 7);
}

TEST(Nccl, EnvironmentAliases) {
  // ctest sets NCCL_SOCKET_IFNAME=lo and no TESSERA_SOCKET_IFNAME.
  const char* nccl = std::getenv("NCCL_SOCKET_IFNAME");
  if (nccl == nullptr) GTEST_SKIP() << "run through ctest (NCCL_SOCKET_IFNAME=lo)";
  const char* tessera = std::getenv("TESSERA_SOCKET_IFNAME");
  ASSERT_NE(tessera, nullptr);
  EXPECT_STREQ(tessera, nccl);
  // ctest also sets NCCL_DEBUG=INFO and TESSERA_DEBUG=ERROR: Tessera's wins.
  EXPECT_STREQ(std::getenv("NCCL_DEBUG"), "INFO");
  EXPECT_STREQ(std::getenv("TESSERA_DEBUG"), "ERROR");
}

TEST(Nccl, EveryCollectiveEveryType) {
  const int n = 3;
  const size_t count = 37;
  RunRanks(n, [&](int r, ncclComm_t comm) {
    int nr = 0, me = -1;
    NCCL_OK(ncclCommCount(comm, &nr));
    NCCL_OK(ncclCommUserRank(comm, &me));
    ASSERT_EQ(nr, n);
    ASSERT_EQ(me, r);
    for (ncclDataType_t t : kTypes) {
      SCOPED_TRACE(testing::Message() << "dtype " << t << " rank " << r);
      const size_t es = Size(t);
      std::vector<char> send(count * n * es), recv(count * n * es);
      for (size_t i = 0; i < count * n; ++i) Put(t, send.data(), i, Value(r, i));
      // all-reduce sum
      NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, t, ncclSum, comm, nullptr));
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int q = 0; q < n; ++q) want += Value(q, i);
        ASSERT_EQ(Get(t, recv.data(), i), want) << "allreduce i=" << i;
      }
      // reduce (max; unsigned 32/64: sum, the only ones they have) to root 1
      const bool sum_only = t == ncclUint32 || t == ncclUint64;
      std::fill(recv.begin(), recv.end(), 0);
      NCCL_OK(ncclReduce(send.data(), recv.data(), count, t, sum_only ? ncclSum : ncclMax, 1, comm, nullptr));
      if (r == 1) {
        for (size_t i = 0; i < count; ++i) {
          double want = sum_only ? Value(0, i) + Value(1, i) + Value(2, i) : Value(n - 1, i);
          ASSERT_EQ(Get(t, recv.data(), i), want) << "reduce";
        }
      }
      // broadcast from root 2
      NCCL_OK(ncclBroadcast(send.data(), recv.data(), count, t, 2, comm, nullptr));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(Get(t, recv.data(), i), Value(2, i)) << "broadcast";
      // all-gather
      NCCL_OK(ncclAllGather(send.data(), recv.data(), count, t, comm, nullptr));
      for (int q = 0; q < n; ++q) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(Get(t, recv.data(), q * count + i), Value(q, i)) << "allgather";
      }
      // reduce-scatter (min)
      NCCL_OK(ncclReduceScatter(send.data(), recv.data(), count, t, sum_only ? ncclSum : ncclMin, comm, nullptr));
      for (size_t i = 0; i < count; ++i) {
        const size_t j = r * count + i;
        double want = sum_only ? Value(0, j) + Value(1, j) + Value(2, j) : Value(0, j);
        ASSERT_EQ(Get(t, recv.data(), i), want) << "reducescatter";
      }
      // all-to-all: block q of rank r's send goes to rank q's block r
      NCCL_OK(ncclAlltoAll(send.data(), recv.data(), count, t, comm, nullptr));
      for (int q = 0; q < n; ++q) {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(Get(t, recv.data(), q * count + i), Value(q, r * count + i)) << "alltoall";
        }
      }
      // gather to root 0
      NCCL_OK(ncclGather(send.data(), recv.data(), count, t, 0, comm, nullptr));
      if (r == 0) {
        for (int q = 0; q < n; ++q) {
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(Get(t, recv.data(), q * count + i), Value(q, i)) << "gather";
        }
      }
      // scatter from root 1
      NCCL_OK(ncclScatter(send.data(), recv.data(), count, t, 1, comm, nullptr));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(Get(t, recv.data(), i), Value(1, r * count + i)) << "scatter";
    }
  });
}

TEST(Nccl, ReductionOperators) {
  const int n = 4;
  const size_t count = 1000;
  RunRanks(n, [&](int r, ncclComm_t comm) {
    for (ncclDataType_t t : {ncclFloat32, ncclInt32, ncclFloat64, ncclInt8}) {
      std::vector<char> send(count * Size(t)), recv(count * Size(t));
      for (size_t i = 0; i < count; ++i) Put(t, send.data(), i, Value(r, i));
      for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
        NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, t, op, comm, nullptr));
        for (size_t i = 0; i < count; ++i) {
          double want = op == ncclProd ? 1 : op == ncclMax ? -1e9 : op == ncclMin ? 1e9 : 0;
          for (int q = 0; q < n; ++q) {
            const double v = Value(q, i);
            want = op == ncclProd ? want * v : op == ncclMax ? std::max(want, v) : op == ncclMin ? std::min(want, v) : want + v;
          }
          if (op == ncclAvg) want /= n;
          if (t == ncclInt32 || t == ncclInt8) want = std::trunc(want);
          if (t == ncclInt8 && op == ncclProd) continue;  // wraps
          ASSERT_NEAR(Get(t, recv.data(), i), want, 1e-6) << "dtype " << t << " op " << op << " i " << i;
        }
      }
    }
    // Unsigned 64-bit sums wrap like the signed ones; min/max are refused.
    std::vector<uint64_t> u(8, (r == 0) ? ~0ull : 2ull), out(8);
    NCCL_OK(ncclAllReduce(u.data(), out.data(), 8, ncclUint64, ncclSum, comm, nullptr));
    EXPECT_EQ(out[0], ~0ull + 2ull * (n - 1));
    EXPECT_EQ(ncclAllReduce(u.data(), out.data(), 8, ncclUint64, ncclMax, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("ncclUint64"), std::string::npos) << ncclGetLastError(comm);
    // fp8 moves but does not reduce.
    std::vector<uint8_t> f8(4, static_cast<uint8_t>(r)), g8(4 * n);
    NCCL_OK(ncclAllGather(f8.data(), g8.data(), 4, ncclFloat8e4m3, comm, nullptr));
    for (int q = 0; q < n; ++q) EXPECT_EQ(g8[q * 4], q);
    EXPECT_EQ(ncclAllReduce(f8.data(), f8.data(), 4, ncclFloat8e5m2, ncclSum, comm, nullptr), ncclInvalidArgument);
  });
}

TEST(Nccl, PreMulSum) {
  const int n = 3;
  RunRanks(n, [&](int r, ncclComm_t comm) {
    float half = 0.5f;
    ncclRedOp_t op;
    NCCL_OK(ncclRedOpCreatePreMulSum(&op, &half, ncclFloat32, ncclScalarHostImmediate, comm));
    EXPECT_GE(static_cast<int>(op), static_cast<int>(ncclNumOps));
    half = 100;  // immediate: read at creation
    std::vector<float> x(100, static_cast<float>(r + 1)), y(100, -1);
    NCCL_OK(ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat32, op, comm, nullptr));
    for (float v : y) ASSERT_FLOAT_EQ(v, 0.5f * (1 + 2 + 3));
    EXPECT_EQ(x[0], static_cast<float>(r + 1)) << "the input must not be scaled in place";
    // reduce-scatter in place
    std::vector<float> z(3 * 10, static_cast<float>(r + 1));
    NCCL_OK(ncclReduceScatter(z.data(), z.data() + r * 10, 10, ncclFloat32, op, comm, nullptr));
    for (int i = 0; i < 10; ++i) ASSERT_FLOAT_EQ(z[r * 10 + i], 3.0f);
    EXPECT_EQ(ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat64, op, comm, nullptr), ncclInvalidArgument);
    NCCL_OK(ncclRedOpDestroy(op, comm));
    EXPECT_EQ(ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat32, op, comm, nullptr), ncclInvalidArgument);
    // A "device" scalar is read when the call is made.
    double s = 2.0;
    NCCL_OK(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat64, ncclScalarDevice, comm));
    s = 3.0;
    std::vector<double> a(5, 1.0), b(5);
    NCCL_OK(ncclReduce(a.data(), b.data(), 5, ncclFloat64, op, 0, comm, nullptr));
    if (r == 0) {
      EXPECT_DOUBLE_EQ(b[0], 9.0);
    }
    int32_t k = -2;
    ncclRedOp_t iop;
    NCCL_OK(ncclRedOpCreatePreMulSum(&iop, &k, ncclInt32, ncclScalarHostImmediate, comm));
    std::vector<int32_t> ia(4, r), ib(4);
    NCCL_OK(ncclAllReduce(ia.data(), ib.data(), 4, ncclInt32, iop, comm, nullptr));
    EXPECT_EQ(ib[0], -2 * (0 + 1 + 2));
    NCCL_OK(ncclRedOpDestroy(op, comm));
    NCCL_OK(ncclRedOpDestroy(iop, comm));
  });
}

TEST(Nccl, SplitWithNoColor) {
  const int n = 4;
  RunRanks(n, [&](int r, ncclComm_t comm) {
    ncclComm_t sub = nullptr;
    // Ranks 0, 2 -> color 0 (reversed by key); rank 1 -> color 1; rank 3 -> none.
    const int color = r == 3 ? NCCL_SPLIT_NOCOLOR : r % 2;
    NCCL_OK(ncclCommSplit(comm, color, -r, &sub, nullptr));
    if (r == 3) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int cnt = 0, me = -1;
    NCCL_OK(ncclCommCount(sub, &cnt));
    NCCL_OK(ncclCommUserRank(sub, &me));
    EXPECT_EQ(cnt, r % 2 == 0 ? 2 : 1);
    if (r == 0) {
      EXPECT_EQ(me, 1);
    }
    if (r == 2) {
      EXPECT_EQ(me, 0);
    }
    int64_t v = r, sum = -1;
    NCCL_OK(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, sub, nullptr));
    EXPECT_EQ(sum, r % 2 == 0 ? 2 : 1);
    NCCL_OK(ncclCommDestroy(sub));
  });
}

TEST(Nccl, GroupedSendRecvRingBothWays) {
  const int n = 3;
  const size_t count = 1 << 20;  // 4 MiB of float: above the p2p channel buffers
  RunRanks(n, [&](int r, ncclComm_t comm) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<float> to_next(count, static_cast<float>(r)), to_prev(count, static_cast<float>(10 + r));
    std::vector<float> from_prev(count, -1), from_next(count, -1);
    std::vector<float> self_in(16, static_cast<float>(r)), self_out(16, -1);
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(to_next.data(), count, ncclFloat32, next, comm, nullptr));
    NCCL_OK(ncclSend(to_prev.data(), count, ncclFloat32, prev, comm, nullptr));
    NCCL_OK(ncclRecv(from_prev.data(), count, ncclFloat32, prev, comm, nullptr));
    NCCL_OK(ncclRecv(from_next.data(), count, ncclFloat32, next, comm, nullptr));
    NCCL_OK(ncclSend(self_in.data(), 16, ncclFloat32, r, comm, nullptr));
    NCCL_OK(ncclRecv(self_out.data(), 16, ncclFloat32, r, comm, nullptr));
    NCCL_OK(ncclGroupEnd());
    EXPECT_EQ(from_prev[0], static_cast<float>(prev));
    EXPECT_EQ(from_prev[count - 1], static_cast<float>(prev));
    EXPECT_EQ(from_next[count - 1], static_cast<float>(10 + next));
    EXPECT_EQ(self_out[15], static_cast<float>(r));
    // Nested groups issue at the outermost end; collectives mix in.
    int32_t one = 1, total = 0;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, comm, nullptr));
    NCCL_OK(ncclGroupEnd());
    EXPECT_EQ(total, 0) << "issued before the outermost ncclGroupEnd";
    NCCL_OK(ncclGroupEnd());
    EXPECT_EQ(total, n);
  });
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

TEST(Nccl, StreamsAreAsynchronousAndOrdered) {
  const int n = 2;
  RunRanks(n, [&](int r, ncclComm_t comm) {
    tesseraStream_t s;
    NCCL_OK(tesseraStreamCreate(&s));
    cudaStream_t alias = s;  // NCCL programs pass cudaStream_t
    std::vector<std::vector<int32_t>> bufs(10, std::vector<int32_t>(1000));
    for (int k = 0; k < 10; ++k) {
      std::fill(bufs[k].begin(), bufs[k].end(), k + r);
      NCCL_OK(ncclAllReduce(bufs[k].data(), bufs[k].data(), 1000, ncclInt32, ncclSum, comm, alias));
    }
    // Ordered: a broadcast of buffer 9 after its all-reduce sees the sum.
    NCCL_OK(ncclBcast(bufs[9].data(), 1000, ncclInt32, 0, comm, alias));
    NCCL_OK(tesseraStreamSynchronize(s));
    EXPECT_EQ(tesseraStreamQuery(s), ncclSuccess);
    for (int k = 0; k < 10; ++k) EXPECT_EQ(bufs[k][999], 2 * k + 1) << k;
    NCCL_OK(tesseraStreamDestroy(s));
  });
}

TEST(Nccl, NonBlockingInit) {
  const int n = 2;
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  std::atomic<int> in_progress{0};
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t comm = nullptr;
      ncclResult_t res = ncclCommInitRankConfig(&comm, n, id, r, &config);
      ASSERT_TRUE(res == ncclInProgress || res == ncclSuccess) << res;
      ASSERT_NE(comm, nullptr);
      if (res == ncclInProgress) in_progress++;
      ncclResult_t state = ncclInProgress;
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (state == ncclInProgress && Clock::now() < deadline) {
        ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ASSERT_EQ(state, ncclSuccess) << ncclGetLastError(comm);
      float x = 1, y = 0;
      NCCL_OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr));
      EXPECT_EQ(y, 2.0f);
      NCCL_OK(ncclCommDestroy(comm));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(in_progress.load(), n) << "non-blocking init returns ncclInProgress at once";
}

TEST(Nccl, InitAllAndGroupedCollectivesFromOneThread) {
  const int n = 3;
  ncclComm_t comms[n];
  int devs[n] = {5, 6, 7};
  NCCL_OK(ncclCommInitAll(comms, n, devs));
  int dev = -1;
  NCCL_OK(ncclCommCuDevice(comms[1], &dev));
  EXPECT_EQ(dev, 6);
  std::vector<std::vector<double>> x(n, std::vector<double>(64));
  for (int i = 0; i < n; ++i) std::fill(x[i].begin(), x[i].end(), i + 1.0);
  NCCL_OK(ncclGroupStart());
  for (int i = 0; i < n; ++i) NCCL_OK(ncclAllReduce(x[i].data(), x[i].data(), 64, ncclDouble, ncclSum, comms[i], nullptr));
  NCCL_OK(ncclGroupEnd());
  for (int i = 0; i < n; ++i) EXPECT_EQ(x[i][63], 6.0);
  for (int i = 0; i < n; ++i) NCCL_OK(ncclCommDestroy(comms[i]));
}

TEST(Nccl, MemAllocZeroCopy) {
  const int n = 2;
  const size_t count = 1 << 20;
  RunRanks(n, [&](int r, ncclComm_t comm) {
    float* buf = nullptr;
    NCCL_OK(ncclMemAlloc(reinterpret_cast<void**>(&buf), count * sizeof(float)));
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(r + 1);
    NCCL_OK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, nullptr));
    EXPECT_EQ(buf[count - 1], 3.0f);
    NCCL_OK(ncclCommFinalize(comm));
    NCCL_OK(ncclMemFree(buf));
  });
  int x = 0;
  EXPECT_EQ(ncclMemFree(&x), ncclInvalidArgument);
}

TEST(Nccl, AbortUnblocksAPeerWaitingOnADeadRank) {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t comms[2] = {nullptr, nullptr};
  std::thread init1([&] { ASSERT_EQ(ncclCommInitRank(&comms[1], 2, id, 1), ncclSuccess); });
  NCCL_OK(ncclCommInitRank(&comms[0], 2, id, 0));
  init1.join();
  ASSERT_NE(comms[1], nullptr);
  ncclResult_t result = ncclSuccess;
  std::string message;
  double seconds = 0;
  std::thread waiter([&] {
    const auto t0 = Clock::now();
    std::vector<float> x(1 << 16, 1.0f);
    result = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comms[0], nullptr);
    message = ncclGetLastError(comms[0]);
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  NCCL_OK(ncclCommAbort(comms[1]));  // rank 1 never joins the all-reduce
  waiter.join();
  EXPECT_NE(result, ncclSuccess);
  EXPECT_TRUE(result == ncclRemoteError || result == ncclSystemError) << result;
  EXPECT_FALSE(message.empty());
  EXPECT_LT(seconds, 10.0) << "the peer must fail promptly, not at the 20 s timeout: " << message;
  ncclResult_t async = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comms[0], &async));
  EXPECT_NE(async, ncclSuccess);
  NCCL_OK(ncclCommAbort(comms[0]));
}

TEST(Nccl, BadArgumentsAreInvalidArgumentWithAMessage) {
  float x = 0;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclAllReduce: comm is NULL"), std::string::npos);
  ncclUniqueId bogus;
  std::memset(&bogus, 7, sizeof(bogus));
  ncclComm_t c = nullptr;
  EXPECT_EQ(ncclCommInitRank(&c, 2, bogus, 0), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclUniqueId"), std::string::npos);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  EXPECT_EQ(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("rank 2 outside [0, 2)"), std::string::npos);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  RunRanks(1, [&](int, ncclComm_t comm) {
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("datatype 99"), std::string::npos) << ncclGetLastError(comm);
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, static_cast<ncclRedOp_t>(17), comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("operator 17"), std::string::npos) << ncclGetLastError(comm);
    EXPECT_EQ(ncclBroadcast(&x, &x, 1, ncclFloat32, 3, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("root 3 outside [0, 1)"), std::string::npos);
    EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, -1, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclAllReduce(nullptr, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("NULL buffer"), std::string::npos);
    ncclComm_t sub = nullptr;
    EXPECT_EQ(ncclCommSplit(comm, -5, 0, &sub, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
  });
}

}  // namespace
