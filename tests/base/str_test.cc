#include "base/str.h"

#include <gtest/gtest.h>

namespace podshim::str {
namespace {

TEST(Strings, TrimSplit) {
  EXPECT_EQ(trim("  a b \n"), "a b");
  EXPECT_EQ(trim(""), "");
  auto v = split("a,,b", ',');
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[1], "");
  EXPECT_TRUE(starts_with("kubepods.slice", "kubepods"));
  EXPECT_TRUE(ends_with("x.scope", ".scope"));
  EXPECT_FALSE(ends_with("e", ".scope"));
}

TEST(Strings, ParseIntegers) {
  EXPECT_EQ(*parse_u64("42\n"), 42u);
  EXPECT_EQ(*parse_i64("-7"), -7);
  EXPECT_EQ(*parse_u64("18446744073709551615"), UINT64_MAX);
  auto big = parse_u64("18446744073709551616");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ERANGE);
  EXPECT_NE(big.error().message.find("18446744073709551616"), std::string::npos);
  EXPECT_FALSE(parse_u64("-1"));
  EXPECT_FALSE(parse_u64("12abc"));
  EXPECT_FALSE(parse_u64(""));
  EXPECT_FALSE(parse_i64("0x10"));
}

}  // namespace
}  // namespace podshim::str
