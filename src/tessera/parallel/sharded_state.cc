#include "tessera/parallel/sharded_state.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include <fmt/format.h>

namespace tessera::parallel {
namespace {

namespace ck = checkpoint;

constexpr char kModel[] = "model/";
constexpr char kOptim[] = "optim/";
constexpr char kGlobalSteps[] = "optim/optimizer.steps";

int64_t Volume(std::span<const int64_t> shape) {
  int64_t v = 1;
  for (int64_t d : shape) v *= d;
  return v;
}

// The global tensor's shape and this rank's offset in it for parameter p.
std::vector<int64_t> GlobalShape(const ZeroParam& p) {
  if (!p.global_shape.empty()) return p.global_shape;
  return std::vector<int64_t>(p.param.shape().begin(), p.param.shape().end());
}

std::vector<int64_t> GlobalOffset(const ZeroParam& p, const std::vector<int64_t>& local_offset) {
  std::vector<int64_t> out = local_offset;
  if (!p.global_offset.empty()) {
    for (size_t a = 0; a < out.size(); ++a) out[a] += p.global_offset[a];
  }
  return out;
}

// Whether this rank's tensor of p starts at the global tensor's origin.
bool HoldsGlobalOrigin(const ZeroParam& p) {
  return std::all_of(p.global_offset.begin(), p.global_offset.end(), [](int64_t o) { return o == 0; });
}

// Calls fn(box in global coordinates, pointer to its first element) for
// each box of the span's element range of `data` (which points at element
// span.begin).
void ForEachGlobalBox(const ZeroOptimizer::Span& span, float* data,
                      const std::function<void(const std::vector<int64_t>&, const std::vector<int64_t>&, float*)>& fn) {
  const Shape& local = span.param->param.shape();
  const std::vector<int64_t> shape(local.begin(), local.end());
  for (const ElementBox& box : RangeToBoxes(shape, span.begin, span.end)) {
    fn(GlobalOffset(*span.param, box.offset), box.shape, data != nullptr ? data + (box.first - span.begin) : nullptr);
  }
}

}  // namespace

std::vector<ElementBox> RangeToBoxes(std::span<const int64_t> shape, int64_t begin, int64_t end) {
  std::vector<ElementBox> out;
  if (begin >= end) return out;
  if (shape.empty()) {
    out.push_back(ElementBox{{}, {}, 0});
    return out;
  }
  const std::span<const int64_t> rest = shape.subspan(1);
  const int64_t inner = Volume(rest);
  // Boxes of row `row`'s elements [lo, hi) (hi - lo < inner, or a lone row).
  auto within_row = [&](int64_t row, int64_t lo, int64_t hi) {
    for (ElementBox& sub : RangeToBoxes(rest, lo, hi)) {
      sub.offset.insert(sub.offset.begin(), row);
      sub.shape.insert(sub.shape.begin(), 1);
      sub.first += row * inner;
      out.push_back(std::move(sub));
    }
  };
  if (begin % inner != 0) {  // a partial first row
    const int64_t row = begin / inner;
    const int64_t row_end = std::min(end, (row + 1) * inner);
    within_row(row, begin - row * inner, row_end - row * inner);
    begin = row_end;
  }
  if (end - begin >= inner) {  // whole rows
    const int64_t first_row = begin / inner, last_row = end / inner;
    ElementBox box;
    box.offset.assign(shape.size(), 0);
    box.offset[0] = first_row;
    box.shape.assign(shape.begin(), shape.end());
    box.shape[0] = last_row - first_row;
    box.first = first_row * inner;
    out.push_back(std::move(box));
    begin = last_row * inner;
  }
  if (begin < end) within_row(begin / inner, 0, end - begin);  // a partial last row
  return out;
}

StateSnapshot SnapshotShardedState(ZeroOptimizer& zero, bool with_global) {
  StateSnapshot snap;
  std::vector<ZeroOptimizer::Span> spans = zero.OwnedSpans();
  std::erase_if(spans, [](const ZeroOptimizer::Span& s) { return !s.param->count_in_norm || s.begin >= s.end; });
  int64_t elements = 0, ints = with_global ? 1 : 0;
  for (const auto& s : spans) {
    elements += 3 * (s.end - s.begin);
    ints += s.begin == 0 && HoldsGlobalOrigin(*s.param) ? 1 : 0;
  }
  // Reserved up front: the slices point into these buffers.
  snap.values.resize(elements);
  snap.ints.reserve(ints);
  float* cursor = snap.values.data();
  for (const auto& s : spans) {
    const std::string& name = s.param->name;
    const std::vector<int64_t> global = GlobalShape(*s.param);
    const int64_t n = s.end - s.begin;
    const std::pair<std::string, const float*> parts[] = {
        {kModel + name, s.value}, {kOptim + name + ".exp_avg", s.exp_avg}, {kOptim + name + ".exp_avg_sq", s.exp_avg_sq}};
    for (const auto& [tensor, src] : parts) {
      std::memcpy(cursor, src, n * sizeof(float));
      ForEachGlobalBox(s, cursor, [&](const std::vector<int64_t>& offset, const std::vector<int64_t>& shape, float* p) {
        snap.slices.push_back(ck::SliceToSave{tensor, ck::StorageDtype::kF32, global, offset, shape, p, 0});
      });
      cursor += n;
    }
    if (s.begin == 0 && HoldsGlobalOrigin(*s.param)) {  // the holder of element 0 saves the step count
      snap.ints.push_back(zero.param_step(s.bucket, s.index));
      snap.slices.push_back(
          ck::SliceToSave{kOptim + name + ".step", ck::StorageDtype::kI64, {}, {}, {}, &snap.ints.back(), 0});
    }
  }
  if (with_global) {
    snap.ints.push_back(zero.steps_taken());
    snap.slices.push_back(ck::SliceToSave{kGlobalSteps, ck::StorageDtype::kI64, {}, {}, {}, &snap.ints.back(), 0});
  }
  return snap;
}

Status LoadShardedState(const ck::CheckpointReader& reader, ZeroOptimizer& zero) {
  auto where = [&] { return fmt::format("loading checkpoint '{}'", reader.dir().string()); };
  // Every tensor this rank reads must exist as fp32 of the full model's shape.
  auto check = [&](const std::string& tensor, const ZeroParam& p, ck::StorageDtype dtype,
                   const std::vector<int64_t>& shape) -> Status {
    const ck::GlobalTensor* t = reader.FindTensor(tensor);
    if (t == nullptr) {
      return NotFound("{}: no tensor '{}' (a checkpoint of another model, or not a trainer checkpoint)", where(),
                      tensor);
    }
    if (t->dtype != dtype || t->shape != shape) {
      return InvalidArgument("{}: tensor '{}' is {} [{}] but parameter '{}' needs {} [{}] (another model config?)",
                             where(), tensor, ck::StorageDtypeName(t->dtype), fmt::join(t->shape, ", "), p.name,
                             ck::StorageDtypeName(dtype), fmt::join(shape, ", "));
    }
    return Status::Ok();
  };
  // Every box this rank holds, checked, then read at once (ReadMany: the
  // disk reads of one shard overlap the hashing and copying of another).
  std::vector<ck::CheckpointReader::ReadRequest> reads;
  auto want = [&](const std::string& tensor, const ZeroOptimizer::Span& s, float* data) -> Status {
    TESSERA_RETURN_IF_ERROR(check(tensor, *s.param, ck::StorageDtype::kF32, GlobalShape(*s.param)));
    ForEachGlobalBox(s, data, [&](const std::vector<int64_t>& offset, const std::vector<int64_t>& shape, float* p) {
      reads.push_back({tensor, offset, shape,
                       std::span<std::byte>(reinterpret_cast<std::byte*>(p), Volume(shape) * sizeof(float))});
    });
    return Status::Ok();
  };
  for (const ZeroOptimizer::Span& s : zero.HeldValueSpans()) {
    TESSERA_RETURN_IF_ERROR(want(kModel + s.param->name, s, s.value));
  }
  for (const ZeroOptimizer::Span& s : zero.HeldStateSpans()) {
    TESSERA_RETURN_IF_ERROR(want(kOptim + s.param->name + ".exp_avg", s, s.exp_avg));
    TESSERA_RETURN_IF_ERROR(want(kOptim + s.param->name + ".exp_avg_sq", s, s.exp_avg_sq));
  }
  TESSERA_RETURN_IF_ERROR(reader.ReadMany(reads));
  // Step counts of every parameter held here at all.
  auto read_int = [&](const std::string& tensor, const ZeroParam& p, int64_t* out) -> Status {
    TESSERA_RETURN_IF_ERROR(check(tensor, p, ck::StorageDtype::kI64, {}));
    return reader.ReadSliceInto(tensor, {}, {}, std::span<std::byte>(reinterpret_cast<std::byte*>(out), 8));
  };
  std::vector<ZeroOptimizer::Span> all = zero.HeldValueSpans();
  for (const ZeroOptimizer::Span& s : zero.HeldStateSpans()) all.push_back(s);
  for (const ZeroOptimizer::Span& s : all) {
    TESSERA_RETURN_IF_ERROR(read_int(kOptim + s.param->name + ".step", *s.param, &zero.param_step(s.bucket, s.index)));
  }
  const ck::GlobalTensor* global = reader.FindTensor(kGlobalSteps);
  if (global == nullptr || global->dtype != ck::StorageDtype::kI64 || !global->shape.empty()) {
    return NotFound("{}: no I64 scalar '{}' (not a trainer checkpoint)", where(), kGlobalSteps);
  }
  int64_t steps = 0;
  TESSERA_RETURN_IF_ERROR(
      reader.ReadSliceInto(kGlobalSteps, {}, {}, std::span<std::byte>(reinterpret_cast<std::byte*>(&steps), 8)));
  zero.set_steps_taken(steps);
  return Status::Ok();
}

}  // namespace tessera::parallel
