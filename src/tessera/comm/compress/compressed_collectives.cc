#include "tessera/comm/compress/compressed_collectives.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tessera::comm::compress {

// A dense call is cut into segments (kSegment elements of every rank's
// chunk each), pipelined: segment j's exchange runs while segment j+1 is
// encoded or decoded.
constexpr size_t kSegment = 256 * kBlock;

float* ErrorFeedback::Residual(const std::string& key, size_t n) {
  std::vector<float>& r = residuals_[key];
  if (r.size() != n) r.assign(n, 0.0f);
  return r.data();
}

CompressedCollectives::Scratch& CompressedCollectives::ScratchFor(const std::string& key, size_t send_bytes,
                                                                 size_t recv_bytes) {
  Scratch& s = scratch_[key];
  if (s.send_size < send_bytes) {
    s.send.reset(new uint8_t[send_bytes]);
    s.send_size = send_bytes;
  }
  if (s.recv_size < recv_bytes) {
    s.recv.reset(new uint8_t[recv_bytes]);
    s.recv_size = recv_bytes;
  }
  return s;
}

CompressedCollectives::CompressedCollectives(Communicator* comm, CompressionSpec spec) : comm_(comm), spec_(spec) {}
CompressedCollectives::~CompressedCollectives() = default;

Status CompressedCollectives::AllReduce(const std::string& key, float* data, size_t n) {
  TESSERA_ASSIGN_OR_RETURN(auto p, StartAllReduce(key, data, n));
  return Finish(*p);
}

Status CompressedCollectives::ReduceScatter(const std::string& key, float* send, float* recv, size_t shard) {
  TESSERA_ASSIGN_OR_RETURN(auto p, StartReduceScatter(key, send, recv, shard));
  return Finish(*p);
}

StatusOr<std::unique_ptr<CompressedCollectives::Pending>> CompressedCollectives::StartAllReduce(
    const std::string& key, float* data, size_t n) {
  const size_t P = static_cast<size_t>(comm_->size());
  if (spec_.codec == Codec::kTopK) return StartTopK(key, data, n, /*all_reduce=*/true, nullptr, 0);
  return StartDense(key, data, (n + P - 1) / P, n, /*all_reduce=*/true, nullptr);
}

StatusOr<std::unique_ptr<CompressedCollectives::Pending>> CompressedCollectives::StartReduceScatter(
    const std::string& key, float* send, float* recv, size_t shard) {
  const size_t P = static_cast<size_t>(comm_->size());
  if (spec_.codec == Codec::kTopK) return StartTopK(key, send, shard * P, /*all_reduce=*/false, recv, shard);
  return StartDense(key, send, shard, shard * P, /*all_reduce=*/false, recv);
}

Status CompressedCollectives::Finish(Pending& p) {
  if (p.finished) return Status::Ok();
  p.finished = true;
  Status st = p.work.valid() ? p.work.Wait() : Status::Ok();
  p.run_seconds += p.work.run_seconds();
  p.work = Work();
  if (!p.topk && st.ok()) st = FinishDense(p);
  if (!st.ok()) {
    Cancel(p);
    return st.WithContext(fmt::format("compressed {} ({}) of '{}'", p.all_reduce ? "all-reduce" : "reduce-scatter",
                                      CompressionSpecName(spec_), p.key));
  }
  return p.topk ? FinishTopK(p) : Status::Ok();
}

void CompressedCollectives::Cancel(Pending& p) {
  if (p.work.valid()) (void)p.work.Wait();
  p.work = Work();
  for (auto& seg : p.segments) {
    if (seg.work.valid()) (void)seg.work.Wait();
    seg.work = Work();
  }
  p.finished = true;
}

// ---- dense codecs -------------------------------------------------------

namespace {

// A call's state. Nothing to exchange with no elements or one rank: *done
// (a one-rank reduce-scatter copies its shard).
std::unique_ptr<CompressedCollectives::Pending> NewPending(const std::string& key, bool topk, bool all_reduce,
                                                           float* x, float* recv, size_t n_total, size_t chunk,
                                                           int ranks, bool* done) {
  auto p = std::make_unique<CompressedCollectives::Pending>();
  p->key = key;
  p->topk = topk;
  p->all_reduce = all_reduce;
  p->data = x;
  p->recv = recv;
  p->n_total = n_total;
  p->chunk = chunk;
  *done = n_total == 0 || ranks == 1;
  if (n_total > 0 && ranks == 1 && !all_reduce) std::memcpy(recv, x, chunk * sizeof(float));
  return p;
}

}  // namespace

StatusOr<std::unique_ptr<CompressedCollectives::Pending>> CompressedCollectives::StartDense(
    const std::string& key, float* x, size_t chunk, size_t n_total, bool all_reduce, float* recv) {
  if (spec_.codec == Codec::kNone) return InvalidArgument("compressed collective with codec 'none'");
  const int P = comm_->size();
  bool done = false;
  auto p = NewPending(key, /*topk=*/false, all_reduce, x, recv, n_total, chunk, P, &done);
  if (done) return p;
  // Per segment: encode x + residual of each rank's part (the encoding error
  // becomes the residual), then start its all-to-all.
  float* res = spec_.error_feedback ? feedback_.Residual(key, n_total) : nullptr;
  const Codec c = spec_.codec;
  size_t total = 0;
  for (size_t begin = 0; begin < chunk; begin += kSegment) {
    total += EncodedBytes(c, std::min(kSegment, chunk - begin)) * P;
  }
  Scratch& scratch = ScratchFor(key, total, total);
  size_t offset = 0;
  for (size_t begin = 0; begin < chunk; begin += kSegment) {
    Pending::Segment& seg = p->segments.emplace_back();
    seg.begin = begin;
    seg.len = std::min(kSegment, chunk - begin);
    seg.slot = EncodedBytes(c, seg.len);
    seg.send = scratch.send.get() + offset;
    seg.recv = scratch.recv.get() + offset;
    offset += seg.slot * P;
    for (int q = 0; q < P; ++q) {
      const size_t lo = std::min(n_total, q * chunk + begin), m = std::min(n_total, lo + seg.len) - lo;
      EncodeWithFeedback(c, x + lo, res ? res + lo : nullptr, m, seg.send + q * seg.slot);
    }
    seg.work = comm_->AllToAllAsync(seg.send, seg.recv, seg.slot, DataType::kUint8);
    bytes_.sent += static_cast<uint64_t>(P - 1) * seg.slot;
  }
  bytes_.calls += 1;
  const uint64_t fp32_phase = static_cast<uint64_t>(P - 1) * chunk * sizeof(float);
  bytes_.fp32_equivalent += all_reduce ? 2 * fp32_phase : fp32_phase;
  return p;
}

Status CompressedCollectives::FinishDense(Pending& p) {
  const int P = comm_->size();
  if (p.n_total == 0 || P == 1) return Status::Ok();
  const int r = comm_->rank();
  const Codec c = spec_.codec;
  if (p.all_reduce && sum_.size() < kSegment) sum_.resize(kSegment);
  // Phase 2's residual (all-reduce): this rank's chunk of the sums.
  float* res = p.all_reduce && spec_.error_feedback ? feedback_.Residual(p.key + "#sum", p.chunk) : nullptr;
  for (Pending::Segment& seg : p.segments) {
    Status st = seg.work.Wait();
    p.run_seconds += seg.work.run_seconds();
    seg.work = Work();
    if (!st.ok()) return st;
    const size_t lo = std::min(p.n_total, r * p.chunk + seg.begin), m = std::min(p.n_total, lo + seg.len) - lo;
    float* sum = p.all_reduce ? sum_.data() : p.recv + seg.begin;
    std::fill(sum, sum + seg.len, 0.0f);
    for (int q = 0; q < P; ++q) Decode(c, seg.recv + q * seg.slot, m, sum, /*accumulate=*/true);
    if (!p.all_reduce) continue;
    // The encoded sum goes to every rank (the send buffer's first slot is free now).
    EncodeWithFeedback(c, sum, res ? res + seg.begin : nullptr, m, seg.send);
    seg.work = comm_->AllGatherAsync(seg.send, seg.recv, seg.slot, DataType::kUint8);
    bytes_.sent += static_cast<uint64_t>(P - 1) * seg.slot;
  }
  if (!p.all_reduce) return Status::Ok();
  for (Pending::Segment& seg : p.segments) {
    Status st = seg.work.Wait();
    p.run_seconds += seg.work.run_seconds();
    seg.work = Work();
    if (!st.ok()) return st.WithContext("gathering the sums");
    for (int q = 0; q < P; ++q) {
      const size_t lo = std::min(p.n_total, q * p.chunk + seg.begin), m = std::min(p.n_total, lo + seg.len) - lo;
      Decode(c, seg.recv + q * seg.slot, m, p.data + lo, /*accumulate=*/false);
    }
  }
  return Status::Ok();
}

// ---- top-k --------------------------------------------------------------

namespace {

struct Pair {
  uint32_t index;
  float value;
};
static_assert(sizeof(Pair) == 8);

}  // namespace

// With a residual: residual += x, and every element with |residual| >= thr
// is a candidate; without: the elements of x. One pass, AVX2 when built for it.
void CompressedCollectives::CollectCandidates(const float* x, float* res, size_t n, float thr,
                                              std::vector<Candidate>& out) {
  size_t i = 0;
#if defined(__AVX2__)
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 t = _mm256_set1_ps(thr);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (res != nullptr) {
      v = _mm256_add_ps(v, _mm256_loadu_ps(res + i));
      _mm256_storeu_ps(res + i, v);
    }
    const __m256 a = _mm256_and_ps(v, abs_mask);
    unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, t, _CMP_GE_OQ)));
    if (mask == 0) continue;
    alignas(32) float mags[8];
    _mm256_store_ps(mags, a);
    while (mask != 0) {
      const int b = __builtin_ctz(mask);
      mask &= mask - 1;
      out.push_back(Candidate{mags[b], static_cast<uint32_t>(i + b)});
    }
  }
#endif
  for (; i < n; ++i) {
    float v = x[i];
    if (res != nullptr) v = res[i] += x[i];
    if (std::fabs(v) >= thr) out.push_back(Candidate{std::fabs(v), static_cast<uint32_t>(i)});
  }
}

StatusOr<std::unique_ptr<CompressedCollectives::Pending>> CompressedCollectives::StartTopK(
    const std::string& key, float* x, size_t n_total, bool all_reduce, float* recv, size_t shard) {
  const int P = comm_->size();
  if (n_total > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgument("top-k compressed collective of '{}': {} elements exceed 2^32 indices", key, n_total);
  }
  bool done = false;
  auto p = NewPending(key, /*topk=*/true, all_reduce, x, recv, n_total, shard, P, &done);
  if (done) return p;
  const size_t k = std::clamp<size_t>(static_cast<size_t>(std::ceil(spec_.topk_fraction * n_total)), 1, n_total);
  // v = x + residual (kept in the residual's storage; in x without feedback).
  float* res = spec_.error_feedback ? feedback_.Residual(key, n_total) : nullptr;
  float* v = res != nullptr ? res : x;
  // A threshold from a strided sample (a bit below the k-th largest, so the
  // candidates are a few more than k), then one pass that forms v and
  // collects the candidates, and an exact selection among them; a full
  // selection when the sample misjudged.
  const size_t samples = std::min<size_t>(n_total, 65536);
  std::vector<float>& sample = sample_;
  sample.resize(samples);
  for (size_t j = 0; j < samples; ++j) {
    const size_t i = j * n_total / samples;
    sample[j] = std::fabs(x[i] + (res != nullptr ? res[i] : 0.0f));
  }
  const size_t rank_in_sample = std::min(samples - 1, static_cast<size_t>(1.3 * k * samples / n_total) + 16);
  std::nth_element(sample.begin(), sample.begin() + rank_in_sample, sample.begin() + samples, std::greater<float>());
  const float thr = samples == n_total && rank_in_sample == samples - 1 ? 0.0f : sample[rank_in_sample];
  std::vector<Candidate>& cand = candidates_;
  cand.clear();
  cand.reserve(2 * k + 64);
  CollectCandidates(x, res, n_total, thr, cand);
  if (cand.size() < k) {
    cand.resize(n_total);
    for (size_t i = 0; i < n_total; ++i) cand[i] = Candidate{std::fabs(v[i]), static_cast<uint32_t>(i)};
  }
  auto larger = [](const Candidate& a, const Candidate& b) {
    return a.magnitude > b.magnitude || (a.magnitude == b.magnitude && a.index < b.index);
  };
  if (cand.size() > k) std::nth_element(cand.begin(), cand.begin() + (k - 1), cand.end(), larger);
  p->slot = k * sizeof(Pair);
  Scratch& scratch = ScratchFor(key, p->slot, p->slot * P);
  p->send = scratch.send.get();
  p->recv_buf = scratch.recv.get();
  Pair* out = reinterpret_cast<Pair*>(p->send);
  for (size_t j = 0; j < k; ++j) {
    const uint32_t i = cand[j].index;
    out[j] = Pair{i, v[i]};
    if (res != nullptr) res[i] = 0.0f;
  }
  p->work = comm_->AllGatherAsync(p->send, p->recv_buf, p->slot, DataType::kUint8);
  bytes_.calls += 1;
  bytes_.sent += static_cast<uint64_t>(P - 1) * p->slot;
  bytes_.fp32_equivalent += all_reduce ? 2 * static_cast<uint64_t>(P - 1) * ((n_total + P - 1) / P) * sizeof(float)
                                       : static_cast<uint64_t>(P - 1) * shard * sizeof(float);
  return p;
}

Status CompressedCollectives::FinishTopK(Pending& p) {
  const int P = comm_->size();
  if (p.n_total == 0 || P == 1) return Status::Ok();
  const size_t k = p.slot / sizeof(Pair);
  if (p.all_reduce) {
    std::fill(p.data, p.data + p.n_total, 0.0f);
    for (int q = 0; q < P; ++q) {
      const Pair* in = reinterpret_cast<const Pair*>(p.recv_buf + q * p.slot);
      for (size_t j = 0; j < k; ++j) p.data[in[j].index] += in[j].value;
    }
    return Status::Ok();
  }
  const size_t lo = static_cast<size_t>(comm_->rank()) * p.chunk, hi = lo + p.chunk;
  std::fill(p.recv, p.recv + p.chunk, 0.0f);
  for (int q = 0; q < P; ++q) {
    const Pair* in = reinterpret_cast<const Pair*>(p.recv_buf + q * p.slot);
    for (size_t j = 0; j < k; ++j) {
      if (in[j].index >= lo && in[j].index < hi) p.recv[in[j].index - lo] += in[j].value;
    }
  }
  return Status::Ok();
}

}  // namespace tessera::comm::compress
