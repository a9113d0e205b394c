#include "base/quantity.h"

#include <gtest/gtest.h>

namespace podshim::quantity {
namespace {

TEST(Quantity, CpuTable) {
  struct {
    const char* in;
    int64_t milli;
  } cases[] = {
      {"100m", 100}, {"0.5", 500},   {"2", 2000},      {"1e3", 1000000}, {"1", 1000},
      {"0", 0},      {"0.0001", 1},  {"1.0005", 1001}, {"250m", 250},    {".5", 500},
      {"5.", 5000},  {"+1", 1000},   {"1k", 1000000},  {"100u", 1},      {"1500000n", 2},
      {"1E-3", 1},   {"2e-3", 2},    {"1.5", 1500},    {"-0", 0},        {"0m", 0},
      {"1Ki", 1024000},
  };
  for (const auto& c : cases) {
    auto r = parse_cpu_milli(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error().message;
    EXPECT_EQ(*r, c.milli) << c.in;
  }
}

TEST(Quantity, MemoryTable) {
  struct {
    const char* in;
    int64_t bytes;
  } cases[] = {
      {"128974848", 128974848}, {"129e6", 129000000},     {"129M", 129000000},
      {"123Mi", 128974848},     {"1G", 1000000000},       {"1.5Gi", 1610612736},
      {"1Ki", 1024},            {"0.1Ki", 103},           {"1Ei", 1152921504606846976},
      {"1E", 1000000000000000000}, {"1e0", 1},            {"100m", 1},
      {"1.5", 2},               {"9223372036854775807", INT64_MAX},
      {"64Mi", 67108864},       {"0.5Mi", 524288},
  };
  for (const auto& c : cases) {
    auto r = parse_memory_bytes(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error().message;
    EXPECT_EQ(*r, c.bytes) << c.in;
  }
}

TEST(Quantity, ErrorsNameTheInput) {
  for (const char* bad : {"", "abc", "1x", "1.2.3", "--1", "1 ", " 1", "Mi", "1e", "1e1.5", "0x10",
                          "1ee3", "1mi", "1KI", "."}) {
    auto r = parse_memory_bytes(bad);
    ASSERT_FALSE(r) << "'" << bad << "' parsed as " << *r;
    EXPECT_EQ(r.error().code, EINVAL) << bad;
    EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos)
        << r.error().message;
  }
  auto neg = parse_cpu_milli("-100m");
  ASSERT_FALSE(neg);
  EXPECT_NE(neg.error().message.find("negative"), std::string::npos);
  EXPECT_NE(neg.error().message.find("-100m"), std::string::npos);
  for (const char* big : {"9223372036854775808", "10Ei", "1e19", "1e999999", "99999999999999999999"}) {
    auto r = parse_memory_bytes(big);
    ASSERT_FALSE(r) << big;
    EXPECT_EQ(r.error().code, ERANGE) << big;
  }
  // In milli-units the cpu range is 1000 times smaller.
  EXPECT_FALSE(parse_cpu_milli("9223372036854776"));
  EXPECT_EQ(*parse_cpu_milli("9223372036854775m"), 9223372036854775);
}

}  // namespace
}  // namespace podshim::quantity
