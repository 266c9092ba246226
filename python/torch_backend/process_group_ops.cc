// ProcessGroupTessera: all-gather, gather, scatter, reduce-scatter and
// all-to-all (see process_group.h). Data moves as bytes (every dtype moves
// bitwise); contiguous single-tensor layouts are used in place.
#include <numeric>
#include <utility>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "python/torch_backend/process_group.h"
#include "python/torch_backend/tensor_util.h"

namespace tessera::torch_backend {

namespace {

using ::c10d::OpType;
constexpr comm::DataType kByte = comm::DataType::kUint8;

std::string Elements(const at::Tensor& t) {
  return fmt::format("{} {} elements", t.numel(), c10::toString(t.scalar_type()));
}

}  // namespace

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const ::c10d::AllgatherOptions&) {
  at::Tensor& in = Single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1, "tessera backend: all_gather takes one output list per process");
  CheckList(outputs[0], size_, in, "all_gather");
  at::Tensor src = in.contiguous();
  at::Tensor flat = at::empty({size_ * src.numel()}, src.options());
  comm::Work work = coll_->AllGatherAsync(Ptr(src), Ptr(flat), Bytes(src), kByte);
  std::vector<at::Tensor> outs = outputs[0];
  auto finish = [src, flat, outs]() mutable { Unflatten(flat, outs); };
  return MakeWork(OpType::ALLGATHER, "all_gather of " + Elements(in), std::move(work), std::move(finish),
                  outputs[0]);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                      const ::c10d::AllgatherOptions&) {
  CheckCpu(input, "all_gather_into_tensor");
  CheckCpu(output, "all_gather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tessera backend: all_gather_into_tensor: dtypes differ");
  TORCH_CHECK(output.numel() == size_ * input.numel(), "tessera backend: all_gather_into_tensor: output has ",
              output.numel(), " elements, expected ", size_, " x ", input.numel());
  at::Tensor src = input.contiguous();
  at::Tensor dst = ContiguousOrCopy(output);
  comm::Work work = coll_->AllGatherAsync(Ptr(src), Ptr(dst), Bytes(src), kByte);
  at::Tensor out = output;
  auto finish = [src, dst, out]() mutable {
    if (!dst.is_same(out)) out.copy_(dst);
  };
  return MakeWork(OpType::_ALLGATHER_BASE, "all_gather_into_tensor of " + Elements(input), std::move(work),
                  std::move(finish), {output});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::allgather_coalesced(std::vector<std::vector<at::Tensor>>&,
                                                                          std::vector<at::Tensor>&,
                                                                          const ::c10d::AllgatherOptions&) {
  TORCH_CHECK(false, "tessera backend: all_gather_coalesced is not supported (use all_gather_into_tensor of a "
                     "flattened tensor)");
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const ::c10d::GatherOptions& opts) {
  at::Tensor& in = Single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "tessera backend: gather root ", root, " out of range");
  at::Tensor src = in.contiguous();
  at::Tensor flat;
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1, "tessera backend: gather takes one output list at the root");
    CheckList(outputs[0], size_, in, "gather");
    outs = outputs[0];
    flat = at::empty({size_ * src.numel()}, src.options());
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "tessera backend: gather: only the root passes an output list");
  }
  comm::Work work = coll_->GatherAsync(Ptr(src), rank_ == root ? Ptr(flat) : nullptr, Bytes(src), kByte, root);
  auto finish = [src, flat, outs]() mutable {
    if (flat.defined()) Unflatten(flat, outs);
  };
  return MakeWork(OpType::GATHER, fmt::format("gather to rank {} of {}", root, Elements(in)), std::move(work),
                  std::move(finish), outs);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::scatter(std::vector<at::Tensor>& outputs,
                                                              std::vector<std::vector<at::Tensor>>& inputs,
                                                              const ::c10d::ScatterOptions& opts) {
  at::Tensor& out = Single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "tessera backend: scatter root ", root, " out of range");
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, "tessera backend: scatter takes one input list at the root");
    CheckList(inputs[0], size_, out, "scatter");
    flat = Flatten(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "tessera backend: scatter: only the root passes an input list");
  }
  at::Tensor dst = ContiguousOrCopy(out);
  comm::Work work = coll_->ScatterAsync(rank_ == root ? Ptr(flat) : nullptr, Ptr(dst), Bytes(dst), kByte, root);
  auto finish = [flat, dst, out]() mutable {
    if (!dst.is_same(out)) out.copy_(dst);
  };
  return MakeWork(OpType::SCATTER, fmt::format("scatter from rank {} of {}", root, Elements(out)), std::move(work),
                  std::move(finish), {out});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                                     const ::c10d::ReduceScatterOptions& opts) {
  at::Tensor& out = Single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "tessera backend: reduce_scatter takes one input list per process");
  CheckList(inputs[0], size_, out, "reduce_scatter");
  at::Tensor flat = Flatten(inputs[0]);
  return _reduce_scatter_base(out, flat, opts);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                           const ::c10d::ReduceScatterOptions& opts) {
  CheckCpu(input, "reduce_scatter_tensor");
  CheckCpu(output, "reduce_scatter_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tessera backend: reduce_scatter_tensor: dtypes differ");
  TORCH_CHECK(input.numel() == size_ * output.numel(), "tessera backend: reduce_scatter_tensor: input has ",
              input.numel(), " elements, expected ", size_, " x ", output.numel());
  CheckReduceOp(opts.reduceOp, input.scalar_type(), "reduce_scatter");
  at::Tensor src = input.contiguous();
  at::Tensor out = output;
  auto op = ToCommOp(opts.reduceOp, input.scalar_type());
  if (!op) {
    // All-gather every rank's whole input, fold in rank order, keep our block.
    at::Tensor gathered = at::empty({size_, src.numel()}, src.options());
    comm::Work work = coll_->AllGatherAsync(Ptr(src), Ptr(gathered), Bytes(src), kByte);
    const int rank = rank_, size = size_;
    const ::c10d::ReduceOp rop = opts.reduceOp;
    auto finish = [src, gathered, out, rank, size, rop]() mutable {
      const int64_t n = out.numel();
      at::Tensor acc = gathered[0].narrow(0, rank * n, n).clone();
      for (int r = 1; r < size; ++r) FoldInto(acc, gathered[r].narrow(0, rank * n, n), rop);
      if (rop.op_ == ::c10d::ReduceOp::AVG) acc.div_(size);
      out.copy_(acc.view(out.sizes()));
    };
    return MakeWork(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter (all-gather and local fold) of " + Elements(input),
                    std::move(work), std::move(finish), {output});
  }
  at::Tensor dst = ContiguousOrCopy(output);
  comm::Work work =
      coll_->ReduceScatterAsync(Ptr(src), Ptr(dst), dst.numel(), *ToCommType(dst.scalar_type()), *op);
  auto finish = [src, dst, out]() mutable {
    if (!dst.is_same(out)) out.copy_(dst);
  };
  return MakeWork(OpType::_REDUCE_SCATTER_BASE,
                  fmt::format("reduce_scatter {} of {}", comm::ReduceOpName(*op), Elements(input)), std::move(work),
                  std::move(finish), {output});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                    std::vector<int64_t>& output_split_sizes,
                                                                    std::vector<int64_t>& input_split_sizes,
                                                                    const ::c10d::AllToAllOptions&) {
  CheckCpu(input, "all_to_all_single");
  CheckCpu(output, "all_to_all_single");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tessera backend: all_to_all_single: dtypes differ");
  at::Tensor src = input.contiguous();
  at::Tensor dst = ContiguousOrCopy(output);
  at::Tensor out = output;
  auto finish = [src, dst, out]() mutable {
    if (!dst.is_same(out)) out.copy_(dst);
  };
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0,
                "tessera backend: all_to_all_single without split sizes needs equal input and output sizes "
                "divisible by the group size (",
                input.numel(), ", ", output.numel(), ", ", size_, ")");
    comm::Work work = coll_->AllToAllAsync(Ptr(src), Ptr(dst), Bytes(src) / size_, kByte);
    return MakeWork(OpType::ALLTOALL_BASE, "all_to_all_single of " + Elements(input), std::move(work),
                    std::move(finish), {output});
  }
  // Split sizes count rows (dim 0); no list means equal splits.
  auto layout = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which,
                    std::vector<size_t>* counts, std::vector<size_t>* displs) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const size_t row_bytes = rows == 0 ? 0 : Bytes(t) / static_cast<size_t>(rows);
    std::vector<int64_t> s = splits;
    if (s.empty()) {
      TORCH_CHECK(rows % size_ == 0, "tessera backend: all_to_all_single: ", which, " has ", rows,
                  " rows, not divisible by the group size ", size_);
      s.assign(size_, rows / size_);
    }
    TORCH_CHECK(static_cast<int>(s.size()) == size_, "tessera backend: all_to_all_single: ", s.size(), " ", which,
                " split sizes for a group of ", size_);
    TORCH_CHECK(std::accumulate(s.begin(), s.end(), int64_t{0}) == rows, "tessera backend: all_to_all_single: ",
                which, " split sizes do not add up to its ", rows, " rows");
    size_t offset = 0;
    for (int64_t rows_k : s) {
      TORCH_CHECK(rows_k >= 0, "tessera backend: all_to_all_single: negative split size");
      counts->push_back(static_cast<size_t>(rows_k) * row_bytes);
      displs->push_back(offset);
      offset += counts->back();
    }
  };
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  layout(src, input_split_sizes, "input", &send_counts, &send_displs);
  layout(dst, output_split_sizes, "output", &recv_counts, &recv_displs);
  comm::Work work = coll_->AllToAllVAsync(Ptr(src), std::move(send_counts), std::move(send_displs), Ptr(dst),
                                          std::move(recv_counts), std::move(recv_displs), kByte);
  return MakeWork(OpType::ALLTOALL_BASE, "all_to_all_single (split sizes) of " + Elements(input), std::move(work),
                  std::move(finish), {output});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::alltoall(std::vector<at::Tensor>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const ::c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "tessera backend: all_to_all takes ", size_, " input and output tensors, got ", inputs.size(), " and ",
              outputs.size());
  for (const std::vector<at::Tensor>* list : {&inputs, &outputs}) {
    for (const at::Tensor& t : *list) {
      CheckCpu(t, "all_to_all");
      TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "tessera backend: all_to_all needs one dtype");
    }
  }
  at::Tensor src = Flatten(inputs);
  int64_t total = 0;
  for (const at::Tensor& t : outputs) total += t.numel();
  at::Tensor dst = at::empty({total}, src.options());
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  size_t offset = 0;
  for (const at::Tensor& t : inputs) {
    send_counts.push_back(Bytes(t));
    send_displs.push_back(offset);
    offset += Bytes(t);
  }
  offset = 0;
  for (const at::Tensor& t : outputs) {
    recv_counts.push_back(Bytes(t));
    recv_displs.push_back(offset);
    offset += Bytes(t);
  }
  comm::Work work = coll_->AllToAllVAsync(Ptr(src), std::move(send_counts), std::move(send_displs), Ptr(dst),
                                          std::move(recv_counts), std::move(recv_displs), kByte);
  std::vector<at::Tensor> outs = outputs;
  auto finish = [src, dst, outs]() mutable { Unflatten(dst, outs); };
  return MakeWork(OpType::ALLTOALL, fmt::format("all_to_all of {} tensors", inputs.size()), std::move(work),
                  std::move(finish), outputs);
}

}  // namespace tessera::torch_backend
