#include "tessera/train/checkpoint_layout.h"

#include <cstdio>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "tessera/comm/api/communicator.h"
#include "tessera/comm/store.h"
#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/train/parallel_trainer.h"

namespace tessera::train {

StatusOr<LayoutConversion> ConvertCheckpointLayout(const std::filesystem::path& src, const std::filesystem::path& dst,
                                                   const std::vector<std::string>& overrides) {
  TESSERA_ASSIGN_OR_RETURN(parallel::checkpoint::CheckpointReader reader,
                           parallel::checkpoint::CheckpointReader::Open(src));
  const nlohmann::json& meta = reader.metadata();
  if (!meta.is_object() || meta.value("kind", "") != "tessera-trainer" || !meta.contains("config")) {
    return InvalidArgument("'{}' is not a trainer checkpoint (no trainer config in its metadata): only `--merge` "
                           "applies to it",
                           src.string());
  }
  std::error_code ec;
  if (std::filesystem::exists(dst, ec)) {
    return AlreadyExists("'{}' exists; convert writes a new checkpoint directory", dst.string());
  }
  std::vector<std::string> all = overrides;
  for (const char* o : {"checkpoint.every=0", "checkpoint.every_seconds=0.0", "checkpoint.mtbf_hours=0.0",
                        "checkpoint.memory_every=0", "eval.every=0", "train.threads=1"}) {
    all.push_back(o);
  }
  all.push_back(fmt::format("checkpoint.resume={}", nlohmann::json(src.string()).dump()));
  TESSERA_ASSIGN_OR_RETURN(TrainConfig config,
                           TrainConfig::FromJson(meta["config"], fmt::format("the config stored in '{}'", src.string()),
                                                 all));
  const int world = config.parallel.world_size();
  std::shared_ptr<comm::Store> store = comm::MakeInMemoryStore();
  std::mutex mu;
  Status first;
  auto fail = [&](int rank, const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    if (first.ok()) first = st.WithContext(fmt::format("target rank {} of {}", rank, world));
  };
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      comm::CommOptions co;
      co.name = "ckpt-convert";
      co.calibrate = false;
      auto c = comm::Communicator::Create(store, r, world, co);
      if (!c.ok()) return fail(r, c.status());
      ParallelTrainerOptions o;
      o.restart_count = 0;  // never an agent's restart: resume exactly `src`
      static FILE* devnull = std::fopen("/dev/null", "w");
      o.base.out = devnull;
      o.base.force_plain = true;
      o.base.write_records = false;
      auto trainer = ParallelTrainer::Create(config, **c, o);
      if (!trainer.ok()) {
        (*c)->Abort(trainer.status().message());
        return fail(r, trainer.status());
      }
      Status st = (*trainer)->SaveCheckpoint(dst);
      if (!st.ok()) {
        (*c)->Abort(st.message());
        fail(r, st);
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  if (!first.ok()) return first.WithContext(fmt::format("converting '{}' to '{}'", src.string(), dst.string()));
  return LayoutConversion{world, reader.step(), config.parallel.mesh().ToString()};
}

}  // namespace tessera::train
