#include "tessera/sim/chrome_trace.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera::sim {
namespace {

TEST(ChromeTraceTest, NamesWithQuotesBackslashesAndControlCharactersRoundTrip) {
  StepResult r;
  const std::string name = std::string("F\"0\\ \n\t\x01 end}]") + "\xc3\xa9";
  r.trace.push_back(TraceEvent{name, 1, 2, 0.5, 0.75});
  const std::string text = ChromeTraceJson(r);
  nlohmann::json j = nlohmann::json::parse(text);  // throws on malformed JSON
  int spans = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++spans;
    EXPECT_EQ(e["name"].get<std::string>(), name);
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(e["tid"], 2);
    EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.5e6);
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.25e6);
  }
  EXPECT_EQ(spans, 1);
  EXPECT_FALSE(j.contains("otherData"));
}

TEST(ChromeTraceTest, NonFiniteTimesAreOmittedNeverEmitted) {
  StepResult r;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  r.trace.push_back(TraceEvent{"ok", 0, 0, 0, 1});
  r.trace.push_back(TraceEvent{"nan", 0, 0, nan, 1});
  r.trace.push_back(TraceEvent{"inf", 0, 1, 0, inf});
  const std::string text = ChromeTraceJson(r);
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  EXPECT_EQ(text.find("nan"), std::string::npos);
  EXPECT_EQ(text.find("Infinity"), std::string::npos);
  EXPECT_EQ(text.find("null"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(text);
  int spans = 0;
  for (const auto& e : j["traceEvents"]) spans += e["ph"] == "X";
  EXPECT_EQ(spans, 1);
  EXPECT_EQ(j["otherData"]["omitted_events"], 2);
}

}  // namespace
}  // namespace tessera::sim
