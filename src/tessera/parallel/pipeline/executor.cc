#include "tessera/parallel/pipeline/executor.h"

#include <chrono>
#include <algorithm>
#include <exception>
#include <map>

#include <fmt/format.h>

#include "tessera/graph/tape.h"
#include "tessera/parallel/pipeline/p2p.h"

namespace tessera::parallel {

using Clock = std::chrono::steady_clock;

// The tape of one in-flight (micro-batch, chunk) and the tensors its
// backward needs.
struct PipelineExecutor::InFlight {
  graph::Tape tape;
  Tensor input;   // received activation (leaf); undefined on virtual stage 0
  Tensor output;  // sent activation, or the loss
};

// The state of one RunStep.
class PipelineExecutor::Step {
 public:
  Step(PipelineExecutor& ex, const PipelineStage& stage) : ex_(ex), stage_(stage), start_(Clock::now()) {}

  Status Run(const std::vector<PipeAction>& actions) {
    for (const PipeAction& a : actions) {
      Status st = a.kind == PipeAction::Kind::kForward ? Forward(a.microbatch, a.chunk)
                                                       : Backward(a.microbatch, a.chunk);
      if (!st.ok()) return st;
    }
    const double t = Now();
    TESSERA_RETURN_IF_ERROR(ex_.channels_->FinishStep());
    Event("flush", "comm", t);
    if (!in_flight_.empty()) {
      return Internal("pipeline stage {}: {} micro-batches never backpropagated", ex_.stage_, in_flight_.size());
    }
    ex_.stats_.step_s = Now();
    ex_.stats_.bubble_fraction = ex_.stats_.step_s > 0 ? 1.0 - ex_.stats_.busy_s / ex_.stats_.step_s : 0.0;
    return Status::Ok();
  }

 private:
  double Now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double Event(std::string name, const char* category, double start) {
    const double dur = Now() - start;
    ex_.stats_.timeline.push_back({std::move(name), category, start, dur});
    if (std::string_view(category) == "compute") {
      ex_.stats_.busy_s += dur;
    } else {
      ex_.stats_.comm_wait_s += dur;
    }
    return dur;
  }
  std::string Where(int mb, int chunk) const {
    return fmt::format("pipeline stage {} of {} (virtual stage {}), micro-batch {}", ex_.stage_, ex_.stages_,
                       VirtualStage(ex_.stage_, chunk, ex_.stages_), mb);
  }

  Status Forward(int mb, int chunk) {
    auto f = std::make_unique<InFlight>();
    if (!ex_.IsFirstVirtualStage(chunk)) {
      const double t = Now();
      auto input = ex_.channels_->Receive(PipelineChannels::kActivations, mb, chunk,
                                          [&](int m, int c) -> StatusOr<std::pair<Shape, DType>> {
                                            try {
                                              return stage_.input_spec(c, m);
                                            } catch (const std::exception& e) {
                                              return InvalidArgument("input_spec(chunk {}, micro-batch {}): {}", c,
                                                                     m, e.what());
                                            }
                                          });
      Event(fmt::format("recv act mb{} c{}", mb, chunk), "comm", t);
      if (!input.ok()) return input.status();
      f->input = std::move(*input);
      f->input.set_requires_grad(true);
    }
    const double t = Now();
    try {
      graph::TapeScope scope(f->tape);
      graph::GradModeGuard grad_on(true);
      f->output = stage_.forward(chunk, mb, f->input);
    } catch (const std::exception& e) {
      return InvalidArgument("{}: forward of chunk {} failed: {}", Where(mb, chunk), chunk, e.what());
    }
    ex_.stats_.chunk_busy_s[chunk] += Event(fmt::format("F mb{} c{}", mb, chunk), "compute", t);
    const Tensor& out = f->output;
    if (!out.defined() || !out.requires_grad()) {
      return FailedPrecondition("{}: forward of chunk {} returned {} (it must depend on parameters or the input)",
                                Where(mb, chunk), chunk,
                                out.defined() ? "a tensor that does not require grad" : "an undefined tensor");
    }
    if (ex_.IsLastVirtualStage(chunk)) {
      if (out.numel() != 1) {
        return FailedPrecondition("{}: the last virtual stage must return the scalar loss, got shape {}",
                                  Where(mb, chunk), ShapeString(out.shape()));
      }
      ex_.stats_.loss += out.Item();
    } else {
      Status st = ex_.channels_->Send(PipelineChannels::kActivations, mb, chunk, out);
      if (!st.ok()) return st.WithContext(Where(mb, chunk));
    }
    in_flight_[{mb, chunk}] = std::move(f);
    ex_.stats_.max_in_flight = std::max(ex_.stats_.max_in_flight, static_cast<int>(in_flight_.size()));
    return Status::Ok();
  }

  Status Backward(int mb, int chunk) {
    auto it = in_flight_.find({mb, chunk});
    if (it == in_flight_.end()) {
      return Internal("{}: backward of chunk {} before its forward", Where(mb, chunk), chunk);
    }
    InFlight& f = *it->second;
    Tensor grad;
    if (!ex_.IsLastVirtualStage(chunk)) {
      const double t = Now();
      auto received = ex_.channels_->Receive(
          PipelineChannels::kGradients, mb, chunk, [&](int m, int c) -> StatusOr<std::pair<Shape, DType>> {
            auto other = in_flight_.find({m, c});
            if (other == in_flight_.end()) {
              return Internal("{}: a gradient for chunk {} arrives before its forward", Where(m, c), c);
            }
            return std::make_pair(other->second->output.shape(), other->second->output.dtype());
          });
      Event(fmt::format("recv grad mb{} c{}", mb, chunk), "comm", t);
      if (!received.ok()) return received.status();
      grad = std::move(*received);
    }
    const double t = Now();
    try {
      f.tape.Backward(f.output, grad);
    } catch (const std::exception& e) {
      return InvalidArgument("{}: backward of chunk {} failed: {}", Where(mb, chunk), chunk, e.what());
    }
    ex_.stats_.chunk_busy_s[chunk] += Event(fmt::format("B mb{} c{}", mb, chunk), "compute", t);
    if (!ex_.IsFirstVirtualStage(chunk)) {
      Tensor g = f.input.grad();
      if (!g.defined()) g = Tensor::Zeros(f.input.shape(), f.input.dtype());  // output independent of input
      Status st = ex_.channels_->Send(PipelineChannels::kGradients, mb, chunk, g);
      if (!st.ok()) return st.WithContext(Where(mb, chunk));
    }
    in_flight_.erase(it);
    if (stage_.after_backward) {
      Status st = stage_.after_backward(chunk, mb);
      if (!st.ok()) return st.WithContext(Where(mb, chunk));
    }
    return Status::Ok();
  }

  PipelineExecutor& ex_;
  const PipelineStage& stage_;
  Clock::time_point start_;
  std::map<std::pair<int, int>, std::unique_ptr<InFlight>> in_flight_;
};

PipelineExecutor::PipelineExecutor(int stage, int stages, PipelineConfig config,
                                   std::unique_ptr<PipelineChannels> channels)
    : stage_(stage), stages_(stages), config_(config), channels_(std::move(channels)) {}

PipelineExecutor::~PipelineExecutor() = default;

StatusOr<std::unique_ptr<PipelineExecutor>> PipelineExecutor::Create(comm::Communicator& pp,
                                                                     const PipelineConfig& config) {
  TESSERA_RETURN_IF_ERROR(
      ValidatePipelineSchedule(config.schedule, pp.size(), config.microbatches, config.virtual_stages));
  TESSERA_ASSIGN_OR_RETURN(auto channels, PipelineChannels::Create(pp, config.wait_timeout));
  return std::unique_ptr<PipelineExecutor>(new PipelineExecutor(pp.rank(), pp.size(), config, std::move(channels)));
}

Status PipelineExecutor::SetConfig(const PipelineConfig& config) {
  TESSERA_RETURN_IF_ERROR(
      ValidatePipelineSchedule(config.schedule, stages_, config.microbatches, config.virtual_stages));
  if (config.wait_timeout != config_.wait_timeout) {
    return InvalidArgument("PipelineExecutor::SetConfig cannot change wait_timeout (create a new executor)");
  }
  config_ = config;
  return Status::Ok();
}

Status PipelineExecutor::RunStep(const PipelineStage& stage) {
  TESSERA_RETURN_IF_ERROR(broken_);
  if (!stage.forward || (!stage.input_spec && stages_ * config_.virtual_stages > 1)) {
    return InvalidArgument("PipelineExecutor::RunStep: the stage needs a forward and an input_spec callback");
  }
  stats_ = {};
  stats_.chunk_busy_s.assign(config_.virtual_stages, 0.0);
  const auto schedule =
      BuildPipelineSchedule(config_.schedule, stages_, config_.microbatches, config_.virtual_stages);
  channels_->BeginStep(schedule, config_.virtual_stages);
  Status st;
  {
    Step step(*this, stage);
    st = step.Run(schedule[stage_]);
    if (!st.ok()) {
      // Stop the peers first (they may be waiting on this stage), then drop
      // the in-flight tapes with the step.
      channels_->Abort(st);
      broken_ = st;
    }
  }
  return st;
}

}  // namespace tessera::parallel
