// PipelineChannels: the point-to-point plumbing of a pipeline stage —
// activations flow to the next stage, gradients to the previous one, round
// the ring for the interleaved schedule (virtual stage k lives on stage
// k % p).
//
// Deadlock freedom. A communicator runs its operations one at a time in
// issue order, and a large Send waits for the matching Recv, so one queue
// that mixes sends and receives can block a receive behind a send whose
// peer is itself blocked. Here every communicator queue holds only sends on
// one link or only receives on one link: per direction (activations,
// gradients), the link leaving stage r uses a duplicate of the pp
// communicator of colour r % 2 (colour 2 for the ring-closing link when p is
// odd), so on each duplicate a rank only sends or only receives. Sends are
// asynchronous and never block the caller; a receive is posted when its data
// is needed, after every message the peer sends earlier on that link (the
// order is computed from the peer's schedule), so messages match in order
// (each carries a tag from (micro-batch, chunk), checked by the
// communicator). A valid schedule (SimulatePipeline succeeds) therefore
// cannot deadlock. With p == 1 (interleaved chunks on one stage) messages
// are handed over in memory.
// Every wait is bounded by the communicators' per-operation deadline (and by
// `wait_timeout` when non-zero). After any failure the channels are broken:
// Abort() stops every duplicate so peers fail promptly too.
// Thread-safety: one thread drives a PipelineChannels.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/parallel/pipeline/schedule.h"
#include "tessera/tensor/tensor.h"

namespace tessera::parallel {

class PipelineChannels {
 public:
  enum Direction { kActivations = 0, kGradients = 1 };
  using Key = std::pair<int, int>;  // (micro-batch, receiver's local chunk)
  using SpecFn = std::function<StatusOr<std::pair<Shape, DType>>(int microbatch, int chunk)>;

  // Collective over `pp` (its rank is the stage): duplicates it once per
  // link colour and direction. `pp` must outlive the channels.
  static StatusOr<std::unique_ptr<PipelineChannels>> Create(comm::Communicator& pp,
                                                            std::chrono::milliseconds wait_timeout);
  ~PipelineChannels();

  // Prepares one step of `schedule` (every stage's actions): the order in
  // which each neighbour sends, so receives are posted in that order.
  void BeginStep(const std::vector<std::vector<PipeAction>>& schedule, int virtual_stages);
  // Sends the output of local chunk `chunk` (activations: to the next
  // virtual stage; gradients: to the previous one). Asynchronous.
  Status Send(Direction dir, int microbatch, int chunk, const Tensor& t);
  // Blocks until the message for (microbatch, local chunk) arrives; `spec`
  // gives the shape and dtype of any message that has to be posted.
  StatusOr<Tensor> Receive(Direction dir, int microbatch, int chunk, const SpecFn& spec);
  // Waits for every send of the step, checks nothing is left unreceived,
  // and ends the step with a barrier of all stages (a stage that failed and
  // aborted makes it fail here too).
  Status FinishStep();
  // Stops every operation (here and, through the communicators, on the
  // peers), waits for them to end and records `why`. Idempotent.
  void Abort(const Status& why);

  int stage() const { return stage_; }
  int stages() const { return stages_; }

 private:
  struct Posted {
    Tensor buffer;
    comm::Work work;
  };
  struct Link {
    comm::Communicator* send_comm = nullptr;
    comm::Communicator* recv_comm = nullptr;
    int send_peer = 0, recv_peer = 0;
    std::vector<Key> recv_order;  // what the upstream peer sends, in order
    size_t posted = 0;
    std::map<Key, Posted> pending;
    std::deque<std::pair<comm::Work, Tensor>> sends;
    std::map<Key, Tensor> local;  // p == 1
  };
  PipelineChannels(comm::Communicator& pp, std::chrono::milliseconds wait_timeout);
  Key ReceiverKey(Direction dir, int microbatch, int chunk) const;
  uint32_t Tag(const Key& key) const;
  Status Wait(const comm::Work& work, const char* what, const Key& key) const;

  int stage_, stages_;
  int virtual_stages_ = 1;
  std::chrono::milliseconds wait_timeout_;
  std::vector<std::unique_ptr<comm::Communicator>> dups_;  // [direction * colours + colour]
  Link links_[2];
  Status broken_;
};

}  // namespace tessera::parallel
