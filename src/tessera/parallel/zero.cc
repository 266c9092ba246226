#include "tessera/parallel/zero.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/base/check.h"
#include "tessera/base/checksum.h"
#include "tessera/comm/compress/compressed_collectives.h"
#include "tessera/hal/device.h"
#include "tessera/optim/clip.h"

namespace tessera::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Points a contiguous parameter at `storage` + `offset` elements (or
// detaches it when storage is null). Autograd identity (the impl) is kept.
void Repoint(const Tensor& param, std::shared_ptr<Storage> storage, int64_t offset) {
  TensorImpl* impl = param.impl();
  impl->storage = std::move(storage);
  impl->offset = offset;
}

Tensor FlatF32(int64_t n, hal::MemoryTier tier = hal::MemoryTier::kDevice) {
  return Tensor::Empty({std::max<int64_t>(n, 1)}, DType::kF32, tier);
}

}  // namespace

struct ZeroOptimizer::Bucket {
  ZeroBucketSpec spec;
  int rank = 0;
  int size = 1;
  int64_t numel = 0;   // real elements
  int64_t padded = 0;  // multiple of size
  int64_t shard = 0;   // padded / size
  std::vector<int64_t> offsets;  // of each parameter in the flat buffer
  int64_t update_begin = 0, update_end = 0;  // elements this rank updates
  int64_t own_begin = 0, own_end = 0;        // its canonical shard (norms)

  std::shared_ptr<Storage> full_params;  // stages 0–2 always; stage 3 while gathered
  Tensor shard_params;                   // stage 3: this rank's shard
  Tensor grad_full;    // stages 0–1: persistent; 2–3: during the reduction only
  Tensor grad_shard;   // stages 2–3
  Tensor flags;        // [params]: 1 where a gradient exists (summed over the group)
  comm::Work grad_work, flag_work;
  std::unique_ptr<comm::compress::CompressedCollectives> compressed;  // grad_compression on, size > 1
  std::unique_ptr<comm::compress::CompressedCollectives::Pending> pending;
  uint64_t exact_bytes = 0;  // sent by uncompressed gradient reductions
  bool reducing = false;
  bool reduced = false;

  Tensor exp_avg, exp_avg_sq;   // [update_end - update_begin]
  std::vector<int64_t> steps;   // per parameter

  float* grad_at(int64_t flat_index) {
    if (grad_shard.defined()) return grad_shard.data<float>() + (flat_index - rank * shard);
    return grad_full.data<float>() + flat_index;
  }
  float* param_at(int64_t flat_index) {
    if (shard_params.defined()) return shard_params.data<float>() + (flat_index - rank * shard);
    return static_cast<float*>(full_params->data()) + flat_index;
  }
  // Calls fn(param index, begin, end) for each parameter's part of [lo, hi).
  template <typename Fn>
  void ForEachSegment(int64_t lo, int64_t hi, Fn&& fn) const {
    for (size_t i = 0; i < spec.params.size(); ++i) {
      const int64_t b = std::max(lo, offsets[i]);
      const int64_t e = std::min(hi, offsets[i] + spec.params[i].param.numel());
      if (b < e) fn(i, b, e);
    }
  }
};

ZeroOptimizer::~ZeroOptimizer() {
  // Outstanding reductions write into our buffers: let them finish.
  for (auto& b : buckets_) {
    if (b->grad_work.valid()) (void)b->grad_work.Wait();
    if (b->pending) b->compressed->Cancel(*b->pending);
    if (b->flag_work.valid()) (void)b->flag_work.Wait();
  }
}

StatusOr<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::Create(std::vector<ZeroBucketSpec> specs,
                                                               const ZeroOptions& options) {
  if (options.stage < 0 || options.stage > 3) {
    return InvalidArgument("parallel.zero = {} must be 0, 1, 2 or 3", options.stage);
  }
  std::unique_ptr<ZeroOptimizer> z(new ZeroOptimizer());
  z->options_ = options;
  const hal::MemoryTier state_tier = options.offload_optimizer ? hal::MemoryTier::kHost : hal::MemoryTier::kDevice;
  for (ZeroBucketSpec& spec : specs) {
    TESSERA_CHECK(spec.group != nullptr, "bucket '{}' has no communicator", spec.name);
    auto b = std::make_unique<Bucket>();
    b->rank = spec.group->rank();
    b->size = spec.group->size();
    for (const ZeroParam& p : spec.params) {
      if (!p.param.defined() || p.param.dtype() != DType::kF32 || !p.param.is_contiguous()) {
        return InvalidArgument("parameter '{}' of bucket '{}' must be a contiguous fp32 tensor (the master copy)",
                               p.name, spec.name);
      }
      b->offsets.push_back(b->numel);
      b->numel += p.param.numel();
    }
    b->padded = (b->numel + b->size - 1) / b->size * b->size;
    b->shard = b->padded / b->size;
    b->own_begin = std::min(b->numel, b->rank * b->shard);
    b->own_end = std::min(b->numel, (b->rank + 1) * b->shard);
    b->update_begin = options.stage == 0 ? 0 : b->own_begin;
    b->update_end = options.stage == 0 ? b->numel : b->own_end;

    // The flat parameter buffer: copy the values in, make every replica
    // start from group rank 0's values, point the parameters at it.
    auto flat = std::make_shared<Storage>(std::max<int64_t>(b->padded, 1) * sizeof(float), hal::CpuDevice(),
                                          hal::MemoryTier::kDevice);
    float* f = static_cast<float*>(flat->data());
    std::fill(f + b->numel, f + b->padded, 0.0f);
    for (size_t i = 0; i < spec.params.size(); ++i) {
      std::memcpy(f + b->offsets[i], spec.params[i].param.data<float>(), spec.params[i].param.nbytes());
    }
    if (b->size > 1 && b->numel > 0) {
      Status st = spec.group->Broadcast(f, f, b->padded, comm::DataType::kFloat32, 0);
      if (!st.ok()) return st.WithContext(fmt::format("synchronizing the parameters of '{}'", spec.name));
    }
    for (size_t i = 0; i < spec.params.size(); ++i) Repoint(spec.params[i].param, flat, b->offsets[i]);
    if (options.stage == 3) {
      b->shard_params = FlatF32(b->shard);
      std::memcpy(b->shard_params.data<float>(), f + b->rank * b->shard, b->shard * sizeof(float));
      for (const ZeroParam& p : spec.params) Repoint(p.param, nullptr, 0);
    } else {
      b->full_params = flat;
    }
    if (options.stage <= 1) {
      b->grad_full = FlatF32(b->padded);
    } else {
      b->grad_shard = FlatF32(b->shard);
    }
    b->flags = FlatF32(static_cast<int64_t>(spec.params.size()));
    const int64_t n_state = b->update_end - b->update_begin;
    b->exp_avg = FlatF32(n_state, state_tier);
    b->exp_avg_sq = FlatF32(n_state, state_tier);
    b->exp_avg.ZeroFill();
    b->exp_avg_sq.ZeroFill();
    b->steps.assign(spec.params.size(), 0);
    const comm::compress::CompressionSpec& codec = options.grad_compression.For(spec.name);
    if (codec.enabled() && b->size > 1) {
      b->compressed = std::make_unique<comm::compress::CompressedCollectives>(spec.group, codec);
    }
    b->spec = std::move(spec);
    z->buckets_.push_back(std::move(b));
  }
  return z;
}

int ZeroOptimizer::num_buckets() const { return static_cast<int>(buckets_.size()); }
const std::string& ZeroOptimizer::bucket_name(int b) const { return buckets_.at(b)->spec.name; }
int ZeroOptimizer::stage() const { return options_.stage; }

Status ZeroOptimizer::Gather(int index) {
  if (options_.stage < 3) return Status::Ok();
  Bucket& b = *buckets_.at(index);
  if (b.full_params) return Status::Ok();
  auto full = std::make_shared<Storage>(std::max<int64_t>(b.padded, 1) * sizeof(float), hal::CpuDevice(),
                                        hal::MemoryTier::kDevice);
  const auto t0 = Clock::now();
  Status st = b.spec.group->AllGather(b.shard_params.data<float>(), full->data(), b.shard, comm::DataType::kFloat32);
  comm_wait_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  if (!st.ok()) return st.WithContext(fmt::format("gathering the parameters of '{}' (ZeRO-3)", b.spec.name));
  b.full_params = full;
  for (size_t i = 0; i < b.spec.params.size(); ++i) Repoint(b.spec.params[i].param, full, b.offsets[i]);
  return Status::Ok();
}

void ZeroOptimizer::Release(int index) {
  if (options_.stage < 3) return;
  Bucket& b = *buckets_.at(index);
  for (const ZeroParam& p : b.spec.params) Repoint(p.param, nullptr, 0);
  b.full_params.reset();
}

Status ZeroOptimizer::GatherAll() {
  for (int b = 0; b < num_buckets(); ++b) TESSERA_RETURN_IF_ERROR(Gather(b));
  return Status::Ok();
}

Status ZeroOptimizer::ReduceGradients(int index) {
  Bucket& b = *buckets_.at(index);
  TESSERA_CHECK(!b.reducing, "gradients of '{}' reduced twice in one step", b.spec.name);
  if (options_.stage >= 2) b.grad_full = FlatF32(b.padded);
  float* g = b.grad_full.data<float>();
  float* flags = b.flags.data<float>();
  for (size_t i = 0; i < b.spec.params.size(); ++i) {
    Tensor param = b.spec.params[i].param;
    Tensor grad = param.grad();
    const int64_t n = param.numel();
    if (grad.defined()) {
      Tensor g32 = grad.To(DType::kF32).Contiguous();
      std::memcpy(g + b.offsets[i], g32.data<float>(), n * sizeof(float));
      flags[i] = 1.0f;
      param.set_grad(Tensor());
    } else {
      std::fill(g + b.offsets[i], g + b.offsets[i] + n, 0.0f);
      flags[i] = 0.0f;
    }
  }
  std::fill(g + b.numel, g + b.padded, 0.0f);
  b.reducing = true;
  b.reduced = false;
  if (b.size == 1) return Status::Ok();
  if (b.compressed) {
    auto pending = options_.stage <= 1 ? b.compressed->StartAllReduce(b.spec.name, g, b.padded)
                                       : b.compressed->StartReduceScatter(b.spec.name, g, b.grad_shard.data<float>(),
                                                                          b.shard);
    if (!pending.ok()) return pending.status().WithContext(fmt::format("reducing the gradients of '{}'", b.spec.name));
    b.pending = std::move(pending).value();
  } else if (options_.stage <= 1) {
    b.exact_bytes += 2 * static_cast<uint64_t>(b.size - 1) * b.shard * sizeof(float);
    b.grad_work = b.spec.group->AllReduceAsync(g, g, b.padded, comm::DataType::kFloat32, comm::ReduceOp::kSum);
  } else {
    b.exact_bytes += static_cast<uint64_t>(b.size - 1) * b.shard * sizeof(float);
    b.grad_work = b.spec.group->ReduceScatterAsync(g, b.grad_shard.data<float>(), b.shard, comm::DataType::kFloat32,
                                                   comm::ReduceOp::kSum);
  }
  b.flag_work = b.spec.group->AllReduceAsync(flags, flags, b.spec.params.size(), comm::DataType::kFloat32,
                                             comm::ReduceOp::kSum);
  return Status::Ok();
}

Status ZeroOptimizer::Reduce(Bucket& b) {
  if (b.reduced) return Status::Ok();
  if (!b.reducing) return Status::Ok();  // no gradients this step
  const auto t0 = Clock::now();
  Status st = b.grad_work.valid() ? b.grad_work.Wait() : Status::Ok();
  double compressed_run = 0;
  if (st.ok() && b.pending) {
    st = b.compressed->Finish(*b.pending);
    compressed_run = b.pending->run_seconds;  // the exchanges (decoding in Finish counts as waiting)
  }
  b.pending.reset();
  if (st.ok() && b.flag_work.valid()) st = b.flag_work.Wait();
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  comm_wait_s_ += waited;
  grad_wait_s_ += waited;
  grad_comm_s_ += b.grad_work.run_seconds() + b.flag_work.run_seconds() + compressed_run;
  b.grad_work = comm::Work();
  b.flag_work = comm::Work();
  if (!st.ok()) return st.WithContext(fmt::format("reducing the gradients of '{}'", b.spec.name));
  if (options_.stage >= 2 && b.size == 1) {
    std::memcpy(b.grad_shard.data<float>(), b.grad_full.data<float>(), b.shard * sizeof(float));
  }
  if (options_.stage >= 2) b.grad_full = Tensor();  // only the shard is kept
  if (b.size > 1 || b.spec.grad_scale != 1.0) {
    const float inv = static_cast<float>(b.spec.grad_scale / b.size);
    const int64_t lo = options_.stage >= 2 ? b.own_begin : 0;
    const int64_t hi = options_.stage >= 2 ? b.own_end : b.numel;
    float* g = b.grad_at(lo);
    for (int64_t i = 0; i < hi - lo; ++i) g[i] *= inv;
  }
  b.reduced = true;
  return Status::Ok();
}

Status ZeroOptimizer::FinishReductions() {
  for (auto& b : buckets_) TESSERA_RETURN_IF_ERROR(Reduce(*b));
  return Status::Ok();
}

double ZeroOptimizer::SquaredGradNorm() const {
  double sum = 0;
  for (const auto& bp : buckets_) {
    Bucket& b = *bp;
    if (!b.reduced) continue;
    b.ForEachSegment(b.own_begin, b.own_end, [&](size_t i, int64_t lo, int64_t hi) {
      if (!b.spec.params[i].count_in_norm) return;
      sum += optim::SumOfSquares(b.grad_at(lo), hi - lo);
    });
  }
  return sum;
}

void ZeroOptimizer::ScaleGradients(double factor) {
  const float f = static_cast<float>(factor);
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    if (!b.reduced || b.update_end <= b.update_begin) continue;
    float* g = b.grad_at(b.update_begin);
    for (int64_t k = 0; k < b.update_end - b.update_begin; ++k) g[k] *= f;
  }
}

Status ZeroOptimizer::Step(double lr) {
  TESSERA_RETURN_IF_ERROR(FinishReductions());
  ++steps_taken_;
  const optim::AdamWOptions& o = options_.adam;
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    if (!b.reduced) continue;
    const float* flags = b.flags.data<float>();
    // Advance the step count of every parameter with a gradient (on every
    // rank, whichever part of it this rank updates).
    for (size_t i = 0; i < b.spec.params.size(); ++i) {
      if (flags[i] > 0.0f) ++b.steps[i];
    }
    b.ForEachSegment(b.update_begin, b.update_end, [&](size_t i, int64_t lo, int64_t hi) {
      if (flags[i] <= 0.0f) return;
      const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(b.steps[i]));
      const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(b.steps[i]));
      const int64_t s = lo - b.update_begin;
      optim::AdamWUpdateF32(b.param_at(lo), b.grad_at(lo), b.exp_avg.data<float>() + s,
                            b.exp_avg_sq.data<float>() + s, hi - lo, static_cast<float>(lr),
                            static_cast<float>(o.beta1), static_cast<float>(o.beta2), static_cast<float>(o.eps),
                            static_cast<float>(b.spec.params[i].weight_decay), static_cast<float>(bc1),
                            static_cast<float>(bc2));
    });
    b.reducing = false;
    b.reduced = false;
    if ((options_.stage == 1 || options_.stage == 2) && b.size > 1) {
      // In place; runs while the next buckets are updated.
      float* full = static_cast<float*>(b.full_params->data());
      b.grad_work = b.spec.group->AllGatherAsync(full + b.rank * b.shard, full, b.shard, comm::DataType::kFloat32);
    }
  }
  Status first;
  const auto t0 = Clock::now();
  for (auto& bp : buckets_) {
    if (!bp->grad_work.valid()) continue;
    Status st = bp->grad_work.Wait();
    bp->grad_work = comm::Work();
    if (!st.ok() && first.ok()) {
      first = st.WithContext(fmt::format("gathering the updated parameters of '{}'", bp->spec.name));
    }
  }
  comm_wait_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  return first;
}

Status ZeroOptimizer::CompareReplicaGradients(std::string* mismatch) {
  mismatch->clear();
  if (options_.stage >= 2) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(FinishReductions());
  // Buckets by group, in bucket order (the same on every rank of a group).
  std::vector<comm::Communicator*> groups;
  for (const auto& b : buckets_) {
    if (b->size > 1 && std::find(groups.begin(), groups.end(), b->spec.group) == groups.end()) {
      groups.push_back(b->spec.group);
    }
  }
  for (comm::Communicator* group : groups) {
    std::vector<int> members;
    std::vector<uint64_t> mine;
    for (int i = 0; i < num_buckets(); ++i) {
      Bucket& b = *buckets_[i];
      if (b.spec.group != group) continue;
      members.push_back(i);
      mine.push_back(b.reduced ? base::Checksum64(b.grad_full.data<float>(), b.numel * sizeof(float)) : 0);
    }
    const int n = group->size();
    std::vector<uint64_t> all(mine.size() * n);
    Status st = group->AllGather(mine.data(), all.data(), mine.size(), comm::DataType::kInt64);
    if (!st.ok()) return st.WithContext("comparing gradient checksums across replicas");
    for (size_t k = 0; k < members.size(); ++k) {
      std::map<uint64_t, std::vector<int>> by_digest;
      for (int r = 0; r < n; ++r) by_digest[all[r * mine.size() + k]].push_back(r);
      if (by_digest.size() == 1) continue;
      // The largest agreeing set is taken as right and the others named; with
      // no strict majority (two replicas, say) every set is listed.
      size_t largest = 0, at_largest = 0;
      for (const auto& [digest, ranks] : by_digest) largest = std::max(largest, ranks.size());
      for (const auto& [digest, ranks] : by_digest) at_largest += ranks.size() == largest ? 1 : 0;
      std::string what;
      if (at_largest > 1) {
        std::vector<std::string> sets;
        for (const auto& [digest, ranks] : by_digest) sets.push_back(fmt::format("{{{}}}", fmt::join(ranks, ",")));
        what = fmt::format("replicas disagree with no majority: group ranks {}", fmt::join(sets, " vs "));
      } else {
        std::vector<int> odd;
        for (const auto& [digest, ranks] : by_digest) {
          if (ranks.size() != largest) odd.insert(odd.end(), ranks.begin(), ranks.end());
        }
        what = fmt::format("reduced gradient differs on group rank(s) {} of {} replicas", fmt::join(odd, ","), n);
      }
      *mismatch += fmt::format("{}bucket '{}': {}", mismatch->empty() ? "" : "; ", buckets_[members[k]]->spec.name, what);
    }
  }
  return Status::Ok();
}

void ZeroOptimizer::CorruptGradientForTesting(int bucket, bool nan) {
  Bucket& b = *buckets_.at(bucket);
  if (!b.reduced || b.own_end <= b.own_begin) return;
  float* g = b.grad_at(b.own_begin);
  if (nan) {
    *g = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, g, 4);
  bits ^= 1u << 20;
  std::memcpy(g, &bits, 4);
}

Status ZeroOptimizer::DiscardGradients() {
  Status first = FinishReductions();
  for (auto& b : buckets_) {
    b->reducing = false;
    b->reduced = false;
  }
  return first;
}

std::vector<ZeroOptimizer::Span> ZeroOptimizer::OwnedSpans() {
  std::vector<Span> out;
  for (int bi = 0; bi < num_buckets(); ++bi) {
    Bucket& b = *buckets_[bi];
    b.ForEachSegment(b.own_begin, b.own_end, [&](size_t i, int64_t lo, int64_t hi) {
      const int64_t s = lo - b.update_begin;
      out.push_back(Span{&b.spec.params[i], bi, static_cast<int>(i), lo - b.offsets[i], hi - b.offsets[i],
                         b.param_at(lo), b.exp_avg.data<float>() + s, b.exp_avg_sq.data<float>() + s});
    });
  }
  return out;
}

std::vector<ZeroOptimizer::Span> ZeroOptimizer::HeldValueSpans() {
  std::vector<Span> out;
  for (int bi = 0; bi < num_buckets(); ++bi) {
    Bucket& b = *buckets_[bi];
    const int64_t lo_all = options_.stage == 3 ? b.own_begin : 0;
    const int64_t hi_all = options_.stage == 3 ? b.own_end : b.numel;
    b.ForEachSegment(lo_all, hi_all, [&](size_t i, int64_t lo, int64_t hi) {
      out.push_back(Span{&b.spec.params[i], bi, static_cast<int>(i), lo - b.offsets[i], hi - b.offsets[i],
                         b.param_at(lo), nullptr, nullptr});
    });
  }
  return out;
}

std::vector<ZeroOptimizer::Span> ZeroOptimizer::HeldStateSpans() {
  std::vector<Span> out;
  for (int bi = 0; bi < num_buckets(); ++bi) {
    Bucket& b = *buckets_[bi];
    b.ForEachSegment(b.update_begin, b.update_end, [&](size_t i, int64_t lo, int64_t hi) {
      const int64_t s = lo - b.update_begin;
      out.push_back(Span{&b.spec.params[i], bi, static_cast<int>(i), lo - b.offsets[i], hi - b.offsets[i], nullptr,
                         b.exp_avg.data<float>() + s, b.exp_avg_sq.data<float>() + s});
    });
  }
  return out;
}

int64_t& ZeroOptimizer::param_step(int bucket, int index) { return buckets_.at(bucket)->steps.at(index); }

ZeroMemory ZeroOptimizer::Memory() const {
  ZeroMemory m;
  for (const auto& bp : buckets_) {
    const Bucket& b = *bp;
    m.parameters += options_.stage == 3 ? b.shard * 4 : b.padded * 4;
    m.gradients += options_.stage >= 2 ? b.shard * 4 : b.padded * 4;
    const int64_t state = 2 * (b.update_end - b.update_begin) * 4;
    (options_.offload_optimizer ? m.offloaded_optimizer_state : m.optimizer_state) += state;
  }
  return m;
}

ZeroCommBytes ZeroOptimizer::GradCommBytes() const {
  ZeroCommBytes out;
  for (const auto& b : buckets_) {
    out.sent += b->exact_bytes;
    out.fp32_equivalent += b->exact_bytes;
    if (b->compressed) {
      out.sent += b->compressed->bytes().sent;
      out.fp32_equivalent += b->compressed->bytes().fp32_equivalent;
    }
  }
  return out;
}

double ZeroOptimizer::comm_wait_seconds() const { return comm_wait_s_; }
double ZeroOptimizer::grad_comm_seconds() const { return grad_comm_s_; }
double ZeroOptimizer::grad_wait_seconds() const { return grad_wait_s_; }
void ZeroOptimizer::reset_comm_wait_seconds() { comm_wait_s_ = 0; }

}  // namespace tessera::parallel
