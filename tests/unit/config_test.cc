// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "common/socket.h"
#include "tests/support/env_guard.h"

namespace mixccl {
namespace {

using config::Knob;
using testing::EnvGuard;

TEST(Config, IntegersParseAsNcclDoes) {
  {
    EnvGuard g("MIXCCL_FIFO_DEPTH", "12");
    EXPECT_EQ(config::getInt(Knob::kFifoDepth), 12);
  }
  {
    EnvGuard g("MIXCCL_FIFO_DEPTH", "0x10");  // base 0, as NCCL's strtoll(.., 0)
    EXPECT_EQ(config::getInt(Knob::kFifoDepth), 16);
  }
  for (const char* bad : {"12abc", "abc", "1.5", "1e3"}) {
    EnvGuard g("MIXCCL_FIFO_DEPTH", bad);
    EXPECT_EQ(config::getInt(Knob::kFifoDepth), 8) << bad;
  }
  {
    EnvGuard g("MIXCCL_FIFO_DEPTH", "");
    EXPECT_EQ(config::getInt(Knob::kFifoDepth), 8);
  }
}

// strtoll saturates a number beyond int64 (ERANGE); that is no number, so the default applies,
// as NCCL does, instead of INT64_MAX (MIXCCL_SPIN_COUNT: never yield) or INT64_MIN.
TEST(Config, NumbersBeyondInt64AreIgnored) {
  {
    EnvGuard g("MIXCCL_SPIN_COUNT", "99999999999999999999");
    EXPECT_EQ(config::getInt(Knob::kSpinCount), -1);
  }
  {
    EnvGuard g("MIXCCL_SPIN_COUNT", "-99999999999999999999");
    EXPECT_EQ(config::getInt(Knob::kSpinCount), -1);
  }
  {
    EnvGuard g("NCCL_SHM_DISABLE", "99999999999999999999");
    EXPECT_FALSE(config::getBool(Knob::kShmDisable));
  }
}

// A deadline is now + MIXCCL_TIMEOUT in steady_clock nanoseconds: a "never" timeout such as 10^10
// seconds overflowed it into the past, so every wait failed at once.
TEST(Config, HugeTimeoutIsClampedToAFutureDeadline) {
  for (const char* huge : {"10000000000", "9223372036854775807"}) {
    EnvGuard g("MIXCCL_TIMEOUT", huge);
    const int64_t t = config::getInt(Knob::kTimeout);
    EXPECT_EQ(t, 1000000000) << huge;
    const auto now = std::chrono::steady_clock::now();
    EXPECT_GT(now + std::chrono::seconds(t), now) << huge;
    EXPECT_GT(defaultDeadline(), Clock::now()) << huge;
    EXPECT_EQ(config::getString(Knob::kTimeout), "1000000000");
  }
}

// A zero or negative timeout would fail every wait that had to wait at all.
TEST(Config, TimeoutIsAtLeastOneSecond) {
  for (const char* small : {"0", "-5"}) {
    EnvGuard g("MIXCCL_TIMEOUT", small);
    EXPECT_EQ(config::getInt(Knob::kTimeout), 1) << small;
  }
  EnvGuard g("MIXCCL_TIMEOUT", "7");
  EXPECT_EQ(config::getInt(Knob::kTimeout), 7);
}

// NCCL_IB_TIMEOUT is a 5-bit exponent; 0 would mean "retransmit forever" to the verbs.
TEST(Config, IbTimeoutStaysAFiniteExponent) {
  for (const auto& [text, want] : {std::pair{"0", 1}, std::pair{"-3", 1}, std::pair{"40", 31}, std::pair{"14", 14}}) {
    EnvGuard g("NCCL_IB_TIMEOUT", text);
    EXPECT_EQ(config::getInt(Knob::kIbTimeout), want) << text;
  }
}

// Users find the knobs in README.md's configuration table and in docs/TUNING.md's "Every knob"
// table: a knob missing there is one nobody sets, and a stale default misleads. Both documents
// are read from the source tree this test was built from.
std::string readDoc(const char* relative) {
  std::ifstream in(std::string(MIXCCL_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Config, EveryKnobIsDocumentedWithItsDefault) {
  const std::string readme = readDoc("README.md");
  const std::string tuning = readDoc("docs/TUNING.md");
  ASSERT_FALSE(readme.empty()) << "cannot read " << MIXCCL_SOURCE_DIR << "/README.md";
  const size_t everyKnob = tuning.find("## Every knob");
  ASSERT_NE(everyKnob, std::string::npos) << "docs/TUNING.md has no \"Every knob\" section";
  const std::string table = tuning.substr(everyKnob, tuning.find("\n## ", everyKnob + 1) - everyKnob);
  for (int i = 0; i < static_cast<int>(Knob::kCount_); ++i) {
    const Knob k = static_cast<Knob>(i);
    const std::string row = std::string("\n| `") + config::name(k) + "` |";
    EXPECT_NE(readme.find(row), std::string::npos) << config::name(k) << " is missing from README.md's configuration";
    const size_t at = table.find(row);
    if (at == std::string::npos) {
      ADD_FAILURE() << config::name(k) << " is missing from docs/TUNING.md's \"Every knob\" table";
      continue;
    }
    // | `NAME` | type | `default` | meaning |
    const std::string line = table.substr(at + 1, table.find('\n', at + 1) - at - 1);
    const size_t typeEnd = line.find(" | ", row.size() - 1);
    const std::string want = std::string("| `") + config::defaultValue(k) + "` |";
    EXPECT_EQ(line.compare(typeEnd + 1, want.size(), want), 0)
        << config::name(k) << ": docs/TUNING.md says " << line << "; the default is '" << config::defaultValue(k)
        << "'";
  }
}

}  // namespace
}  // namespace mixccl
