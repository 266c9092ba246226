// RunRecord: the files a training run leaves under runs/<name>/:
//   config.json    the fully resolved configuration
//   metrics.jsonl  one JSON object per step (and per evaluation), flushed
//                  as written so a crash keeps every finished step
//   summary.json   final figures, written atomically (temp file + rename)
//   events.jsonl   fault-tolerance events (AppendEvent), across restarts
// Errors name the path. Single-threaded use.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/base/file_io.h"
#include "tessera/base/status.h"

namespace tessera::train {

class RunRecord {
 public:
  // A fresh record; or, for a run resumed after `resume_step`, the existing
  // metrics.jsonl's rows up to that step kept (rows of later steps, which
  // the resumed run repeats, dropped) and appended to.
  static StatusOr<std::unique_ptr<RunRecord>> Create(const std::string& dir, int64_t resume_step = -1);
  ~RunRecord();

  const std::string& dir() const { return dir_; }
  // For a resumed run: the highest step the existing metrics.jsonl had
  // (the last step finished before the interruption; -1 if none).
  int64_t last_step_before_resume() const { return last_step_before_resume_; }
  Status AppendMetrics(const nlohmann::json& row);
  // Drops the rows of steps after `step` (a rollback replays them).
  Status Rewind(int64_t step);
  // Writes `name` inside the run directory atomically.
  Status WriteJson(const std::string& name, const nlohmann::json& value);

 private:
  explicit RunRecord(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  FILE* metrics_ = nullptr;
  int64_t last_step_before_resume_ = -1;
};

// Appends one event (a JSON object; "time" in Unix seconds added when
// missing) as a line of <run_dir>/events.jsonl — recoveries, skipped and
// rolled-back steps, failures the launcher's agent saw. Never truncated:
// the history of every attempt of the run.
Status AppendEvent(const std::string& run_dir, nlohmann::json event);

using tessera::WriteFileAtomic;  // base/file_io.h

}  // namespace tessera::train
