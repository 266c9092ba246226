#include "tessera/train/memory_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "tessera/base/checksum.h"
#include "tessera/base/logging.h"
#include "tessera/comm/api/gather_strings.h"
#include "tessera/parallel/checkpoint/file_io.h"
#include "tessera/parallel/checkpoint/safetensors.h"

namespace tessera::train {
namespace {

namespace ck = parallel::checkpoint;
using Clock = std::chrono::steady_clock;
constexpr char kFormat[] = "tessera-memory-snapshot";
constexpr int kKeep = 2;

}  // namespace

// Everything one rank holds, flattened in span order.
struct MemoryCheckpointer::Held {
  std::vector<float> values, exp_avg, exp_avg_sq;
  std::vector<int64_t> steps;  // per (bucket, parameter) in `params` order
  int64_t optimizer_steps = 0;
  uint64_t fingerprint = 0;    // of the layout: which spans of which parameters
  std::vector<std::pair<int, int>> params;  // (bucket, index) of each step count

  uint64_t Digest() const {
    base::StreamingChecksum c;
    c.Update(values.data(), values.size() * 4);
    c.Update(exp_avg.data(), exp_avg.size() * 4);
    c.Update(exp_avg_sq.data(), exp_avg_sq.size() * 4);
    c.Update(steps.data(), steps.size() * 8);
    c.Update(&optimizer_steps, 8);
    return c.Digest64();
  }
};

namespace {

using Held = MemoryCheckpointer::Held;

// The (bucket, index) of every parameter this rank holds anything of, and
// the layout fingerprint.
std::vector<std::pair<int, int>> HeldParams(parallel::ZeroOptimizer& zero, int rank, int world, uint64_t* fingerprint) {
  std::vector<std::pair<int, int>> params;
  std::set<std::pair<int, int>> seen;
  std::string layout = fmt::format("{}/{}|", rank, world);
  auto add = [&](const std::vector<parallel::ZeroOptimizer::Span>& spans, char kind) {
    for (const auto& s : spans) {
      layout += fmt::format("{}{}:{}-{};", kind, s.param->name, s.begin, s.end);
      if (seen.insert({s.bucket, s.index}).second) params.push_back({s.bucket, s.index});
    }
  };
  add(zero.HeldValueSpans(), 'v');
  add(zero.HeldStateSpans(), 's');
  *fingerprint = base::Checksum64(layout);
  return params;
}

// Copies the state into `h`, reusing its buffers (the layout's parameters
// and fingerprint are computed on the first capture only).
void Capture(parallel::ZeroOptimizer& zero, int rank, int world, Held& h) {
  if (h.params.empty()) h.params = HeldParams(zero, rank, world, &h.fingerprint);
  const auto& params = h.params;
  h.values.clear();
  h.exp_avg.clear();
  h.exp_avg_sq.clear();
  h.steps.clear();
  for (const auto& s : zero.HeldValueSpans()) h.values.insert(h.values.end(), s.value, s.value + (s.end - s.begin));
  for (const auto& s : zero.HeldStateSpans()) {
    h.exp_avg.insert(h.exp_avg.end(), s.exp_avg, s.exp_avg + (s.end - s.begin));
    h.exp_avg_sq.insert(h.exp_avg_sq.end(), s.exp_avg_sq, s.exp_avg_sq + (s.end - s.begin));
  }
  for (const auto& [b, i] : params) h.steps.push_back(zero.param_step(b, i));
  h.optimizer_steps = zero.steps_taken();
}

void Apply(const Held& h, parallel::ZeroOptimizer& zero, int rank, int world) {
  uint64_t fp = 0;
  const auto params = HeldParams(zero, rank, world, &fp);
  size_t v = 0, m = 0;
  for (const auto& s : zero.HeldValueSpans()) {
    std::memcpy(s.value, h.values.data() + v, (s.end - s.begin) * 4);
    v += s.end - s.begin;
  }
  for (const auto& s : zero.HeldStateSpans()) {
    std::memcpy(s.exp_avg, h.exp_avg.data() + m, (s.end - s.begin) * 4);
    std::memcpy(s.exp_avg_sq, h.exp_avg_sq.data() + m, (s.end - s.begin) * 4);
    m += s.end - s.begin;
  }
  for (size_t k = 0; k < params.size(); ++k) zero.param_step(params[k].first, params[k].second) = h.steps[k];
  zero.set_steps_taken(h.optimizer_steps);
}

// The snapshot file's tensors and metadata (pointing into `h`).
struct Layout {
  std::vector<ck::TensorToWrite> tensors;
  ck::SafetensorsMetadata meta;
};

Layout FileLayout(const Held& h, int64_t step, int rank, const nlohmann::json& metadata) {
  auto spec = [](const char* name, ck::StorageDtype dtype, size_t n) {
    return ck::TensorSpec{name, dtype, {static_cast<int64_t>(n)}};
  };
  Layout l;
  l.tensors = {
      {spec("values", ck::StorageDtype::kF32, h.values.size()), h.values.data()},
      {spec("exp_avg", ck::StorageDtype::kF32, h.exp_avg.size()), h.exp_avg.data()},
      {spec("exp_avg_sq", ck::StorageDtype::kF32, h.exp_avg_sq.size()), h.exp_avg_sq.data()},
      {spec("steps", ck::StorageDtype::kI64, h.steps.size()), h.steps.data()},
      {spec("optimizer_steps", ck::StorageDtype::kI64, 1), &h.optimizer_steps}};
  l.meta = {{"format", kFormat},
                                        {"step", std::to_string(step)},
                                        {"rank", std::to_string(rank)},
                                        {"fingerprint", fmt::format("{:016x}", h.fingerprint)},
                                        {"xxh3_64", fmt::format("{:016x}", h.Digest())},
                                        {"metadata", metadata.dump()}};
  return l;
}

struct Parsed {
  Held held;
  int64_t step = 0;
  nlohmann::json metadata;
};

// A snapshot file's bytes, checked: format, rank, layout, digest.
StatusOr<Parsed> Parse(std::string bytes, const std::string& name, int rank, uint64_t fingerprint) {
  TESSERA_ASSIGN_OR_RETURN(ck::SafetensorsFile f, ck::SafetensorsFile::Parse(ck::MappedFile::FromBytes(std::move(bytes)), name));
  const auto& m = f.metadata();
  auto get = [&](const char* k) -> std::string {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  if (get("format") != kFormat || get("rank") != std::to_string(rank)) {
    return DataLoss("'{}' is not rank {}'s memory snapshot", name, rank);
  }
  if (get("fingerprint") != fmt::format("{:016x}", fingerprint)) {
    return FailedPrecondition("'{}' was saved under another layout", name);
  }
  Parsed p;
  auto copy = [&](const char* t, auto& out) -> Status {
    const ck::SafetensorsFile::Entry* e = f.Find(t);
    if (e == nullptr) return DataLoss("'{}' has no tensor '{}'", name, t);
    const auto bytes = f.TensorBytes(*e);
    out.resize(bytes.size() / sizeof(out[0]));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(out[0]));
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(copy("values", p.held.values));
  TESSERA_RETURN_IF_ERROR(copy("exp_avg", p.held.exp_avg));
  TESSERA_RETURN_IF_ERROR(copy("exp_avg_sq", p.held.exp_avg_sq));
  TESSERA_RETURN_IF_ERROR(copy("steps", p.held.steps));
  std::vector<int64_t> opt;
  TESSERA_RETURN_IF_ERROR(copy("optimizer_steps", opt));
  if (opt.size() != 1) return DataLoss("'{}': bad optimizer_steps", name);
  p.held.optimizer_steps = opt[0];
  p.held.fingerprint = fingerprint;
  if (get("xxh3_64") != fmt::format("{:016x}", p.held.Digest())) return DataLoss("'{}' is corrupt (digest)", name);
  p.step = std::strtoll(get("step").c_str(), nullptr, 10);
  p.metadata = nlohmann::json::parse(get("metadata"), nullptr, false);
  return p;
}

std::string FileName(const char* kind, int rank, int64_t step) {
  return fmt::format("{}-{:05d}.step-{:08d}.safetensors", kind, rank, step);
}

// Steps of the files "<kind>-<rank>.step-N.safetensors" in `dir`, newest first.
std::vector<int64_t> StepsOf(const std::filesystem::path& dir, const char* kind, int rank) {
  std::vector<int64_t> steps;
  const std::string prefix = fmt::format("{}-{:05d}.step-", kind, rank);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0 || !n.ends_with(".safetensors")) continue;
    steps.push_back(std::strtoll(n.c_str() + prefix.size(), nullptr, 10));
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

void Prune(const std::filesystem::path& dir, const char* kind, int rank) {
  const std::vector<int64_t> steps = StepsOf(dir, kind, rank);
  for (size_t i = kKeep; i < steps.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(dir / FileName(kind, rank, steps[i]), ec);
  }
}

Status WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  TESSERA_ASSIGN_OR_RETURN(ck::AtomicFileWriter w, ck::AtomicFileWriter::Create(path));
  TESSERA_RETURN_IF_ERROR(w.Append(bytes.data(), bytes.size()));
  return w.Commit();
}

StatusOr<std::string> ReadBytes(const std::filesystem::path& path) {
  TESSERA_ASSIGN_OR_RETURN(ck::MappedFile f, ck::MappedFile::Open(path));
  return std::string(reinterpret_cast<const char*>(f.bytes().data()), f.bytes().size());
}

// Sends `out` to `to` and receives a byte string from `from` (either may be
// -1: none), lengths first. One SendRecv each: a communicator runs its
// operations in order, so two blocking sends facing each other would
// deadlock on large messages.
StatusOr<std::string> Exchange(comm::Communicator& c, const std::string& out, int to, int from) {
  int64_t n_out = static_cast<int64_t>(out.size()), n_in = 0;
  if (to >= 0 && from >= 0) {
    TESSERA_RETURN_IF_ERROR(c.SendRecv(&n_out, 1, to, &n_in, 1, from, comm::DataType::kInt64));
  } else if (to >= 0) {
    TESSERA_RETURN_IF_ERROR(c.Send(&n_out, 1, comm::DataType::kInt64, to));
  } else if (from >= 0) {
    TESSERA_RETURN_IF_ERROR(c.Recv(&n_in, 1, comm::DataType::kInt64, from));
  }
  if (n_in < 0 || n_in > (int64_t{1} << 40)) return DataLoss("rank {} announced a snapshot of {} bytes", from, n_in);
  std::string in(static_cast<size_t>(n_in), '\0');
  if (to >= 0 && from >= 0) {
    TESSERA_RETURN_IF_ERROR(c.SendRecv(out.data(), out.size(), to, in.data(), in.size(), from, comm::DataType::kUint8));
  } else if (to >= 0) {
    TESSERA_RETURN_IF_ERROR(c.Send(out.data(), out.size(), comm::DataType::kUint8, to));
  } else if (from >= 0) {
    TESSERA_RETURN_IF_ERROR(c.Recv(in.data(), in.size(), comm::DataType::kUint8, from));
  }
  return in;
}

}  // namespace

StatusOr<std::unique_ptr<MemoryCheckpointer>> MemoryCheckpointer::Create(comm::Communicator& world,
                                                                         const MemoryCheckpointOptions& options) {
  std::unique_ptr<MemoryCheckpointer> m(new MemoryCheckpointer());
  auto split = world.Split(0, world.rank());
  if (!split.ok()) return split.status().WithContext("creating the memory checkpoint tier's communicator");
  m->comm_ = std::move(split).value();
  const int world_size = world.size();
  int per_node = options.ranks_per_node;
  if (per_node <= 0) {
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    per_node = local != nullptr ? std::max(1, std::atoi(local)) : world_size;
  }
  per_node = std::clamp(per_node, 1, world_size);
  m->ranks_per_node_ = per_node;
  const int node = options.node >= 0 ? options.node : world.rank() / per_node;
  m->replicate_ = world_size > per_node;  // several nodes: a copy on the next one
  m->peer_ = (world.rank() + per_node) % world_size;
  m->prev_ = (world.rank() - per_node + world_size) % world_size;
  m->node_dir_ = options.dir / (options.job.empty() ? std::string("local") : options.job) / fmt::format("node-{}", node);
  std::error_code ec;
  std::filesystem::create_directories(m->node_dir_, ec);
  if (ec) return IoError("cannot create the memory checkpoint folder '{}': {}", m->node_dir_.string(), ec.message());
  if (options.fresh_start) m->Discard();
  return m;
}

void MemoryCheckpointer::Discard() {
  (void)Wait();
  const int rank = comm_->rank();
  for (int64_t s : StepsOf(node_dir_, "rank", rank)) {
    std::error_code ec;
    std::filesystem::remove(node_dir_ / FileName("rank", rank, s), ec);
  }
  for (int64_t s : StepsOf(node_dir_, "replica", prev_)) {
    std::error_code ec;
    std::filesystem::remove(node_dir_ / FileName("replica", prev_, s), ec);
  }
}

MemoryCheckpointer::~MemoryCheckpointer() {
  Status st = Wait();
  if (!st.ok()) TLOG(WARN, "in-memory snapshot failed: {}", st.ToString());
}

Status MemoryCheckpointer::Wait() {
  return writer_.Wait();
}

Status MemoryCheckpointer::ForgetLayout() {
  Status st = Wait();
  held_.reset();  // the writer is done with it
  return st;
}

Status MemoryCheckpointer::Save(int64_t step, parallel::ZeroOptimizer& zero, const nlohmann::json& metadata) {
  const Status previous = Wait();
  const auto t0 = Clock::now();
  if (!held_) held_ = std::make_shared<Held>();
  Capture(zero, comm_->rank(), comm_->size(), *held_);  // the writer is done with it (Wait above)
  std::shared_ptr<const Held> held = held_;
  snapshot_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  ++saves_;
  writer_.Start([this, held, step, metadata]() -> Status {
    return [&]() -> Status {
      const int rank = comm_->rank();
      const Layout layout = FileLayout(*held, step, rank, metadata);
      if (!replicate_) {  // streamed straight into tmpfs: no intermediate copy
        TESSERA_RETURN_IF_ERROR(
            ck::WriteSafetensorsFile(node_dir_ / FileName("rank", rank, step), layout.tensors, layout.meta));
        Prune(node_dir_, "rank", rank);
        return Status::Ok();
      }
      TESSERA_ASSIGN_OR_RETURN(std::string bytes, ck::SafetensorsToString(layout.tensors, layout.meta));
      TESSERA_RETURN_IF_ERROR(WriteBytes(node_dir_ / FileName("rank", rank, step), bytes));
      Prune(node_dir_, "rank", rank);
      // Mine to the next node, the previous node's to me.
      TESSERA_ASSIGN_OR_RETURN(std::string replica, Exchange(*comm_, bytes, peer_, prev_));
      TESSERA_RETURN_IF_ERROR(WriteBytes(node_dir_ / FileName("replica", prev_, step), replica));
      Prune(node_dir_, "replica", prev_);
      return Status::Ok();
    }();
  });
  return previous;
}

StatusOr<std::optional<MemoryCheckpointer::Restored>> MemoryCheckpointer::Restore(parallel::ZeroOptimizer& zero) {
  TESSERA_RETURN_IF_ERROR(Wait());
  comm::Communicator& c = *comm_;
  const int rank = c.rank(), world = c.size();
  uint64_t fingerprint = 0;
  HeldParams(zero, rank, world, &fingerprint);
  // What each rank has: its own steps, and the steps of the replica it keeps.
  const nlohmann::json mine = {{"own", StepsOf(node_dir_, "rank", rank)},
                               {"replica", replicate_ ? StepsOf(node_dir_, "replica", prev_) : std::vector<int64_t>{}}};
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> all, comm::AllGatherStrings(c, mine.dump()));
  std::vector<std::set<int64_t>> own(world), replica_of(world);  // replica_of[r]: steps of r's copy on peer(r)
  std::set<int64_t> candidates;
  for (int r = 0; r < world; ++r) {
    const nlohmann::json j = nlohmann::json::parse(all[r], nullptr, false);
    for (int64_t s : j.value("own", std::vector<int64_t>{})) own[r].insert(s), candidates.insert(s);
    const int whose = (r - ranks_per_node_ + world) % world;
    for (int64_t s : j.value("replica", std::vector<int64_t>{})) replica_of[whose].insert(s), candidates.insert(s);
  }
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const int64_t step = *it;
    bool reachable = true;
    for (int r = 0; r < world && reachable; ++r) reachable = own[r].count(step) || replica_of[r].count(step);
    if (!reachable) continue;
    // Fetch: my own copy, or my replica from peer_; serve prev_'s if it lacks its own.
    Status st;
    std::string bytes, serving;
    const bool serve = replicate_ && !own[prev_].count(step);
    const bool fetch = !own[rank].count(step);
    if (!fetch) {
      StatusOr<std::string> b = ReadBytes(node_dir_ / FileName("rank", rank, step));
      st = b.status();
      if (b.ok()) bytes = std::move(*b);
    }
    if (serve) {
      StatusOr<std::string> b = ReadBytes(node_dir_ / FileName("replica", prev_, step));
      if (b.ok()) serving = std::move(*b);  // else an empty answer, which fails its parse there
    }
    if (serve || fetch) {
      StatusOr<std::string> got = Exchange(c, serving, serve ? prev_ : -1, fetch ? peer_ : -1);
      if (!got.ok()) return got.status().WithContext("exchanging in-memory snapshot replicas");
      if (fetch) bytes = std::move(*got);
    }
    StatusOr<Parsed> parsed = st.ok() ? Parse(std::move(bytes), fmt::format("rank {}'s snapshot of step {}", rank, step),
                                              rank, fingerprint)
                                      : StatusOr<Parsed>(st);
    // Apply only when every rank has a good copy of this step.
    const std::string why = parsed.ok() ? std::string() : parsed.status().ToString();
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> verdicts, comm::AllGatherStrings(c, why));
    std::string failures;
    int replicas = 0;
    for (int r = 0; r < world; ++r) {
      if (!verdicts[r].empty()) failures += fmt::format("; rank {}: {}", r, verdicts[r]);
      replicas += own[r].count(step) ? 0 : 1;
    }
    if (!failures.empty()) {
      if (rank == 0) TLOG(WARN, "in-memory snapshot of step {} unusable{}", step, failures);
      continue;
    }
    Apply(parsed->held, zero, rank, world);
    return std::optional<Restored>(Restored{step, parsed->metadata, replicas});
  }
  return std::optional<Restored>();
}

}  // namespace tessera::train
