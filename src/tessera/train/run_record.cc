#include "tessera/train/run_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tessera::train {

namespace {

// Keeps the rows of steps <= `step` of a metrics file (a torn last line from
// a crash does not parse and goes too), replacing it atomically.
Status KeepRowsUpTo(const std::string& path, int64_t step, int64_t* highest = nullptr) {
  std::string kept;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object() || !row.contains("step") || !row["step"].is_number_integer()) continue;
    if (highest != nullptr) *highest = std::max(*highest, row["step"].get<int64_t>());
    if (row["step"].get<int64_t>() <= step) kept += line + "\n";
  }
  return WriteFileAtomic(path, kept);
}

}  // namespace

StatusOr<std::unique_ptr<RunRecord>> RunRecord::Create(const std::string& dir, int64_t resume_step) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create run directory '{}': {}", dir, ec.message());
  std::unique_ptr<RunRecord> r(new RunRecord(dir));
  std::string path = dir + "/metrics.jsonl";
  if (resume_step >= 0) TESSERA_RETURN_IF_ERROR(KeepRowsUpTo(path, resume_step, &r->last_step_before_resume_));
  r->metrics_ = std::fopen(path.c_str(), resume_step >= 0 ? "a" : "w");
  if (r->metrics_ == nullptr) return IoError("cannot open '{}': {}", path, std::strerror(errno));
  return r;
}

Status RunRecord::Rewind(int64_t step) {
  const std::string path = dir_ + "/metrics.jsonl";
  if (metrics_ != nullptr) std::fclose(metrics_);
  metrics_ = nullptr;
  TESSERA_RETURN_IF_ERROR(KeepRowsUpTo(path, step));
  metrics_ = std::fopen(path.c_str(), "a");
  if (metrics_ == nullptr) return IoError("cannot open '{}': {}", path, std::strerror(errno));
  return Status::Ok();
}

Status AppendEvent(const std::string& run_dir, nlohmann::json event) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (!event.contains("time")) {
    event["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  const std::string line = event.dump() + "\n";
  const std::string path = run_dir + "/events.jsonl";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot open '{}': {}", path, std::strerror(errno));
  // One write(2) per line: lines of concurrent writers (the launcher's
  // agent, rank 0) never interleave.
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) return IoError("cannot append to '{}': {}", path, std::strerror(err));
  return Status::Ok();
}

RunRecord::~RunRecord() {
  if (metrics_ != nullptr) std::fclose(metrics_);
}

Status RunRecord::AppendMetrics(const nlohmann::json& row) {
  std::string line = row.dump() + "\n";
  if (std::fputs(line.c_str(), metrics_) < 0 || std::fflush(metrics_) != 0) {
    return IoError("cannot append to '{}/metrics.jsonl': {}", dir_, std::strerror(errno));
  }
  return Status::Ok();
}

Status RunRecord::WriteJson(const std::string& name, const nlohmann::json& value) {
  return WriteFileAtomic(dir_ + "/" + name, value.dump(2) + "\n");
}

}  // namespace tessera::train
