#include "base/log.h"

#include <gtest/gtest.h>

namespace podshim::log {
namespace {

TEST(Log, StderrLineHasPriorityPrefixAndFields) {
  EXPECT_EQ(format_stderr_line(Level::Warning, {{"CONTAINER_ID", "abc"}}, "resize refused"),
            "<4>resize refused CONTAINER_ID=abc\n");
  // Newlines inside a message would split the record in journald.
  EXPECT_EQ(format_stderr_line(Level::Err, {}, "a\nb"), "<3>a b\n");
}

TEST(Log, LevelsFilter) {
  init(Target::Stderr, Level::Notice);
  EXPECT_TRUE(enabled(Level::Err));
  EXPECT_TRUE(enabled(Level::Notice));
  EXPECT_FALSE(enabled(Level::Info));
  set_level(Level::Debug);
  EXPECT_TRUE(enabled(Level::Debug));
  init(Target::Null, Level::Debug);
  EXPECT_FALSE(enabled(Level::Err));
}

TEST(Log, ParseLevel) {
  Level l{};
  EXPECT_TRUE(parse_level("debug", &l));
  EXPECT_EQ(l, Level::Debug);
  EXPECT_TRUE(parse_level("warn", &l));
  EXPECT_EQ(l, Level::Warning);
  EXPECT_FALSE(parse_level("loud", &l));
}

}  // namespace
}  // namespace podshim::log
