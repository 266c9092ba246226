#include "tessera/parallel/checkpoint/checkpoint_root.h"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "tessera/parallel/checkpoint/checkpoint_index.h"
#include "tessera/parallel/checkpoint/file_io.h"

namespace tessera::parallel::checkpoint {

std::string StepDirName(int64_t step) { return fmt::format("step-{:08d}", step); }

std::optional<int64_t> ParseStepDirName(std::string_view name) {
  constexpr std::string_view kPrefix = "step-";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.size() < 8 || digits.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  if (StepDirName(step) != name) return std::nullopt;  // canonical: no extra leading zeros
  return step;
}

StatusOr<std::vector<CheckpointEntry>> ListCheckpoints(const std::filesystem::path& root) {
  std::error_code ec;
  std::vector<CheckpointEntry> found;
  if (!std::filesystem::exists(root, ec)) return found;
  std::filesystem::directory_iterator it(root, ec);
  if (ec) return IoError("cannot list checkpoint folder '{}': {}", root.string(), ec.message());
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::optional<int64_t> step = ParseStepDirName(it->path().filename().string());
    std::error_code entry_ec;
    if (!step || !it->is_directory(entry_ec)) continue;
    if (!std::filesystem::is_regular_file(it->path() / kIndexFileName, entry_ec)) continue;
    found.push_back(CheckpointEntry{*step, it->path()});
  }
  if (ec) return IoError("cannot list checkpoint folder '{}': {}", root.string(), ec.message());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

StatusOr<std::optional<CheckpointEntry>> LatestCheckpoint(const std::filesystem::path& root) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<CheckpointEntry> all, ListCheckpoints(root));
  if (all.empty()) return std::optional<CheckpointEntry>();
  return std::optional<CheckpointEntry>(all.back());
}

StatusOr<std::vector<std::filesystem::path>> KeepLastCheckpoints(const std::filesystem::path& root, int keep) {
  if (keep < 1) return InvalidArgument("keeping {} checkpoints: keep at least 1", keep);
  TESSERA_ASSIGN_OR_RETURN(std::vector<CheckpointEntry> all, ListCheckpoints(root));
  std::vector<std::filesystem::path> deleted;
  if (all.size() <= static_cast<size_t>(keep)) return deleted;
  for (size_t i = 0; i + keep < all.size(); ++i) {
    const std::filesystem::path& dir = all[i].dir;
    std::error_code ec;
    std::filesystem::remove(dir / kIndexFileName, ec);
    if (ec) return IoError("cannot delete '{}': {}", (dir / kIndexFileName).string(), ec.message());
    TESSERA_RETURN_IF_ERROR(SyncDirectory(dir));
    std::filesystem::remove_all(dir, ec);
    if (ec) return IoError("cannot delete old checkpoint '{}': {}", dir.string(), ec.message());
    deleted.push_back(dir);
  }
  TESSERA_RETURN_IF_ERROR(SyncDirectory(root));
  return deleted;
}

}  // namespace tessera::parallel::checkpoint
