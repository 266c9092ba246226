#include "tessera/comm/algo/algorithm.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <new>
#include <string>

#include "tessera/base/check.h"
#include "tessera/base/knobs.h"

namespace tessera::comm::algo {
namespace {

base::Knob<int64_t> kStreamKbKnob("TESSERA_STREAM_KB", 8192,
                                  "collectives: outputs of at least this many KiB per rank are written with "
                                  "non-temporal (streaming) stores; 0 = never");

}  // namespace

bool StreamOutput(size_t total_output_bytes) {
  static const int64_t kb = kStreamKbKnob.Get();
  return kb > 0 && total_output_bytes >= static_cast<size_t>(kb) << 10;
}

bool StreamOutput(const CollectiveArgs& a, size_t total_output_bytes) {
  if (a.send == nullptr || a.recv == nullptr) return StreamOutput(total_output_bytes);
  const auto s = reinterpret_cast<uintptr_t>(a.send);
  const auto r = reinterpret_cast<uintptr_t>(a.recv);
  const bool in_place = s == r || (s > r && s < r + total_output_bytes) || (r > s && r < s + total_output_bytes);
  return !in_place && StreamOutput(total_output_bytes);
}

std::string_view AlgorithmName(Algorithm algo) {
  switch (algo) {
    case Algorithm::kShmDirect: return "shm_direct";
    case Algorithm::kShmTwoPhase: return "shm_two_phase";
    case Algorithm::kRing: return "ring";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kBinomialTree: return "binomial_tree";
    case Algorithm::kPairwise: return "pairwise";
    case Algorithm::kHierarchical: return "hierarchical";
  }
  return "?";
}

StatusOr<Algorithm> ParseAlgorithm(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  for (int i = 0; i < kNumAlgorithms; ++i) {
    Algorithm a = static_cast<Algorithm>(i);
    if (t == AlgorithmName(a)) return a;
  }
  if (t == "rhd" || t == "hd") return Algorithm::kHalvingDoubling;
  if (t == "tree") return Algorithm::kBinomialTree;
  if (t == "direct" || t == "shm") return Algorithm::kShmDirect;
  if (t == "two_phase") return Algorithm::kShmTwoPhase;
  if (t == "hier") return Algorithm::kHierarchical;
  return InvalidArgument(
      "unknown algorithm '{}' (expected shm_direct, shm_two_phase, ring, halving_doubling, binomial_tree, "
      "pairwise, hierarchical)",
      text);
}

Scratch::~Scratch() {
  for (Buffer& b : buffers_) {
    if (b.data != nullptr) munmap(b.data, b.bytes);
  }
}

uint8_t* Scratch::Get(int slot, size_t bytes) {
  TESSERA_CHECK(slot >= 0 && slot < 4);
  Buffer& b = buffers_[slot];
  if (bytes <= b.bytes) return b.data;
  if (b.data != nullptr) munmap(b.data, b.bytes);
  size_t want = std::max<size_t>(bytes, std::max<size_t>(b.bytes * 2, 64 << 10));
  want = (want + (2 << 20) - 1) / (2 << 20) * (2 << 20);
  void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, want, MADV_HUGEPAGE);
  b.data = static_cast<uint8_t*>(p);
  b.bytes = want;
  return b.data;
}

Range SplitRange(size_t count, int n, int i, size_t align) {
  if (align == 0) align = 1;
  const size_t blocks = (count + align - 1) / align;
  const size_t b0 = blocks * static_cast<size_t>(i) / static_cast<size_t>(n);
  const size_t b1 = blocks * static_cast<size_t>(i + 1) / static_cast<size_t>(n);
  Range r;
  r.begin = std::min(count, b0 * align);
  r.end = std::min(count, b1 * align);
  return r;
}

void CopyBytes(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return;
  std::memcpy(dst, src, n);
}

void CopyOut(void* dst, const void* src, size_t n, bool stream) {
  if (n == 0 || dst == src) return;
  if (!stream || n < 4096) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  const size_t head = (32 - (reinterpret_cast<uintptr_t>(d) & 31)) & 31;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  _mm_sfence();
  std::memcpy(d + i, s + i, n - i);
}

}  // namespace tessera::comm::algo
