// Sequence operators: SequenceEmpty / Construct / Insert / At / Erase /
// Length, SplitToSequence and ConcatFromSequence.
#include <algorithm>

#include "tessera/onnx/ops/control/control_util.h"
#include "tessera/onnx/ops/kernel_util.h"

namespace tessera::onnx::control {
namespace {

// Input i as a sequence value; an error naming the node otherwise.
StatusOr<const Value*> SequenceInput(const OpContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return ctx.Error("input {} (a sequence) is required", i);
  const Value* v = &ctx.input(i);
  if (v->kind == Value::Kind::kOptional && v->optional) v = v->optional.get();
  if (v->kind != Value::Kind::kSequence) return ctx.Error("input {} must be a sequence, got {}", i, v->Describe());
  return v;
}

// The position input i (one integer) checked against [lo, hi] and made
// non-negative by adding n when negative; `dflt` when absent.
StatusOr<int64_t> PositionInput(const OpContext& ctx, size_t i, int64_t n, int64_t lo, int64_t hi, int64_t dflt) {
  if (!ctx.has_input(i)) return dflt;
  TESSERA_ASSIGN_OR_RETURN(Array p, ctx.tensor(i));
  if (!IsIntegerType(p.type()) || p.numel() != 1) {
    return ctx.Error("position must be one integer, got {}{}", ElemName(p.type()), p.ShapeString());
  }
  const int64_t pos = p.GetInt(0);
  if (pos < lo || pos > hi) return ctx.Error("position {} is out of range [{}, {}]", pos, lo, hi);
  return pos < 0 ? pos + n : pos;
}

ElemType ElemOfSequence(const Value& s) {
  if (s.sequence_elem != ElemType::kUndefined) return s.sequence_elem;
  return s.sequence.empty() ? ElemType::kUndefined : s.sequence[0].type();
}

}  // namespace

Status SequenceEmptyKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(int64_t dtype, ctx.node().Int("dtype", static_cast<int64_t>(ElemType::kFloat)));
  auto t = ElemTypeFromProto(static_cast<int32_t>(dtype));
  if (!t.ok() || *t == ElemType::kUndefined) return ctx.Error("dtype {} is not a tensor element type", dtype);
  ctx.set_value(0, Value::Sequence({}, *t));
  return Status::Ok();
}

Status SequenceConstructKernel(OpContext& ctx) {
  std::vector<Array> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
    if (!items.empty() && a.type() != items[0].type()) {
      return ctx.Error("input {} is {}, input 0 {}: sequence elements share one type", i, ElemName(a.type()),
                       ElemName(items[0].type()));
    }
    items.push_back(std::move(a));
  }
  if (items.empty()) return ctx.Error("at least one input is required");
  const ElemType t = items[0].type();
  ctx.set_value(0, Value::Sequence(std::move(items), t));
  return Status::Ok();
}

Status SequenceInsertKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Value* s, SequenceInput(ctx, 0));
  TESSERA_ASSIGN_OR_RETURN(Array t, ctx.tensor(1));
  const ElemType elem = ElemOfSequence(*s);
  if (elem != ElemType::kUndefined && t.type() != elem) {
    return ctx.Error("cannot insert a {} tensor into a sequence of {}", ElemName(t.type()), ElemName(elem));
  }
  const int64_t n = static_cast<int64_t>(s->sequence.size());
  TESSERA_ASSIGN_OR_RETURN(int64_t pos, PositionInput(ctx, 2, n, -n, n, n));
  std::vector<Array> items = s->sequence;
  items.insert(items.begin() + pos, std::move(t));
  const ElemType out_elem = items[0].type();
  ctx.set_value(0, Value::Sequence(std::move(items), out_elem));
  return Status::Ok();
}

Status SequenceAtKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Value* s, SequenceInput(ctx, 0));
  const int64_t n = static_cast<int64_t>(s->sequence.size());
  if (!ctx.has_input(1)) return ctx.Error("input 1 (position) is required");
  TESSERA_ASSIGN_OR_RETURN(int64_t pos, PositionInput(ctx, 1, n, -n, n - 1, 0));
  ctx.set_output(0, s->sequence[static_cast<size_t>(pos)]);
  return Status::Ok();
}

Status SequenceEraseKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Value* s, SequenceInput(ctx, 0));
  const int64_t n = static_cast<int64_t>(s->sequence.size());
  if (n == 0) return ctx.Error("cannot erase from an empty sequence");
  TESSERA_ASSIGN_OR_RETURN(int64_t pos, PositionInput(ctx, 1, n, -n, n - 1, n - 1));
  std::vector<Array> items = s->sequence;
  items.erase(items.begin() + pos);
  ctx.set_value(0, Value::Sequence(std::move(items), ElemOfSequence(*s)));
  return Status::Ok();
}

Status SequenceLengthKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Value* s, SequenceInput(ctx, 0));
  ctx.set_output(0, Array::Scalar<int64_t>(static_cast<int64_t>(s->sequence.size())));
  return Status::Ok();
}

// SplitToSequence(input, split?) with attributes axis (0) and keepdims (1).
Status SplitToSequenceKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t keepdims, ctx.node().Int("keepdims", 1));
  if (x.rank() == 0) return ctx.Error("input must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(x.rank())));
  const int64_t dim = x.dim(static_cast<size_t>(axis));
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    sizes.assign(static_cast<size_t>(dim), 1);
    squeeze = keepdims == 0;
  } else {
    TESSERA_ASSIGN_OR_RETURN(Array sp, ctx.tensor(1));
    if (!IsIntegerType(sp.type()) || sp.rank() > 1) {
      return ctx.Error("split must be an integer scalar or 1-D tensor, got {}{}", ElemName(sp.type()),
                       sp.ShapeString());
    }
    if (sp.rank() == 0) {
      const int64_t chunk = sp.GetInt(0);
      if (chunk <= 0) return ctx.Error("split size {} must be positive", chunk);
      for (int64_t at = 0; at < dim; at += chunk) sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = sp.ToInts();
      int64_t sum = 0;
      for (int64_t s : sizes) {
        if (s < 0 || s > dim) return ctx.Error("split size {} is out of range for dimension {}", s, dim);
        sum += s;
      }
      if (sum != dim) return ctx.Error("split sizes sum to {}, the axis has {}", sum, dim);
    }
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  std::vector<Array> items;
  int64_t start = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = x.shape();
    shape[static_cast<size_t>(axis)] = s;
    Array part(x.type(), shape);
    for (int64_t o = 0; o < outer; ++o) CopyElems(x, (o * dim + start) * inner, part, o * s * inner, s * inner);
    if (squeeze) {
      shape.erase(shape.begin() + axis);
      part = part.Reshaped(shape);
    }
    items.push_back(std::move(part));
    start += s;
  }
  ctx.set_value(0, Value::Sequence(std::move(items), x.type()));
  return Status::Ok();
}

// ConcatFromSequence(input_sequence) with attributes axis and new_axis (0).
Status ConcatFromSequenceKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Value* s, SequenceInput(ctx, 0));
  if (!ctx.node().Has("axis")) return ctx.Error("attribute 'axis' is required");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t new_axis, ctx.node().Int("new_axis", 0));
  if (s->sequence.empty()) return ctx.Error("the input sequence is empty");
  const int64_t rank = static_cast<int64_t>(s->sequence[0].rank());
  if (new_axis != 0) {
    TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank + 1));
    TESSERA_ASSIGN_OR_RETURN(Array out, Stack(ctx, s->sequence, axis, "sequence element"));
    ctx.set_output(0, std::move(out));
    return Status::Ok();
  }
  if (rank == 0) return ctx.Error("cannot concatenate scalars without new_axis");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank));
  TESSERA_ASSIGN_OR_RETURN(Array out, ConcatAxis(ctx, s->sequence, axis, "sequence element"));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx::control
