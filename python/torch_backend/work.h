// TesseraWork: the c10d::Work of one operation of ProcessGroupTessera, over
// the comm::Work of the Tessera communicator that runs it.
//   - Complete(timeout) waits for the comm operation, then (once, whichever
//     thread gets there first) runs the finish step (copies back into
//     non-contiguous or list outputs, a local fold for reductions Tessera's
//     communicator has no operator for), records the outcome (an exception
//     naming the operation, the group and the Tessera error) and completes
//     the Future, if one was asked for.
//   - wait(timeout): Complete in the caller's thread; throws the operation's
//     error; a wait shorter than the operation raises a timeout error and
//     leaves the operation running (the communicator's own deadline, the
//     process group's timeout, still bounds it).
//   - getFuture(): a Future of the output tensors (DDP's reducer and comm
//     hooks use it), completed by the group's completion thread.
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "tessera/comm/api/work.h"

namespace tessera::torch_backend {

class CompletionThread;

class TesseraWork : public ::c10d::Work {
 public:
  using FinishFn = std::function<void()>;

  TesseraWork(int rank, ::c10d::OpType type, std::string what, comm::Work work, FinishFn finish,
              std::vector<at::Tensor> outputs, std::chrono::milliseconds op_timeout, CompletionThread* completer);
  ~TesseraWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Waits at most `timeout` (0: the operation's own deadline plus slack) for
  // the comm operation; true once this work is complete (with or without
  // an error), false if the wait timed out first.
  bool Complete(std::chrono::milliseconds timeout);

 private:
  const std::string what_;
  comm::Work work_;
  FinishFn finish_;
  std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds op_timeout_;
  CompletionThread* completer_;
  std::once_flag once_;
  std::mutex future_mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool future_done_ = false;  // under future_mu_: the outcome is known
};

}  // namespace tessera::torch_backend
