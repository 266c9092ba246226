#include "tessera/base/knobs.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "tessera/base/logging.h"

namespace tessera::base {
namespace {

Knob<int64_t> kTestInt("TESSERA_TEST_KNOB_INT", 7, "an integer for tests");
Knob<double> kTestDouble("TESSERA_TEST_KNOB_DOUBLE", 0.5, "a double for tests");
Knob<bool> kTestBool("TESSERA_TEST_KNOB_BOOL", false, "a flag for tests");
Knob<std::string> kTestString("TESSERA_TEST_KNOB_STRING", "ring", "a string for tests");

class KnobsTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    for (const char* name : {"TESSERA_TEST_KNOB_INT", "TESSERA_TEST_KNOB_DOUBLE", "TESSERA_TEST_KNOB_BOOL",
                             "TESSERA_TEST_KNOB_STRING"}) {
      unsetenv(name);
    }
    kTestInt.Reset();
    kTestDouble.Reset();
    kTestBool.Reset();
    kTestString.Reset();
  }
};

TEST_F(KnobsTest, DefaultsWithoutEnvironment) {
  EXPECT_EQ(kTestInt.Get(), 7);
  EXPECT_EQ(kTestDouble.Get(), 0.5);
  EXPECT_FALSE(kTestBool.Get());
  EXPECT_EQ(kTestString.Get(), "ring");
  EXPECT_FALSE(kTestInt.EnvText().has_value());
}

TEST_F(KnobsTest, ParsesEnvironment) {
  setenv("TESSERA_TEST_KNOB_INT", "0x10", 1);
  setenv("TESSERA_TEST_KNOB_DOUBLE", "2.5e3", 1);
  setenv("TESSERA_TEST_KNOB_BOOL", "Yes", 1);
  setenv("TESSERA_TEST_KNOB_STRING", "tree", 1);
  EXPECT_EQ(kTestInt.Get(), 16);
  EXPECT_EQ(kTestDouble.Get(), 2500.0);
  EXPECT_TRUE(kTestBool.Get());
  EXPECT_EQ(kTestString.Get(), "tree");
  EXPECT_EQ(kTestInt.ValueText(), "16");
  EXPECT_EQ(kTestBool.ValueText(), "1");
}

TEST_F(KnobsTest, ValueIsCachedUntilReset) {
  setenv("TESSERA_TEST_KNOB_INT", "3", 1);
  EXPECT_EQ(kTestInt.Get(), 3);
  setenv("TESSERA_TEST_KNOB_INT", "4", 1);
  EXPECT_EQ(kTestInt.Get(), 3);
  kTestInt.Reset();
  EXPECT_EQ(kTestInt.Get(), 4);
}

TEST_F(KnobsTest, SetOverridesEnvironmentAndResetRestores) {
  setenv("TESSERA_TEST_KNOB_STRING", "tree", 1);
  kTestString.Set("halving_doubling");
  EXPECT_EQ(kTestString.Get(), "halving_doubling");
  kTestString.Reset();
  EXPECT_EQ(kTestString.Get(), "tree");
  unsetenv("TESSERA_TEST_KNOB_STRING");
  kTestString.Reset();
  EXPECT_EQ(kTestString.Get(), "ring");
}

TEST_F(KnobsTest, BadEnvironmentValueFallsBackWithWarning) {
  SetLogLevel(LogLevel::kWarn);
  for (const char* bad : {"12abc", "", "seven"}) {
    setenv("TESSERA_TEST_KNOB_INT", bad, 1);
    kTestInt.Reset();
    testing::internal::CaptureStderr();
    EXPECT_EQ(kTestInt.Get(), 7) << "'" << bad << "'";
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("WARN"), std::string::npos) << err;
    EXPECT_NE(err.find("TESSERA_TEST_KNOB_INT"), std::string::npos) << err;
    EXPECT_NE(err.find("using default 7"), std::string::npos) << err;
  }
  setenv("TESSERA_TEST_KNOB_BOOL", "maybe", 1);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(kTestBool.Get());
  EXPECT_NE(testing::internal::GetCapturedStderr().find("TESSERA_TEST_KNOB_BOOL"), std::string::npos);
  setenv("TESSERA_TEST_KNOB_DOUBLE", "1.5x", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(kTestDouble.Get(), 0.5);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("TESSERA_TEST_KNOB_DOUBLE"), std::string::npos);
}

TEST_F(KnobsTest, RegistryListsAndDescribesKnobs) {
  bool found = false;
  std::string previous;
  for (const KnobBase* k : AllKnobs()) {
    EXPECT_LT(previous, k->name());  // sorted, unique
    previous = k->name();
    if (previous == "TESSERA_TEST_KNOB_INT") found = true;
  }
  EXPECT_TRUE(found);
  setenv("TESSERA_TEST_KNOB_DOUBLE", "0.25", 1);
  const std::string text = DescribeKnobs();
  EXPECT_NE(text.find("TESSERA_TEST_KNOB_INT=7 (default 7) — an integer for tests"), std::string::npos) << text;
  EXPECT_NE(text.find("TESSERA_TEST_KNOB_DOUBLE=0.25 (from environment)"), std::string::npos) << text;
  EXPECT_NE(text.find("TESSERA_DEBUG="), std::string::npos) << text;  // declared by logging.cc
}

}  // namespace
}  // namespace tessera::base
