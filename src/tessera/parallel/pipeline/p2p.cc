#include "tessera/parallel/pipeline/p2p.h"

#include <fmt/format.h>

#include "tessera/parallel/tensor_parallel/collectives.h"

namespace tessera::parallel {
namespace {

constexpr const char* kDirectionName[2] = {"activation", "gradient"};

// Colour of the link leaving stage r (see the header): adjacent links differ,
// also across the ring's closing link.
int Colour(int r, int stages) { return (stages % 2 == 1 && r == stages - 1) ? 2 : r % 2; }
int Colours(int stages) { return stages % 2 == 1 ? 3 : 2; }

}  // namespace

PipelineChannels::PipelineChannels(comm::Communicator& pp, std::chrono::milliseconds wait_timeout)
    : stage_(pp.rank()), stages_(pp.size()), wait_timeout_(wait_timeout) {}

PipelineChannels::~PipelineChannels() {
  bool busy = false;
  for (const Link& link : links_) busy |= !link.pending.empty() || !link.sends.empty();
  if (busy) Abort(Aborted("pipeline channels destroyed with transfers in flight"));
}

StatusOr<std::unique_ptr<PipelineChannels>> PipelineChannels::Create(comm::Communicator& pp,
                                                                     std::chrono::milliseconds wait_timeout) {
  std::unique_ptr<PipelineChannels> ch(new PipelineChannels(pp, wait_timeout));
  const int p = ch->stages_, s = ch->stage_;
  if (p == 1) return ch;
  const int colours = Colours(p);
  for (int i = 0; i < 2 * colours; ++i) {
    auto dup = pp.Split(0, pp.rank());
    if (!dup.ok()) {
      return dup.status().WithContext(fmt::format("creating the pipeline channels of stage {} of {}", s, p));
    }
    ch->dups_.push_back(std::move(*dup));
  }
  auto comm_of = [&](Direction dir, int link_from) { return ch->dups_[dir * colours + Colour(link_from, p)].get(); };
  const int next = (s + 1) % p, prev = (s + p - 1) % p;
  Link& act = ch->links_[kActivations];
  act.send_comm = comm_of(kActivations, s);
  act.send_peer = next;
  act.recv_comm = comm_of(kActivations, prev);
  act.recv_peer = prev;
  Link& grad = ch->links_[kGradients];
  grad.send_comm = comm_of(kGradients, s);
  grad.send_peer = prev;
  grad.recv_comm = comm_of(kGradients, next);
  grad.recv_peer = next;
  return ch;
}

PipelineChannels::Key PipelineChannels::ReceiverKey(Direction dir, int microbatch, int chunk) const {
  if (dir == kActivations) return {microbatch, stage_ == stages_ - 1 ? chunk + 1 : chunk};
  return {microbatch, stage_ == 0 ? chunk - 1 : chunk};
}

uint32_t PipelineChannels::Tag(const Key& key) const {
  return static_cast<uint32_t>(key.first * virtual_stages_ + key.second);
}

void PipelineChannels::BeginStep(const std::vector<std::vector<PipeAction>>& schedule, int virtual_stages) {
  virtual_stages_ = virtual_stages;
  const int p = stages_, last = p * virtual_stages - 1;
  for (int dir = 0; dir < 2; ++dir) {
    Link& link = links_[dir];
    link.recv_order.clear();
    link.posted = 0;
    if (p == 1) continue;
    // The upstream peer's sends on this link, in its schedule's order.
    const int up = dir == kActivations ? (stage_ + p - 1) % p : (stage_ + 1) % p;
    for (const PipeAction& a : schedule[up]) {
      const int vs = VirtualStage(up, a.chunk, p);
      if (dir == kActivations && a.kind == PipeAction::Kind::kForward && vs < last) {
        link.recv_order.push_back({a.microbatch, up == p - 1 ? a.chunk + 1 : a.chunk});
      } else if (dir == kGradients && a.kind == PipeAction::Kind::kBackward && vs > 0) {
        link.recv_order.push_back({a.microbatch, up == 0 ? a.chunk - 1 : a.chunk});
      }
    }
  }
}

Status PipelineChannels::Wait(const comm::Work& work, const char* what, const Key& key) const {
  Status st = wait_timeout_.count() > 0 ? work.Wait(wait_timeout_) : work.Wait();
  if (st.ok()) return st;
  return st.WithContext(fmt::format("pipeline stage {} of {}: {} micro-batch {} chunk {}", stage_, stages_, what,
                                    key.first, key.second));
}

Status PipelineChannels::Send(Direction dir, int microbatch, int chunk, const Tensor& t) {
  TESSERA_RETURN_IF_ERROR(broken_);
  Link& link = links_[dir];
  const Key key = ReceiverKey(dir, microbatch, chunk);
  if (stages_ == 1) {
    link.local[key] = t.Clone();
    return Status::Ok();
  }
  Tensor data = t.is_contiguous() ? t : t.Contiguous();
  comm::Work work = link.send_comm->SendAsync(data.raw_data(), static_cast<size_t>(data.numel()),
                                              CommDataType(data.dtype()), link.send_peer, Tag(key));
  link.sends.emplace_back(std::move(work), std::move(data));
  // Release the buffers of sends that completed; report their failures early.
  while (!link.sends.empty() && link.sends.front().first.Test()) {
    Status st = link.sends.front().first.Wait();
    if (!st.ok()) {
      return st.WithContext(fmt::format("pipeline stage {} of {}: sending a {} to stage {}", stage_, stages_,
                                        kDirectionName[dir], link.send_peer));
    }
    link.sends.pop_front();
  }
  return Status::Ok();
}

StatusOr<Tensor> PipelineChannels::Receive(Direction dir, int microbatch, int chunk, const SpecFn& spec) {
  TESSERA_RETURN_IF_ERROR(broken_);
  Link& link = links_[dir];
  const Key key{microbatch, chunk};
  if (stages_ == 1) {
    auto it = link.local.find(key);
    if (it == link.local.end()) {
      return Internal("pipeline stage 0: no {} was produced for micro-batch {} chunk {}", kDirectionName[dir],
                      microbatch, chunk);
    }
    Tensor t = std::move(it->second);
    link.local.erase(it);
    return t;
  }
  while (!link.pending.count(key)) {
    if (link.posted >= link.recv_order.size()) {
      return Internal("pipeline stage {} of {}: stage {} sends no {} for micro-batch {} chunk {} in this schedule",
                      stage_, stages_, link.recv_peer, kDirectionName[dir], microbatch, chunk);
    }
    const Key next = link.recv_order[link.posted++];
    auto shape = spec(next.first, next.second);
    if (!shape.ok()) return shape.status();
    Posted posted{Tensor::Empty(shape->first, shape->second), {}};
    posted.work = link.recv_comm->RecvAsync(posted.buffer.raw_data(), static_cast<size_t>(posted.buffer.numel()),
                                            CommDataType(posted.buffer.dtype()), link.recv_peer, Tag(next));
    link.pending.emplace(next, std::move(posted));
  }
  auto it = link.pending.find(key);
  const std::string what = fmt::format("receiving the {} from stage {} for", kDirectionName[dir], link.recv_peer);
  TESSERA_RETURN_IF_ERROR(Wait(it->second.work, what.c_str(), key));
  Tensor t = std::move(it->second.buffer);
  link.pending.erase(it);
  return t;
}

Status PipelineChannels::FinishStep() {
  TESSERA_RETURN_IF_ERROR(broken_);
  for (int dir = 0; dir < 2; ++dir) {
    Link& link = links_[dir];
    while (!link.sends.empty()) {
      Status st = link.sends.front().first.Wait(wait_timeout_.count() > 0 ? wait_timeout_ : comm::kWaitForever);
      if (!st.ok()) {
        return st.WithContext(fmt::format("pipeline stage {} of {}: finishing the {} sends to stage {}", stage_,
                                          stages_, kDirectionName[dir], link.send_peer));
      }
      link.sends.pop_front();
    }
    if (!link.pending.empty() || !link.local.empty() || link.posted != link.recv_order.size()) {
      return Internal("pipeline stage {} of {}: {} {} messages left unconsumed at the end of the step", stage_,
                      stages_, link.recv_order.size() - link.posted + link.pending.size() + link.local.size(),
                      kDirectionName[dir]);
    }
  }
  // Every stage ends the step together: a stage that failed has aborted its
  // channels, so this fails on the others too, even where all their
  // messages fitted the channel buffers and nothing else would have noticed.
  if (!dups_.empty()) {
    Status st = dups_[0]->Barrier();
    if (!st.ok()) {
      return st.WithContext(fmt::format("pipeline stage {} of {}: ending the step with the other stages", stage_,
                                        stages_));
    }
  }
  return Status::Ok();
}

void PipelineChannels::Abort(const Status& why) {
  if (!broken_.ok()) return;
  broken_ = why.ok() ? Aborted("pipeline channels aborted") : why;
  for (auto& dup : dups_) dup->Abort(broken_.message());
  for (Link& link : links_) {
    for (auto& [key, posted] : link.pending) (void)posted.work.Wait();
    for (auto& [work, tensor] : link.sends) (void)work.Wait();
    link.pending.clear();
    link.sends.clear();
    link.local.clear();
  }
}

}  // namespace tessera::parallel
