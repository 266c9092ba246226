// ProcessGroupTessera: the c10d::ProcessGroup "tessera" of PyTorch 1.13 on
// Tessera's Communicator (src/tessera/comm/api/communicator.h).
//
// Creation (collective over the group's ranks, like every c10d backend)
// bootstraps three communicators through the c10d::Store PyTorch passes
// (C10dStore): one runs the collectives, two carry point-to-point traffic,
// one per direction (to a higher rank / to a lower rank), so the common
// "both ranks isend, then both irecv" exchange cannot deadlock on a send
// that waits for its receiver. Operation deadlines are the group's timeout:
// a dead or stalled peer fails the operation on every waiting rank with an
// exception naming it (the communicator is then broken: create a new group).
//
// Tensors (CPU only): used in place whenever they are contiguous and the
// operation's layout allows (all_reduce, broadcast, reduce, send/recv,
// all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single);
// otherwise staged through one contiguous buffer and copied back when the
// operation completes. Data movement runs on bytes, so every dtype moves
// bitwise; reductions run in Tessera's kernels for float32/64, bf16, fp16,
// int8, uint8, int32, int64 with SUM, PRODUCT, MIN, MAX (AVG for floating
// types); BAND/BOR/BXOR and other dtypes (bool, int16) reduce by an
// all-gather and a local fold in rank order. PREMUL_SUM (NCCL-only in 1.13)
// and recv from any source are not supported and say so.
// Zero copy: when every rank's tensors of a large collective live in memory
// from Tessera's AllocShared (tessera.torch.empty_shared), ranks read and
// write each other's tensors directly (communicator.h).
// all_reduce and broadcast of up to 64 KiB, and barrier, run on the calling
// thread (the returned work is complete): most of a small operation's
// latency is the hand-off to the communicator's progress thread.
// Thread-safety: like every ProcessGroup, calls may come from any thread;
// operations of one group run in issue order.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "python/torch_backend/completion_thread.h"
#include "python/torch_backend/work.h"
#include "tessera/comm/api/communicator.h"

namespace tessera::torch_backend {

class ProcessGroupTessera : public ::c10d::ProcessGroup {
 public:
  // Throws std::runtime_error naming the store and the Tessera error when
  // the rendezvous fails (e.g. a rank never arrives within `timeout`).
  ProcessGroupTessera(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout);
  ~ProcessGroupTessera() override;

  const std::string getBackendName() const override { return "tessera"; }

  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                       const ::c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                        const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_split_sizes,
                                                 std::vector<int64_t>& input_split_sizes,
                                                 const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;

  // The collectives communicator's Describe() (transport, algorithms).
  std::string Describe() const;
  // Collectives of this group that ran zero copy so far.
  uint64_t ZeroCopyOps() const { return coll_->zero_copy_ops(); }

 private:
  c10::intrusive_ptr<::c10d::Work> MakeWork(::c10d::OpType type, std::string what, comm::Work work,
                                            TesseraWork::FinishFn finish, std::vector<at::Tensor> outputs);
  // An all-reduce Tessera has no kernel for: all-gather, fold in rank order.
  c10::intrusive_ptr<::c10d::Work> FoldingAllReduce(at::Tensor& tensor, ::c10d::ReduceOp op, int root,
                                                    const char* what);
  comm::Communicator& P2pComm(int peer, bool sending) const;

  std::chrono::milliseconds timeout_;
  std::unique_ptr<comm::Communicator> coll_;
  std::unique_ptr<comm::Communicator> up_;    // transfers from lower to higher ranks
  std::unique_ptr<comm::Communicator> down_;  // transfers from higher to lower ranks
  std::unique_ptr<CompletionThread> completer_;
};

// The creator torch.distributed.Backend.register_backend calls.
c10::intrusive_ptr<::c10d::ProcessGroup> CreateProcessGroupTessera(const c10::intrusive_ptr<::c10d::Store>& store,
                                                                  int rank, int size,
                                                                  std::chrono::duration<float> timeout);

}  // namespace tessera::torch_backend
