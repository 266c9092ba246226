#include "tessera/parallel/tensor_parallel/collectives.h"

#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/graph/apply.h"

namespace tessera::parallel {
namespace {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;
using Ins = std::vector<Tensor>;

void CheckFloating(const Tensor& x, std::string_view op) {
  TESSERA_OP_CHECK(x.defined() && IsFloating(x.dtype()), "{}: needs a defined floating tensor, got {}", op,
                   x.defined() ? DTypeName(x.dtype()) : std::string_view("undefined"));
}

int CheckAxis(const Tensor& x, int axis, std::string_view op) {
  TESSERA_OP_CHECK(axis >= -x.dim() && axis < x.dim(), "{}: axis {} out of range for shape {}", op, axis,
                   ShapeString(x.shape()));
  return axis < 0 ? axis + x.dim() : axis;
}

// Normalized axis whose size divides by `parts` (split along it).
int CheckSplitAxis(const Tensor& x, int axis, int parts, std::string_view op) {
  const int a = CheckAxis(x, axis, op);
  TESSERA_OP_CHECK(x.size(a) % parts == 0, "{}: size {} of axis {} (shape {}) is not divisible by tp = {}", op,
                   x.size(a), a, ShapeString(x.shape()), parts);
  return a;
}

// Printable attributes of a collective over `group` (and along `axis`):
// the group's identity, rank and size.
std::string GroupAttrs(const comm::Communicator* group, int axis = -1) {
  std::string attrs = fmt::format("group={} rank={} size={}", fmt::ptr(group), group->rank(), group->size());
  if (axis >= 0) attrs += fmt::format(" axis={}", axis);
  return attrs;
}

}  // namespace

comm::DataType CommDataType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return comm::DataType::kFloat32;
    case DType::kBF16: return comm::DataType::kBFloat16;
    case DType::kF16: return comm::DataType::kFloat16;
    case DType::kI32: return comm::DataType::kInt32;
    case DType::kI64: return comm::DataType::kInt64;
  }
  return comm::DataType::kFloat32;
}

void ThrowIfFailed(const Status& status, std::string_view op) {
  if (!status.ok()) throw OpError(fmt::format("{}: {}", op, status.ToString()));
}

Tensor TensorAllReduce(const Tensor& x, comm::Communicator* group) {
  Tensor out = x.Clone();
  if (IsTrivialGroup(group)) return out;
  ThrowIfFailed(group->AllReduce(out.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                                 CommDataType(out.dtype()), comm::ReduceOp::kSum),
                "all_reduce");
  return out;
}

Tensor TensorAllGather(const Tensor& x, int axis, comm::Communicator* group) {
  const int a = CheckAxis(x, axis, "all_gather");
  if (IsTrivialGroup(group)) return x.Clone();
  const int p = group->size();
  Tensor xs = x.Contiguous();
  Shape stacked = xs.shape();
  stacked.insert(stacked.begin(), p);
  Tensor buf = Tensor::Empty(stacked, xs.dtype());
  ThrowIfFailed(
      group->AllGather(xs.raw_data(), buf.raw_data(), static_cast<size_t>(xs.numel()), CommDataType(xs.dtype())),
      "all_gather");
  Shape out_shape = xs.shape();
  out_shape[a] *= p;
  if (a == 0) return buf.View(out_shape);
  // [p, s0, .., s_a, ..] -> [s0, .., p, s_a, ..]: rank r's block lands at r·s_a.
  std::vector<int> order;
  for (int d = 1; d <= a; ++d) order.push_back(d);
  order.push_back(0);
  for (int d = a + 1; d <= xs.dim(); ++d) order.push_back(d);
  return buf.Permute(order).Contiguous().View(out_shape);
}

Tensor TensorReduceScatter(const Tensor& x, int axis, comm::Communicator* group) {
  const int p = GroupSize(group);
  const int a = CheckSplitAxis(x, axis, p, "reduce_scatter");
  if (p == 1) return x.Clone();
  Shape out_shape = x.shape();
  out_shape[a] /= p;
  Tensor send = x.Contiguous();
  if (a != 0) {
    // [.., s_a, ..] -> [.., p, s_a/p, ..] -> [p, .., s_a/p, ..]: block r contiguous.
    Shape split = x.shape();
    split[a] /= p;
    split.insert(split.begin() + a, p);
    std::vector<int> order{a};
    for (int d = 0; d < static_cast<int>(split.size()); ++d) {
      if (d != a) order.push_back(d);
    }
    send = send.View(split).Permute(order).Contiguous();
  }
  Tensor out = Tensor::Empty(out_shape, x.dtype());
  ThrowIfFailed(group->ReduceScatter(send.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                                     CommDataType(x.dtype()), comm::ReduceOp::kSum),
                "reduce_scatter");
  return out;
}

Tensor TensorShard(const Tensor& x, int axis, int rank, int size) {
  const int a = CheckSplitAxis(x, axis, size, "shard");
  const int64_t c = x.size(a) / size;
  return x.Slice(a, rank * c, (rank + 1) * c).Clone();
}

// The differentiable collectives below are one Apply each (graph/apply.h):
// they talk to the other ranks of `tp` (forward, backward or both), so they
// are communication nodes with side effects (never removed, merged or
// folded in graph mode). The forward/backward functions capture only the
// axis and the group.

Tensor CopyToTensorParallel(const Tensor& x, comm::Communicator* tp) {
  CheckFloating(x, "CopyToTensorParallel");
  if (IsTrivialGroup(tp)) return x;
  return graph::Apply1(
      {"CopyToTensorParallel", graph::OpKind::kCommunication, GroupAttrs(tp), graph::kSaveNone, graph::kSaveNone, -1,
       true},
      {x}, [](const Ins& in) { return Ins{graph::AliasOf(in[0])}; },
      [tp](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{TensorAllReduce(g[0], tp)}; });
}

Tensor ReduceFromTensorParallel(const Tensor& x, comm::Communicator* tp) {
  CheckFloating(x, "ReduceFromTensorParallel");
  if (IsTrivialGroup(tp)) return x;
  return graph::Apply1(
      {"ReduceFromTensorParallel", graph::OpKind::kCommunication, GroupAttrs(tp), graph::kSaveNone, graph::kSaveNone,
       -1, true},
      {x}, [tp](const Ins& in) { return Ins{TensorAllReduce(in[0], tp)}; },
      [](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{g[0]}; });
}

Tensor GatherFromTensorParallel(const Tensor& x, int axis, comm::Communicator* tp) {
  CheckFloating(x, "GatherFromTensorParallel");
  if (IsTrivialGroup(tp)) return x;
  const int a = CheckAxis(x, axis, "GatherFromTensorParallel");
  return graph::Apply1(
      {"GatherFromTensorParallel", graph::OpKind::kCommunication, GroupAttrs(tp, a), graph::kSaveNone, graph::kSaveNone,
       -1, true},
      {x}, [a, tp](const Ins& in) { return Ins{TensorAllGather(in[0], a, tp)}; },
      [a, tp](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{TensorShard(g[0], a, tp->rank(), tp->size())};
      });
}

Tensor ScatterToTensorParallel(const Tensor& x, int axis, comm::Communicator* tp) {
  CheckFloating(x, "ScatterToTensorParallel");
  if (IsTrivialGroup(tp)) return x;
  const int a = CheckSplitAxis(x, axis, tp->size(), "ScatterToTensorParallel");
  return graph::Apply1(
      {"ScatterToTensorParallel", graph::OpKind::kCommunication, GroupAttrs(tp, a), graph::kSaveNone, graph::kSaveNone,
       -1, true},
      {x}, [a, tp](const Ins& in) { return Ins{TensorShard(in[0], a, tp->rank(), tp->size())}; },
      [a, tp](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{TensorAllGather(g[0], a, tp)}; });
}

Tensor AllGatherSequence(const Tensor& x, int axis, comm::Communicator* tp) {
  CheckFloating(x, "AllGatherSequence");
  if (IsTrivialGroup(tp)) return x;
  const int a = CheckAxis(x, axis, "AllGatherSequence");
  return graph::Apply1(
      {"AllGatherSequence", graph::OpKind::kCommunication, GroupAttrs(tp, a), graph::kSaveNone, graph::kSaveNone, -1,
       true},
      {x}, [a, tp](const Ins& in) { return Ins{TensorAllGather(in[0], a, tp)}; },
      [a, tp](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{TensorReduceScatter(g[0], a, tp)};
      });
}

Tensor ReduceScatterSequence(const Tensor& x, int axis, comm::Communicator* tp) {
  CheckFloating(x, "ReduceScatterSequence");
  if (IsTrivialGroup(tp)) return x;
  const int a = CheckSplitAxis(x, axis, tp->size(), "ReduceScatterSequence");
  return graph::Apply1(
      {"ReduceScatterSequence", graph::OpKind::kCommunication, GroupAttrs(tp, a), graph::kSaveNone, graph::kSaveNone,
       -1, true},
      {x}, [a, tp](const Ins& in) { return Ins{TensorReduceScatter(in[0], a, tp)}; },
      [a, tp](const Grads& g, const Ins&, const Ins&, const Needs&) { return Grads{TensorAllGather(g[0], a, tp)}; });
}

void AllReduceGradients(const std::vector<Tensor>& params, comm::Communicator* group) {
  if (IsTrivialGroup(group)) return;
  // One all-reduce per gradient dtype: the gradients are packed into a flat
  // buffer (in list order, identical on every rank) and unpacked after.
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    Tensor handle = p;
    Tensor g = handle.grad();
    if (!g.defined()) {
      g = Tensor::Zeros(p.shape(), p.dtype());
      handle.set_grad(g);
    }
    TESSERA_OP_CHECK(IsFloating(g.dtype()), "AllReduceGradients: gradient of '{}' is {}", p.name(),
                     DTypeName(g.dtype()));
    grads.push_back(g);
  }
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    int64_t total = 0;
    for (const Tensor& g : grads) total += g.dtype() == dtype ? g.numel() : 0;
    if (total == 0) continue;
    Tensor flat = Tensor::Empty({total}, dtype);
    int64_t at = 0;
    for (const Tensor& g : grads) {
      if (g.dtype() != dtype) continue;
      flat.Slice(0, at, at + g.numel()).View(g.shape()).CopyFrom(g);
      at += g.numel();
    }
    ThrowIfFailed(group->AllReduce(flat.raw_data(), flat.raw_data(), static_cast<size_t>(total), CommDataType(dtype),
                                   comm::ReduceOp::kSum),
                  "AllReduceGradients");
    at = 0;
    for (Tensor& g : grads) {
      if (g.dtype() != dtype) continue;
      g.CopyFrom(flat.Slice(0, at, at + g.numel()).View(g.shape()));
      at += g.numel();
    }
  }
}

}  // namespace tessera::parallel
