// Leveled logging. The level comes from TESSERA_DEBUG (TRACE, DEBUG, INFO,
// WARN, ERROR, OFF; default WARN). Lines go to stderr as
// "[tessera rank R] LEVEL file:line message". Thread-safe.
//   TLOG(INFO, "chose {} because {}", algo, why);
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tessera::base {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

LogLevel CurrentLogLevel();
// TESSERA_DEBUG, else its alias TESSERA_LOG, parsed (WARN when unset or
// unparsable); CurrentLogLevel reads it once.
LogLevel LogLevelFromEnvironment();
void SetLogLevel(LogLevel level);
// Sets the rank shown in every line (-1: none).
void SetLogRank(int rank);
bool ParseLogLevel(std::string_view text, LogLevel* out);
void LogLine(LogLevel level, const char* file, int line, const std::string& message);

inline bool LogEnabled(LogLevel level) { return level >= CurrentLogLevel(); }

}  // namespace tessera::base

#define TESSERA_LOG_LEVEL_TRACE ::tessera::base::LogLevel::kTrace
#define TESSERA_LOG_LEVEL_DEBUG ::tessera::base::LogLevel::kDebug
#define TESSERA_LOG_LEVEL_INFO ::tessera::base::LogLevel::kInfo
#define TESSERA_LOG_LEVEL_WARN ::tessera::base::LogLevel::kWarn
#define TESSERA_LOG_LEVEL_ERROR ::tessera::base::LogLevel::kError

#define TLOG(level, ...)                                                                 \
  do {                                                                                   \
    if (::tessera::base::LogEnabled(TESSERA_LOG_LEVEL_##level)) {                        \
      ::tessera::base::LogLine(TESSERA_LOG_LEVEL_##level, __FILE__, __LINE__,            \
                               ::fmt::format(__VA_ARGS__));                              \
    }                                                                                    \
  } while (0)
