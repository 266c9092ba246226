// `tessera ckpt inspect|verify|convert PATH`: look into sharded checkpoints
// (src/tessera/parallel/checkpoint/). PATH is a checkpoint directory (with
// index.json), a folder of step-<N> checkpoints (the latest is used), or —
// for inspect and verify — a single .safetensors file.
//   inspect PATH [--json]   step, metadata keys, tensors (dtype, global
//                           shape, slices), files and sizes
//   verify PATH             every shard's size and XXH3-64, structure and
//                           tiling: "ok: N tensors, M files, X bytes verified"
//   convert PATH --merge OUT.safetensors [--force]
//                           one standard safetensors file with every global
//                           tensor whole
//   convert PATH --to DIR --set parallel.dp=4 [--set ...]
//                           a trainer checkpoint rewritten for another
//                           parallel layout (train/checkpoint_layout.h)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "tessera/base/checksum.h"
#include "tessera/parallel/checkpoint/checkpoint_convert.h"
#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/checkpoint_root.h"
#include "tessera/parallel/checkpoint/safetensors.h"
#include "tessera/train/checkpoint_layout.h"

namespace tessera::cli {
namespace {

namespace ckpt = parallel::checkpoint;
namespace fs = std::filesystem;

struct CkptArgs {
  std::string path;
  bool json = false;
  std::string merge_out;
  bool force = false;
  std::string to;
  std::vector<std::string> sets;
};

std::string ShapeText(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// A checkpoint directory, or the latest checkpoint of a folder of them.
StatusOr<ckpt::CheckpointReader> OpenCheckpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec) && !fs::exists(fs::path(path) / ckpt::kIndexFileName, ec)) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<ckpt::CheckpointEntry> latest, ckpt::LatestCheckpoint(path));
    if (latest) {
      std::fprintf(stderr, "using the latest checkpoint under %s: %s\n", path.c_str(), latest->dir.c_str());
      return ckpt::CheckpointReader::Open(latest->dir);
    }
  }
  return ckpt::CheckpointReader::Open(path);
}

bool IsSingleFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

Status InspectFile(const CkptArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(ckpt::SafetensorsFile file, ckpt::SafetensorsFile::Open(a.path));
  if (a.json) {
    nlohmann::json j = {{"path", a.path}, {"kind", "safetensors"}, {"bytes", file.file_size()},
                        {"metadata", file.metadata()}, {"tensors", nlohmann::json::array()}};
    for (const auto& e : file.tensors()) {
      j["tensors"].push_back({{"name", e.spec.name}, {"dtype", ckpt::StorageDtypeName(e.spec.dtype)},
                              {"shape", e.spec.shape}, {"bytes", e.end - e.begin}});
    }
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return Status::Ok();
  }
  std::printf("safetensors file: %s (%llu bytes, header %llu bytes)\n", a.path.c_str(),
              static_cast<unsigned long long>(file.file_size()), static_cast<unsigned long long>(file.header_size()));
  for (const auto& [k, v] : file.metadata()) std::printf("metadata: %s = %s\n", k.c_str(), v.c_str());
  size_t width = 4;
  for (const auto& e : file.tensors()) width = std::max(width, e.spec.name.size());
  std::printf("tensors (%zu):\n", file.tensors().size());
  for (const auto& e : file.tensors()) {
    std::printf("  %-*s  %-7s  %-20s  %llu bytes\n", static_cast<int>(width), e.spec.name.c_str(),
                std::string(ckpt::StorageDtypeName(e.spec.dtype)).c_str(), ShapeText(e.spec.shape).c_str(),
                static_cast<unsigned long long>(e.end - e.begin));
  }
  return Status::Ok();
}

Status Inspect(const CkptArgs& a) {
  if (IsSingleFile(a.path)) return InspectFile(a);
  TESSERA_ASSIGN_OR_RETURN(ckpt::CheckpointReader reader, OpenCheckpoint(a.path));
  const ckpt::CheckpointIndex& index = reader.index();
  uint64_t total = 0;
  for (const auto& [file, info] : index.files) total += info.bytes;
  if (a.json) {
    nlohmann::json j = {{"path", reader.dir().string()}, {"kind", "checkpoint"},
                        {"format", ckpt::kCheckpointFormat}, {"version", ckpt::kCheckpointVersion},
                        {"step", index.step}, {"metadata", index.metadata}, {"bytes", total},
                        {"tensors", nlohmann::json::array()}, {"files", nlohmann::json::array()}};
    for (const auto& [name, t] : index.tensors) {
      j["tensors"].push_back({{"name", name}, {"dtype", ckpt::StorageDtypeName(t.dtype)}, {"shape", t.shape},
                              {"slices", t.slices.size()}});
    }
    for (const auto& [file, info] : index.files) {
      j["files"].push_back({{"name", file}, {"bytes", info.bytes}, {"xxh3_64", base::HexDigest(info.xxh3_64)}});
    }
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return Status::Ok();
  }
  std::printf("checkpoint: %s\nstep: %lld\n", reader.dir().c_str(), static_cast<long long>(index.step));
  std::string keys;
  for (const auto& [key, value] : index.metadata.items()) keys += (keys.empty() ? "" : ", ") + key;
  std::printf("metadata keys: %s\n", keys.empty() ? "(none)" : keys.c_str());
  size_t width = 4;
  for (const auto& [name, t] : index.tensors) width = std::max(width, name.size());
  std::printf("tensors (%zu):\n", index.tensors.size());
  for (const auto& [name, t] : index.tensors) {
    std::printf("  %-*s  %-7s  %-20s  %zu slice%s\n", static_cast<int>(width), name.c_str(),
                std::string(ckpt::StorageDtypeName(t.dtype)).c_str(), ShapeText(t.shape).c_str(), t.slices.size(),
                t.slices.size() == 1 ? "" : "s");
  }
  std::printf("files (%zu, %llu bytes):\n", index.files.size(), static_cast<unsigned long long>(total));
  for (const auto& [file, info] : index.files) {
    std::printf("  %s  %llu bytes  xxh3 %s\n", file.c_str(), static_cast<unsigned long long>(info.bytes),
                base::HexDigest(info.xxh3_64).c_str());
  }
  return Status::Ok();
}

Status Verify(const CkptArgs& a) {
  if (IsSingleFile(a.path)) {
    TESSERA_ASSIGN_OR_RETURN(ckpt::SafetensorsFile file, ckpt::SafetensorsFile::Open(a.path));
    std::printf("ok: %zu tensors, 1 file, %llu bytes verified (structure only: a lone file has no digest)\n",
                file.tensors().size(), static_cast<unsigned long long>(file.file_size()));
    return Status::Ok();
  }
  TESSERA_ASSIGN_OR_RETURN(ckpt::CheckpointReader reader, OpenCheckpoint(a.path));
  TESSERA_ASSIGN_OR_RETURN(ckpt::VerifyReport report, reader.Verify());
  std::printf("ok: %lld tensors, %lld files, %llu bytes verified\n", static_cast<long long>(report.tensors),
              static_cast<long long>(report.files), static_cast<unsigned long long>(report.bytes));
  return Status::Ok();
}

// One target per flag: --merge (one file) or --to (another layout).
Status Convert(const CkptArgs& a) {
  if (a.merge_out.empty() == a.to.empty()) {
    return InvalidArgument("convert needs one target: --merge OUT.safetensors, or --to DIR with --set "
                           "parallel.<key>=<value> for the new layout");
  }
  TESSERA_ASSIGN_OR_RETURN(ckpt::CheckpointReader reader, OpenCheckpoint(a.path));
  if (!a.to.empty()) {
    const fs::path src = reader.dir();
    TESSERA_ASSIGN_OR_RETURN(train::LayoutConversion done, train::ConvertCheckpointLayout(src, a.to, a.sets));
    std::printf("wrote step %lld for %d ranks (%s) to %s\n", static_cast<long long>(done.step), done.world_size,
                done.mesh.c_str(), a.to.c_str());
    return Status::Ok();
  }
  if (!a.sets.empty()) return InvalidArgument("--set applies to --to only");
  TESSERA_ASSIGN_OR_RETURN(ckpt::MergeReport report, ckpt::MergeToSafetensors(reader, a.merge_out, a.force));
  std::printf("wrote %lld tensors (%llu bytes) to %s\n", static_cast<long long>(report.tensors),
              static_cast<unsigned long long>(report.bytes), a.merge_out.c_str());
  return Status::Ok();
}

}  // namespace

void RegisterCkptCommand(CLI::App& app) {
  CLI::App* ckpt_cmd = app.add_subcommand("ckpt", "inspect, verify and convert sharded checkpoints");
  ckpt_cmd->require_subcommand(1);
  const char* kPathHelp = "checkpoint directory, folder of step-N checkpoints (latest), or .safetensors file";

  auto inspect = std::make_shared<CkptArgs>();
  CLI::App* i = ckpt_cmd->add_subcommand("inspect", "step, metadata, tensors (dtype, shape, slices) and files");
  i->add_option("path", inspect->path, kPathHelp)->required();
  i->add_flag("--json", inspect->json, "print a JSON document");
  i->callback([inspect] { ExitWith(Inspect(*inspect)); });

  auto verify = std::make_shared<CkptArgs>();
  CLI::App* v = ckpt_cmd->add_subcommand("verify", "check every shard's size, XXH3-64 digest, structure and tiling");
  v->add_option("path", verify->path, kPathHelp)->required();
  v->callback([verify] { ExitWith(Verify(*verify)); });

  auto convert = std::make_shared<CkptArgs>();
  CLI::App* c = ckpt_cmd->add_subcommand("convert", "write a checkpoint in another layout");
  c->add_option("path", convert->path, "checkpoint directory or folder of step-N checkpoints (latest)")->required();
  c->add_option("--merge", convert->merge_out, "one standard safetensors file holding every tensor whole");
  c->add_flag("--force", convert->force, "replace the output file if it exists");
  c->add_option("--to", convert->to, "a new checkpoint directory for the layout the --set options give");
  c->add_option("--set", convert->sets, "key=value over the config stored in the checkpoint (parallel.dp=4, ...)");
  c->callback([convert] { ExitWith(Convert(*convert)); });
}
TESSERA_CLI_COMMAND(35, RegisterCkptCommand);

}  // namespace tessera::cli
