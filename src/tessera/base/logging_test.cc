#include "tessera/base/logging.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace tessera::base {
namespace {

TEST(Logging, ParseLevel) {
  LogLevel level = LogLevel::kOff;
  EXPECT_TRUE(ParseLogLevel("INFO", &level));
  EXPECT_EQ(level, LogLevel::kInfo);
  EXPECT_TRUE(ParseLogLevel("trace", &level));
  EXPECT_EQ(level, LogLevel::kTrace);
  EXPECT_TRUE(ParseLogLevel("Warning", &level));
  EXPECT_EQ(level, LogLevel::kWarn);
  EXPECT_TRUE(ParseLogLevel("none", &level));
  EXPECT_EQ(level, LogLevel::kOff);
  EXPECT_TRUE(ParseLogLevel("DEBUG", &level));
  EXPECT_EQ(level, LogLevel::kDebug);
  level = LogLevel::kError;
  EXPECT_FALSE(ParseLogLevel("verbose", &level));
  EXPECT_FALSE(ParseLogLevel("", &level));
  EXPECT_FALSE(ParseLogLevel("INFO ", &level));
  EXPECT_EQ(level, LogLevel::kError);  // untouched on failure
}

TEST(Logging, LevelFiltersAndLineFormat) {
  const LogLevel saved = CurrentLogLevel();
  SetLogLevel(LogLevel::kInfo);
  testing::internal::CaptureStderr();
  TLOG(DEBUG, "hidden {}", 1);
  TLOG(INFO, "shown {} and {}", 2, "three");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("hidden"), std::string::npos) << err;
  EXPECT_NE(err.find("[tessera] INFO logging_test.cc:"), std::string::npos) << err;
  EXPECT_NE(err.find("shown 2 and three"), std::string::npos) << err;

  SetLogRank(3);
  SetLogLevel(LogLevel::kOff);
  testing::internal::CaptureStderr();
  TLOG(ERROR, "nothing at OFF");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  SetLogLevel(LogLevel::kWarn);
  testing::internal::CaptureStderr();
  TLOG(ERROR, "rank shown");
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[tessera rank 3] ERROR"), std::string::npos) << err;
  SetLogRank(-1);
  SetLogLevel(saved);
}

TEST(Logging, TesseraLogIsAnAliasOfTesseraDebug) {
  const char* saved_debug = std::getenv("TESSERA_DEBUG");
  const char* saved_log = std::getenv("TESSERA_LOG");
  const std::string debug = saved_debug ? saved_debug : "", log = saved_log ? saved_log : "";
  unsetenv("TESSERA_DEBUG");
  unsetenv("TESSERA_LOG");
  EXPECT_EQ(LogLevelFromEnvironment(), LogLevel::kWarn);
  setenv("TESSERA_LOG", "debug", 1);
  EXPECT_EQ(LogLevelFromEnvironment(), LogLevel::kDebug);
  setenv("TESSERA_DEBUG", "ERROR", 1);  // the primary name wins
  EXPECT_EQ(LogLevelFromEnvironment(), LogLevel::kError);
  unsetenv("TESSERA_DEBUG");
  setenv("TESSERA_LOG", "loud", 1);
  EXPECT_EQ(LogLevelFromEnvironment(), LogLevel::kWarn);
  if (saved_debug)
    setenv("TESSERA_DEBUG", debug.c_str(), 1);
  else
    unsetenv("TESSERA_DEBUG");
  if (saved_log)
    setenv("TESSERA_LOG", log.c_str(), 1);
  else
    unsetenv("TESSERA_LOG");
}

TEST(Logging, EnabledFollowsLevel) {
  const LogLevel saved = CurrentLogLevel();
  SetLogLevel(LogLevel::kWarn);
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kWarn));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  SetLogLevel(saved);
}

}  // namespace
}  // namespace tessera::base
