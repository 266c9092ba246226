#include "tessera/comm/algo/algorithm.h"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <new>
#include <string>

#include "tessera/base/check.h"

namespace tessera::comm::algo {

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

}  // namespace tessera::comm::algo
