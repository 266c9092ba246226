#include "tessera/base/logging.h"

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
