#include <gtest/gtest.h>

#include "shim/core/quantity.h"

namespace podshim::core {
namespace {

TEST(Quantity, Cpu) {
  struct { const char* in; int64_t milli; } cases[] = {
      {"100m", 100}, {"0.5", 500}, {"2", 2000}, {"1e3", 1000000}, {"0.0001", 1}, {"1.5", 1500}};
  for (auto& c : cases) {
    auto r = parse_cpu_milli(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error().message;
    EXPECT_EQ(*r, c.milli) << c.in;
  }
}

TEST(Quantity, Memory) {
  struct { const char* in; int64_t bytes; } cases[] = {
      {"128974848", 128974848}, {"129e6", 129000000}, {"123Mi", 123LL << 20},
      {"1G", 1000000000}, {"1.5Gi", 3LL << 29}, {"1k", 1000}};
  for (auto& c : cases) {
    auto r = parse_memory_bytes(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error().message;
    EXPECT_EQ(*r, c.bytes) << c.in;
  }
}

TEST(Quantity, GarbageNamesInput) {
  for (const char* bad : {"", "-1", "abc", "1Zi", "1..2", "99999999999999999999Ei"}) {
    auto r = parse_memory_bytes(bad);
    ASSERT_FALSE(r) << bad;
    if (*bad) {
      EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
    }
  }
}

TEST(Quantity, Format) {
  EXPECT_EQ(format_cpu_milli(250), "250m");
  EXPECT_EQ(format_cpu_milli(2000), "2");
  EXPECT_EQ(format_memory_bytes(128 << 20), "128Mi");
  EXPECT_EQ(format_memory_bytes(1000), "1000");
}

}  // namespace
}  // namespace podshim::core
