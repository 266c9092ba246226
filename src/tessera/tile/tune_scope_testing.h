// Tests only: a fresh autotuner cache file (in a directory that does not
// exist yet) and tuning mode for the lifetime of a TuneScope, both restored
// after; Slurp reads a file whole. Not thread-safe (one scope at a time).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "tessera/tile/autotune.h"

namespace tessera::tile::testing {

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TuneScope {
 public:
  explicit TuneScope(TuneMode mode) {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-tune-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    path_ = (dir_ / "sub" / "tune.json").string();
    SetTuneCachePathOverride(path_);
    SetTuneModeOverride(mode);
  }
  ~TuneScope() {
    SetTuneModeOverride(std::nullopt);
    SetTuneCachePathOverride("");
    std::filesystem::remove_all(dir_);
  }
  TuneScope(const TuneScope&) = delete;
  TuneScope& operator=(const TuneScope&) = delete;
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace tessera::tile::testing
