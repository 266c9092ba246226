// ProcessGroupTessera: creation, the reductions, broadcast, barrier and
// point-to-point (see process_group.h); the data-movement collectives are
// in process_group_ops.cc.
#include "python/torch_backend/process_group.h"

#include <stdexcept>
#include <utility>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "python/torch_backend/c10d_store.h"
#include "python/torch_backend/tensor_util.h"

namespace tessera::torch_backend {

namespace {

using ::c10d::OpType;

// Collectives up to this size run on the calling thread (see allreduce).
constexpr size_t kInlineBytes = 64 << 10;

std::unique_ptr<comm::Communicator> CreateComm(std::shared_ptr<comm::Store> store, int rank, int size,
                                               std::chrono::milliseconds timeout, const std::string& name) {
  comm::CommOptions options;
  options.name = name;
  options.timeout = timeout;
  auto comm = comm::Communicator::Create(std::move(store), rank, size, options);
  if (!comm.ok()) {
    throw std::runtime_error(fmt::format("tessera backend: rank {}/{} could not create its '{}' communicator: {}",
                                         rank, size, name, comm.status().ToString()));
  }
  return std::move(*comm);
}

}  // namespace

ProcessGroupTessera::ProcessGroupTessera(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                                         std::chrono::milliseconds timeout)
    : ::c10d::ProcessGroup(rank, size), timeout_(timeout) {
  TORCH_CHECK(timeout.count() > 0, "tessera backend: the process group timeout must be positive");
  auto adapter = std::make_shared<C10dStore>(store, fmt::format("(the group's c10d store, rank {}/{})", rank, size));
  coll_ = CreateComm(adapter, rank, size, timeout, "torch-coll");
  up_ = CreateComm(adapter, rank, size, timeout, "torch-p2p-up");
  down_ = CreateComm(adapter, rank, size, timeout, "torch-p2p-down");
  completer_ = std::make_unique<CompletionThread>();
}

ProcessGroupTessera::~ProcessGroupTessera() {
  completer_.reset();  // completes what it holds while the communicators live
}

std::string ProcessGroupTessera::Describe() const { return coll_->Describe(); }

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::MakeWork(OpType type, std::string what, comm::Work work,
                                                               TesseraWork::FinishFn finish,
                                                               std::vector<at::Tensor> outputs) {
  completer_->ReleaseRetired();
  return c10::make_intrusive<TesseraWork>(rank_, type, fmt::format("{} (rank {}/{})", what, rank_, size_),
                                          std::move(work), std::move(finish), std::move(outputs), timeout_,
                                          completer_.get());
}

comm::Communicator& ProcessGroupTessera::P2pComm(int peer, bool sending) const {
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "tessera backend: peer ", peer,
              " is not another rank of this group of ", size_);
  // up_ carries every transfer from a lower to a higher rank.
  const bool upward = sending ? peer > rank_ : peer < rank_;
  return upward ? *up_ : *down_;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::FoldingAllReduce(at::Tensor& tensor, ::c10d::ReduceOp op,
                                                                       int root, const char* what) {
  at::Tensor in = tensor.contiguous();
  at::Tensor gathered = at::empty({size_, in.numel()}, in.options());
  comm::Work work = coll_->AllGatherAsync(Ptr(in), Ptr(gathered), Bytes(in), comm::DataType::kUint8);
  const int rank = rank_, size = size_;
  auto finish = [tensor, in, gathered, op, root, rank, size]() mutable {
    if (root >= 0 && rank != root) return;
    at::Tensor acc = gathered[0].clone();
    for (int r = 1; r < size; ++r) FoldInto(acc, gathered[r], op);
    if (op.op_ == ::c10d::ReduceOp::AVG) acc.div_(size);
    tensor.copy_(acc.view(tensor.sizes()));
  };
  return MakeWork(root >= 0 ? OpType::REDUCE : OpType::ALLREDUCE,
                  fmt::format("{} of {} {} elements (all-gather and local fold)", what, in.numel(),
                              c10::toString(in.scalar_type())),
                  std::move(work), std::move(finish), {tensor});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::allreduce(std::vector<at::Tensor>& tensors,
                                                                const ::c10d::AllreduceOptions& opts) {
  at::Tensor& t = Single(tensors, "all_reduce");
  CheckReduceOp(opts.reduceOp, t.scalar_type(), "all_reduce");
  auto op = ToCommOp(opts.reduceOp, t.scalar_type());
  if (!op) return FoldingAllReduce(t, opts.reduceOp, -1, "all_reduce");
  at::Tensor buf = ContiguousOrCopy(t);
  const comm::DataType dtype = *ToCommType(t.scalar_type());
  // Small ones run on the calling thread when the communicator is idle
  // (queued behind pending ones otherwise): no hand-off to the progress
  // thread, which is most of a small all-reduce's latency.
  comm::Work work = Bytes(buf) <= kInlineBytes
                        ? comm::Work::Done(coll_->AllReduce(Ptr(buf), Ptr(buf), buf.numel(), dtype, *op))
                        : coll_->AllReduceAsync(Ptr(buf), Ptr(buf), buf.numel(), dtype, *op);
  TesseraWork::FinishFn finish;
  if (!buf.is_same(t)) finish = [t, buf]() mutable { t.copy_(buf); };
  return MakeWork(OpType::ALLREDUCE,
                  fmt::format("all_reduce {} of {} {} elements", comm::ReduceOpName(*op), t.numel(),
                              c10::toString(t.scalar_type())),
                  std::move(work), std::move(finish), {t});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "tessera backend: all_reduce_coalesced of no tensors");
  for (const at::Tensor& t : tensors) {
    CheckCpu(t, "all_reduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "tessera backend: all_reduce_coalesced needs tensors of one dtype");
  }
  CheckReduceOp(opts.reduceOp, tensors[0].scalar_type(), "all_reduce_coalesced");
  auto op = ToCommOp(opts.reduceOp, tensors[0].scalar_type());
  TORCH_CHECK(op.has_value(), "tessera backend: all_reduce_coalesced supports SUM, PRODUCT, MIN, MAX, AVG of ",
              "float32/64, bf16, fp16, int8, uint8, int32, int64");
  at::Tensor flat = Flatten(tensors);
  comm::Work work =
      coll_->AllReduceAsync(Ptr(flat), Ptr(flat), flat.numel(), *ToCommType(flat.scalar_type()), *op);
  std::vector<at::Tensor> outputs = tensors;
  auto finish = [flat, outputs]() mutable { Unflatten(flat, outputs); };
  return MakeWork(OpType::ALLREDUCE,
                  fmt::format("all_reduce_coalesced of {} tensors ({} elements)", tensors.size(), flat.numel()),
                  std::move(work), std::move(finish), tensors);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::reduce(std::vector<at::Tensor>& tensors,
                                                             const ::c10d::ReduceOptions& opts) {
  at::Tensor& t = Single(tensors, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "tessera backend: reduce root ", root, " out of range");
  CheckReduceOp(opts.reduceOp, t.scalar_type(), "reduce");
  auto op = ToCommOp(opts.reduceOp, t.scalar_type());
  if (!op) return FoldingAllReduce(t, opts.reduceOp, root, "reduce");
  at::Tensor buf = ContiguousOrCopy(t);
  comm::Work work = coll_->ReduceAsync(Ptr(buf), rank_ == root ? Ptr(buf) : nullptr, buf.numel(),
                                       *ToCommType(t.scalar_type()), *op, root);
  TesseraWork::FinishFn finish;
  if (!buf.is_same(t) && rank_ == root) finish = [t, buf]() mutable { t.copy_(buf); };
  if (!finish && !buf.is_same(t)) finish = [buf]() {};  // keeps the staging copy alive
  return MakeWork(OpType::REDUCE,
                  fmt::format("reduce {} to rank {} of {} {} elements", comm::ReduceOpName(*op), root, t.numel(),
                              c10::toString(t.scalar_type())),
                  std::move(work), std::move(finish), {t});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::broadcast(std::vector<at::Tensor>& tensors,
                                                                const ::c10d::BroadcastOptions& opts) {
  at::Tensor& t = Single(tensors, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "tessera backend: broadcast root ", root, " out of range");
  at::Tensor buf = ContiguousOrCopy(t);
  comm::Work work = Bytes(buf) <= kInlineBytes
                        ? comm::Work::Done(coll_->Broadcast(Ptr(buf), Ptr(buf), Bytes(buf), comm::DataType::kUint8, root))
                        : coll_->BroadcastAsync(Ptr(buf), Ptr(buf), Bytes(buf), comm::DataType::kUint8, root);
  TesseraWork::FinishFn finish;
  if (!buf.is_same(t)) finish = [t, buf]() mutable { t.copy_(buf); };
  return MakeWork(OpType::BROADCAST,
                  fmt::format("broadcast from rank {} of {} {} elements", root, t.numel(),
                              c10::toString(t.scalar_type())),
                  std::move(work), std::move(finish), {t});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::barrier(const ::c10d::BarrierOptions&) {
  return MakeWork(OpType::BARRIER, "barrier", comm::Work::Done(coll_->Barrier()), nullptr, {});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                           int tag) {
  at::Tensor& t = Single(tensors, "send");
  at::Tensor buf = t.contiguous();
  comm::Work work = P2pComm(dst_rank, true).SendAsync(Ptr(buf), Bytes(buf), comm::DataType::kUint8, dst_rank,
                                                static_cast<uint32_t>(tag));
  return MakeWork(OpType::SEND,
                  fmt::format("send of {} {} elements to rank {} (tag {})", t.numel(), c10::toString(t.scalar_type()),
                              dst_rank, tag),
                  std::move(work), [buf]() {}, {t});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupTessera::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                           int tag) {
  at::Tensor& t = Single(tensors, "recv");
  at::Tensor buf = ContiguousOrCopy(t);
  comm::Work work = P2pComm(src_rank, false).RecvAsync(Ptr(buf), Bytes(buf), comm::DataType::kUint8, src_rank,
                                                static_cast<uint32_t>(tag));
  TesseraWork::FinishFn finish;
  if (!buf.is_same(t)) finish = [t, buf]() mutable { t.copy_(buf); };
  return MakeWork(OpType::RECV,
                  fmt::format("recv of {} {} elements from rank {} (tag {})", t.numel(),
                              c10::toString(t.scalar_type()), src_rank, tag),
                  std::move(work), std::move(finish), {t});
}

c10::intrusive_ptr<::c10d::ProcessGroup> CreateProcessGroupTessera(const c10::intrusive_ptr<::c10d::Store>& store,
                                                                  int rank, int size,
                                                                  std::chrono::duration<float> timeout) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return c10::make_intrusive<ProcessGroupTessera>(store, rank, size, ms);
}

}  // namespace tessera::torch_backend
