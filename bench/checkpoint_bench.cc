// Checkpoint save / load throughput against this machine's disk, measured in
// the same run: the reference writes the same number of bytes with plain
// write() + fsync into one file (the disk's sequential write bandwidth as a
// program sees it) and reads them back with read() after evicting them from
// the page cache (posix_fadvise DONTNEED, so both read from the device).
// Tessera saves a 256 MiB state in 8 shards (CheckpointWriter::Commit:
// shards + fsync + rename + index + directory fsync, XXH3 of every byte) and
// loads it back (CheckpointReader: verify every shard's digest and copy
// every tensor into memory allocated once) after the same eviction. bytes_per_second is the figure;
// docs/perf.md quotes the ratio Tessera / reference.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/checkpoint_writer.h"

namespace {

namespace ck = tessera::parallel::checkpoint;
namespace fs = std::filesystem;

constexpr int64_t kTotalBytes = 256ll << 20;
constexpr int kShards = 8;
constexpr int kTensorsPerShard = 4;

fs::path BenchDir() {
  static const fs::path dir = fs::temp_directory_path() / ("tessera_ckpt_bench_" + std::to_string(::getpid()));
  return dir;
}

const std::vector<float>& Payload() {
  static const std::vector<float> data = [] {
    std::vector<float> v(kTotalBytes / sizeof(float));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 9973) * 0.001f;
    return v;
  }();
  return data;
}

void Evict(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void EvictDir(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) Evict(e.path());
}

// A state of kShards x kTensorsPerShard tensors of [rows, 1024] floats.
ck::CheckpointWriter MakeWriter() {
  ck::CheckpointWriter w(kShards, 1);
  const int64_t tensors = kShards * kTensorsPerShard;
  const int64_t rows = kTotalBytes / sizeof(float) / 1024 / tensors;
  const float* base = Payload().data();
  for (int64_t t = 0; t < tensors; ++t) {
    tessera::Status st = w.AddTensor("layer" + std::to_string(t) + ".weight", ck::StorageDtype::kF32, {rows, 1024},
                                     base + t * rows * 1024, static_cast<int>(t / kTensorsPerShard));
    if (!st.ok()) std::abort();
  }
  return w;
}

void BM_ReferenceWriteFsync(benchmark::State& state) {
  fs::create_directories(BenchDir());
  const fs::path file = BenchDir() / "raw.bin";
  const char* data = reinterpret_cast<const char*>(Payload().data());
  for (auto _ : state) {
    fs::remove(file);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    size_t done = 0;
    while (done < static_cast<size_t>(kTotalBytes)) {
      const ssize_t n = ::write(fd, data + done, std::min<size_t>(8 << 20, kTotalBytes - done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
  }
  state.SetBytesProcessed(state.iterations() * kTotalBytes);
}

void BM_ReferenceReadCold(benchmark::State& state) {
  const fs::path file = BenchDir() / "raw.bin";
  std::vector<char> buf(8 << 20);
  for (auto _ : state) {
    state.PauseTiming();
    Evict(file);
    state.ResumeTiming();
    const int fd = ::open(file.c_str(), O_RDONLY);
    int64_t total = 0;
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += n;
    ::close(fd);
    if (total != kTotalBytes) std::abort();
  }
  state.SetBytesProcessed(state.iterations() * kTotalBytes);
}

void BM_CheckpointSave(benchmark::State& state) {
  const ck::CheckpointWriter writer = MakeWriter();
  int64_t i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(BenchDir() / "save");
    const fs::path dir = BenchDir() / "save" / std::to_string(i++);
    state.ResumeTiming();
    tessera::Status st = writer.Commit(dir);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetBytesProcessed(state.iterations() * kTotalBytes);
}

void BM_CheckpointLoadCold(benchmark::State& state) {
  const fs::path dir = BenchDir() / "load";
  if (!fs::exists(dir / "index.json")) {
    tessera::Status st = MakeWriter().Commit(dir);
    if (!st.ok()) std::abort();
  }
  // Into memory allocated (and touched) once, as a loader fills the
  // parameters it already has.
  std::vector<std::byte> dest(kTotalBytes);
  std::memset(dest.data(), 0, dest.size());
  for (auto _ : state) {
    state.PauseTiming();
    EvictDir(dir);
    state.ResumeTiming();
    auto reader = ck::CheckpointReader::Open(dir);
    if (!reader.ok()) std::abort();
    // As the trainers load: every read at once (ReadMany: shards loaded
    // and copied out on one thread per core).
    std::vector<ck::CheckpointReader::ReadRequest> reads;
    int64_t total = 0;
    for (const auto& [name, t] : reader->index().tensors) {
      const int64_t bytes = t.shape[0] * t.shape[1] * static_cast<int64_t>(sizeof(float));
      reads.push_back({name, std::vector<int64_t>(t.shape.size(), 0), t.shape,
                       std::span<std::byte>(dest.data() + total, bytes)});
      total += bytes;
    }
    tessera::Status st = reader->ReadMany(reads, static_cast<int>(state.range(0)));
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(dest.data());
    if (total != kTotalBytes) std::abort();
  }
  state.SetBytesProcessed(state.iterations() * kTotalBytes);
}

// Interleaved: reference, Tessera, reference, Tessera (the machine drifts).
BENCHMARK(BM_ReferenceWriteFsync)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_CheckpointSave)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_ReferenceReadCold)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
// Arg: worker threads (0: one per core; 1: one shard after another, as before ReadMany).
BENCHMARK(BM_CheckpointLoadCold)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  fs::remove_all(BenchDir(), ec);
  return 0;
}
