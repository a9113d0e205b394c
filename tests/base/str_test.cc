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

// Unicode 15 table 3-7 at every edge, and after runs of ASCII long enough
// for the eight-byte fast path.
TEST(Strings, Utf8AtEveryEdgeOfTable37) {
  for (std::string ok : {"", "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
                         "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_TRUE(valid_utf8(ok)) << ok.size();
    EXPECT_TRUE(valid_utf8("0123456789abcdef" + ok + "x")) << ok.size();
    if (!ok.empty() && static_cast<unsigned char>(ok[0]) >= 0x80) {
      EXPECT_EQ(utf8_sequence(ok, 0), ok.size());
    }
  }
  for (std::string bad : {"\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xc2", "\xe0\x9f\xbf", "\xed\xa0\x80",
                          "\xed\xbf\xbf", "\xef\xbf", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
                          "\xff", "\xc2\x41"}) {
    EXPECT_FALSE(valid_utf8(bad)) << bad.size();
    EXPECT_FALSE(valid_utf8("0123456789abcdef" + bad)) << bad.size();
    EXPECT_EQ(utf8_sequence(bad, 0), 0u);
  }
}

}  // namespace
}  // namespace podshim::str
