#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/hal/affinity.h"
#include "tessera/hal/cpu_features.h"
#include "tessera/hal/device.h"
#include "tessera/hal/peak.h"
#include "tessera/hal/peak_kernels.h"
#include "tessera/hal/pooled_allocator.h"
#include "tessera/hal/threading.h"
#include "tessera/hal/topology.h"

namespace tessera::hal {
namespace {

TEST(PooledAllocator, ReusesFreedBlocksOfTheSameClass) {
  PooledAllocator pool("test");
  void* a = pool.Allocate(1000);
  ASSERT_NE(a, nullptr);
  pool.Free(a, 1000);
  void* b = pool.Allocate(1010);  // same size class as 1000
  EXPECT_EQ(b, a);
  MemoryStats s = pool.Stats();
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_os_allocs, 1);
  void* c = pool.Allocate(1000);  // b is in use: a new block
  EXPECT_NE(c, b);
  EXPECT_EQ(pool.Stats().num_os_allocs, 2);
  pool.Free(b, 1010);
  pool.Free(c, 1000);
}

TEST(PooledAllocator, CurrentAndPeakAccounting) {
  PooledAllocator pool("test");
  const size_t s1 = PooledAllocator::RoundSize(3000);
  const size_t s2 = PooledAllocator::RoundSize(50000);
  void* a = pool.Allocate(3000);
  void* b = pool.Allocate(50000);
  MemoryStats st = pool.Stats();
  EXPECT_EQ(st.current_bytes, static_cast<int64_t>(s1 + s2));
  EXPECT_EQ(st.peak_bytes, static_cast<int64_t>(s1 + s2));
  EXPECT_EQ(st.reserved_bytes, static_cast<int64_t>(s1 + s2));
  pool.Free(b, 50000);
  st = pool.Stats();
  EXPECT_EQ(st.current_bytes, static_cast<int64_t>(s1));
  EXPECT_EQ(st.peak_bytes, static_cast<int64_t>(s1 + s2));
  EXPECT_EQ(st.reserved_bytes, static_cast<int64_t>(s1 + s2));  // pooled, not returned
  pool.ResetPeak();
  EXPECT_EQ(pool.Stats().peak_bytes, static_cast<int64_t>(s1));
  pool.Trim();
  EXPECT_EQ(pool.Stats().reserved_bytes, static_cast<int64_t>(s1));
  pool.Free(a, 3000);
  pool.Trim();
  st = pool.Stats();
  EXPECT_EQ(st.current_bytes, 0);
  EXPECT_EQ(st.reserved_bytes, 0);
}

TEST(PooledAllocator, AlignmentAndSizeClasses) {
  PooledAllocator pool("test");
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{300}, size_t{4097}, size_t{1} << 20,
                       (size_t{2} << 20) + 1}) {
    void* p = pool.Allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAlignment, 0u) << bytes;
    const size_t rounded = PooledAllocator::RoundSize(bytes);
    EXPECT_GE(rounded, bytes);
    EXPECT_LE(rounded, bytes + bytes / 4 + 64) << "at most 25% waste";
    EXPECT_EQ(rounded % kAlignment, 0u);
    if (rounded >= (size_t{2} << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
    }
    static_cast<char*>(p)[bytes - 1] = 1;  // usable to the last byte
    blocks.emplace_back(p, bytes);
  }
  for (auto [p, bytes] : blocks) pool.Free(p, bytes);
  EXPECT_EQ(pool.Stats().current_bytes, 0);
}

TEST(CpuDevice, TiersHaveSeparateAccounting) {
  Device& dev = CpuDevice();
  EXPECT_EQ(dev.kind(), DeviceKind::kCpu);
  EXPECT_EQ(dev.name(), "cpu:0");
  Allocator& device_tier = dev.allocator(MemoryTier::kDevice);
  Allocator& host_tier = dev.allocator(MemoryTier::kHost);
  ASSERT_NE(&device_tier, &host_tier);
  const MemoryStats d0 = device_tier.Stats();
  const MemoryStats h0 = host_tier.Stats();
  void* p = host_tier.Allocate(1 << 16);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(host_tier.Stats().current_bytes - h0.current_bytes, 1 << 16);
  EXPECT_EQ(device_tier.Stats().current_bytes, d0.current_bytes);
  void* q = device_tier.Allocate(1 << 16);
  std::vector<char> src(1 << 16, 'x');
  dev.Copy(p, src.data(), src.size());
  dev.Copy(q, p, src.size());
  EXPECT_EQ(static_cast<char*>(q)[12345], 'x');
  host_tier.Free(p, 1 << 16);
  device_tier.Free(q, 1 << 16);
  EXPECT_EQ(host_tier.Stats().current_bytes, h0.current_bytes);
  EXPECT_EQ(device_tier.Stats().current_bytes, d0.current_bytes);
}

TEST(Topology, Sanity) {
  const Topology& t = MachineTopology();
  EXPECT_GE(t.packages, 1);
  EXPECT_GE(t.cores, 1);
  EXPECT_GE(t.pus, t.cores);
  EXPECT_GT(t.total_memory_bytes, 0);
  EXPECT_EQ(t.source.rfind("hwloc", 0), 0u) << t.source;
  ASSERT_FALSE(t.numa_nodes.empty());
  std::set<int> numa_pus;
  int64_t numa_memory = 0;
  for (const NumaNode& n : t.numa_nodes) {
    numa_pus.insert(n.pus.begin(), n.pus.end());
    numa_memory += n.memory_bytes;
  }
  EXPECT_EQ(static_cast<int>(numa_pus.size()), t.pus);
  EXPECT_GT(numa_memory, 0);
  EXPECT_LE(numa_memory, t.total_memory_bytes);
  EXPECT_GT(t.CacheBytes(1), 0);
  EXPECT_GT(t.CacheBytes(2), 0);
  for (const CacheLevel& c : t.caches) {
    EXPECT_GT(c.size_bytes, 0);
    EXPECT_GE(c.instances, 1);
    EXPECT_GE(c.pus_per_instance, 1);
    EXPECT_GT(c.line_bytes, 0);
  }
  for (size_t i = 1; i < t.caches.size(); ++i) EXPECT_GE(t.caches[i].size_bytes, t.caches[i - 1].size_bytes);
  EXPECT_EQ(t.CacheBytes(7), 0);
  EXPECT_EQ(&MachineTopology(), &t);  // discovered once
  EXPECT_NE(t.ToString().find("core(s)"), std::string::npos);
}

TEST(CpuFeatures, ConsistentWithCompilerBuiltins) {
  const CpuFeatures& f = GetCpuFeatures();
  __builtin_cpu_init();
  EXPECT_EQ(f.sse4_2, static_cast<bool>(__builtin_cpu_supports("sse4.2")));
  EXPECT_EQ(f.avx, static_cast<bool>(__builtin_cpu_supports("avx")));
  EXPECT_EQ(f.avx2, static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(f.fma, static_cast<bool>(__builtin_cpu_supports("fma")));
  EXPECT_EQ(f.avx512f, static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(f.avx512bw, static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(f.avx512vl, static_cast<bool>(__builtin_cpu_supports("avx512vl")));
  EXPECT_EQ(f.avx512dq, static_cast<bool>(__builtin_cpu_supports("avx512dq")));
  EXPECT_EQ(f.avx512cd, static_cast<bool>(__builtin_cpu_supports("avx512cd")));
  EXPECT_EQ(f.avx512_bf16, static_cast<bool>(__builtin_cpu_supports("avx512bf16")));
  EXPECT_EQ(f.avx512_vnni, static_cast<bool>(__builtin_cpu_supports("avx512vnni")));
  EXPECT_EQ(f.avx512_fp16, static_cast<bool>(__builtin_cpu_supports("avx512fp16")));
  EXPECT_EQ(f.avx_vnni, static_cast<bool>(__builtin_cpu_supports("avxvnni")));
  EXPECT_EQ(f.amx_tile, static_cast<bool>(__builtin_cpu_supports("amx-tile")));
  EXPECT_EQ(f.amx_bf16, static_cast<bool>(__builtin_cpu_supports("amx-bf16")));
  // The build targets x86-64-v3, so these must be present for it to run.
  EXPECT_TRUE(f.avx2 && f.fma);
  EXPECT_FALSE(f.model_name.empty());
  EXPECT_FALSE(f.vendor.empty());
  EXPECT_GT(f.family, 0);
  const std::string text = f.ToString();
  EXPECT_NE(text.find("avx2"), std::string::npos);
  EXPECT_EQ(f.Names().empty(), text.empty());
}

TEST(Threading, KnobAndOverride) {
  unsetenv("OMP_NUM_THREADS");
  const int automatic = NumThreads();
  EXPECT_GE(automatic, 1);
  SetNumThreads(1);
  EXPECT_EQ(NumThreads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  SetNumThreads(3);
  EXPECT_EQ(omp_get_max_threads(), 3);
  int team = 0;
#pragma omp parallel
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  EXPECT_EQ(team, 3);
  SetNumThreads(0);
  EXPECT_EQ(NumThreads(), MachineTopology().cores);
  EXPECT_EQ(ConfigureThreads(), MachineTopology().cores);
  EXPECT_EQ(omp_get_max_threads(), MachineTopology().cores);
}

TEST(Peak, LoopsAndTriadGivePlausibleNumbers) {
  const internal::FmaLoop fp32 = internal::Fp32Loop();
  const internal::FmaLoop bf16 = internal::Bf16Loop();
  EXPECT_GT(fp32.flops_per_iter, 0);
  const int64_t iters = internal::CalibrateIters(fp32, 0.004);
  EXPECT_GE(iters, 1);
  const double f32 = internal::MeasureLoopFlops(fp32, 1, iters, 2);
  const double b16 = internal::MeasureLoopFlops(bf16, 1, internal::CalibrateIters(bf16, 0.004), 2);
  EXPECT_GT(internal::MeasureLoopFlops(fp32, 2, iters, 1), 1e8);
  // Sanity only (a loaded machine measures low): 100 MFLOP/s .. 100 TFLOP/s per core.
  EXPECT_GT(f32, 1e8);
  EXPECT_LT(f32, 1e14);
  EXPECT_GT(b16, 1e8);
  EXPECT_LT(b16, 1e14);
  internal::TriadBuffers buffers(size_t{1} << 20, 2);
  const double bw = buffers.Measure(1, 2);
  EXPECT_GT(bw, 1e8);
  EXPECT_LT(bw, 1e13);
  EXPECT_GT(buffers.Measure(2, 1), 1e8);
}

TEST(Peak, MachinePeakMeasuresOnceAndCaches) {
  const std::string dir = ::testing::TempDir() + "/tessera_peak_" + std::to_string(getpid());
  const std::string path = dir + "/peak.json";
  setenv("TESSERA_PEAK_CACHE", path.c_str(), 1);
  EXPECT_EQ(PeakCachePath(), path);
  SetNumThreads(0);
  const PeakInfo& p = MachinePeak();
  EXPECT_FALSE(p.from_cache);
  if (p.disturbed) {
    // A busy machine (other processes on the cores): the figures must not
    // have been cached. Write them ourselves to test the cache below.
    EXPECT_FALSE(std::filesystem::exists(path));
    ASSERT_TRUE(WritePeakCache(path, p).ok());
  }
  EXPECT_EQ(p.threads, NumThreads());
  EXPECT_EQ(p.cache_key, PeakCacheKey(p.threads));
  EXPECT_GT(p.fp32_flops_per_core, 1e8);
  EXPECT_GT(p.fp32_flops, 1e8);
  EXPECT_GT(p.bf16_flops_per_core, 1e8);
  EXPECT_GT(p.triad_bytes_per_s_per_core, 1e8);
  EXPECT_GT(p.triad_bytes_per_s, 1e8);
  EXPECT_GT(p.measure_seconds, 0);
  EXPECT_EQ(p.FlopsFor("bf16"), p.bf16_flops);
  EXPECT_EQ(p.FlopsFor("fp32", false), p.fp32_flops_per_core);
  EXPECT_EQ(p.FlopsFor("fp16"), p.fp32_flops);
  EXPECT_EQ(&MachinePeak(), &p);  // measured once per process

  // The cache file now holds exactly these figures.
  StatusOr<std::optional<PeakInfo>> cached = ReadPeakCache(path, p.cache_key);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  ASSERT_TRUE(cached->has_value());
  const PeakInfo& c = **cached;
  EXPECT_TRUE(c.from_cache);
  EXPECT_EQ(c.fp32_flops, p.fp32_flops);
  EXPECT_EQ(c.bf16_flops_per_core, p.bf16_flops_per_core);
  EXPECT_EQ(c.triad_bytes_per_s, p.triad_bytes_per_s);
  EXPECT_EQ(c.fp32_isa, p.fp32_isa);
  StatusOr<std::optional<PeakInfo>> other = ReadPeakCache(path, "no such key");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());

  // Another entry merges without losing the first.
  PeakInfo q = p;
  q.cache_key = "other machine";
  q.fp32_flops = 123e9;
  ASSERT_TRUE(WritePeakCache(path, q).ok());
  EXPECT_EQ((*ReadPeakCache(path, "other machine"))->fp32_flops, 123e9);
  EXPECT_EQ((*ReadPeakCache(path, p.cache_key))->fp32_flops, p.fp32_flops);

  // Corrupt files and entries are errors (MachinePeak then remeasures).
  { std::ofstream(path) << "{ not json"; }
  EXPECT_EQ(ReadPeakCache(path, p.cache_key).status().code(), StatusCode::kDataLoss);
  { std::ofstream(path) << R"({"version": 1, "entries": {"k": {"fp32_flops": -1}}})"; }
  EXPECT_EQ(ReadPeakCache(path, "k").status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(ReadPeakCache(dir + "/missing.json", "k")->has_value());

  unsetenv("TESSERA_PEAK_CACHE");
  std::filesystem::remove_all(dir);
}

TEST(Affinity, PinsKernelThreadsToTheirShareOfTheCpus) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int n = static_cast<int>(allowed.size());
  EXPECT_FALSE(BindKernelThreads(1, 1).ok());
  EXPECT_FALSE(BindKernelThreads(-1, 2).ok());
  auto too_many = BindKernelThreads(0, n + 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("CPUs"), std::string::npos);
  // The last of n one-CPU shares: every kernel thread on the last CPU.
  auto cpus = BindKernelThreads(n - 1, n);
  ASSERT_TRUE(cpus.ok()) << cpus.status().ToString();
  ASSERT_EQ(static_cast<int>(cpus->size()), NumThreads());
  for (int cpu : *cpus) EXPECT_EQ(cpu, allowed.back());
  EXPECT_EQ(AllowedCpus(), std::vector<int>{allowed.back()});  // the calling thread is kernel thread 0
  // Undo it for the other tests: every kernel thread back on all CPUs.
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int cpu : allowed) CPU_SET(cpu, &all);
#pragma omp parallel num_threads(NumThreads())
  pthread_setaffinity_np(pthread_self(), sizeof(all), &all);
  EXPECT_EQ(AllowedCpus(), allowed);
}

}  // namespace
}  // namespace tessera::hal
