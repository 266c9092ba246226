#include "tessera/base/logging.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "tessera/base/knobs.h"

namespace tessera::base {
namespace {

Knob<std::string> kDebugKnob("TESSERA_DEBUG", "WARN", "log level: TRACE, DEBUG, INFO, WARN, ERROR or OFF");
Knob<std::string> kLogKnob("TESSERA_LOG", "", "alias of TESSERA_DEBUG (TESSERA_LOG=debug), read when that is unset");

std::atomic<int> g_level{-1};
std::atomic<int> g_rank{-1};

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("tessera", sink);
    l->set_pattern("%v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kOff: return "OFF";
  }
  return "?";
}

}  // namespace

bool ParseLogLevel(std::string_view text, LogLevel* out) {
  std::string up(text);
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
  static const std::pair<const char*, LogLevel> kNames[] = {
      {"TRACE", LogLevel::kTrace},  {"DEBUG", LogLevel::kDebug}, {"INFO", LogLevel::kInfo}, {"WARN", LogLevel::kWarn},
      {"WARNING", LogLevel::kWarn}, {"ERROR", LogLevel::kError}, {"OFF", LogLevel::kOff},   {"NONE", LogLevel::kOff}};
  for (const auto& [name, level] : kNames) {
    if (up == name) {
      *out = level;
      return true;
    }
  }
  return false;
}

LogLevel LogLevelFromEnvironment() {
  LogLevel parsed = LogLevel::kWarn;
  const char* env = std::getenv("TESSERA_DEBUG");
  if (env == nullptr) env = std::getenv("TESSERA_LOG");
  if (env != nullptr && !ParseLogLevel(env, &parsed)) parsed = LogLevel::kWarn;
  return parsed;
}

LogLevel CurrentLogLevel() {
  int level = g_level.load(std::memory_order_relaxed);
  if (level < 0) {
    level = static_cast<int>(LogLevelFromEnvironment());
    g_level.store(level, std::memory_order_relaxed);
  }
  return static_cast<LogLevel>(level);
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
void SetLogRank(int rank) { g_rank.store(rank); }

void LogLine(LogLevel level, const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  int rank = g_rank.load(std::memory_order_relaxed);
  std::string prefix = rank >= 0 ? fmt::format("[tessera rank {}]", rank) : std::string("[tessera]");
  Logger().log(spdlog::level::info, "{} {} {}:{} {}", prefix, LevelName(level), base, line, message);
}

}  // namespace tessera::base
