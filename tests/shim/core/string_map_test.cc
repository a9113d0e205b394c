// StringMap must behave as the std::map<std::string, std::string> it
// replaced: sorted iteration, first-of-duplicates kept by the range
// constructor, set() replacing, and the same JSON.
#include "shim/core/string_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "shim/core/json.h"

namespace podshim::core {
namespace {

std::map<std::string, std::string> as_map(const StringMap& m) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : m) out.emplace(k, v);
  return out;
}

TEST(StringMap, IteratesSortedAndFinds) {
  StringMap m{{"b", "2"}, {"a", "1"}, {"c", ""}};
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.emplace_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(m.size(), 3u);
  ASSERT_NE(m.find("b"), m.end());
  EXPECT_EQ(m.find("b")->second, "2");
  EXPECT_EQ(m.get("c"), std::optional<std::string_view>(""));
  EXPECT_EQ(m.get("d"), std::nullopt);
  EXPECT_FALSE(m.contains("aa"));
}

TEST(StringMap, RangeConstructorKeepsTheFirstOfDuplicates) {
  std::vector<std::pair<std::string, std::string>> v{{"k", "first"}, {"j", "x"}, {"k", "second"}, {"k", "third"}};
  StringMap m(v.begin(), v.end());
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.get("k"), std::optional<std::string_view>("first"));
}

TEST(StringMap, SetReplacesEraseRemovesAndEqualityIsByContent) {
  StringMap m;
  m.set("z", "1");
  m.set("a", "long value that does not fit in a small string buffer");
  m.set("m", "3");
  m.set("z", "replaced, and longer than before");
  EXPECT_EQ(as_map(m), (std::map<std::string, std::string>{
                           {"a", "long value that does not fit in a small string buffer"},
                           {"m", "3"},
                           {"z", "replaced, and longer than before"}}));
  EXPECT_TRUE(m.erase("m"));
  EXPECT_FALSE(m.erase("m"));
  StringMap n{{"z", "replaced, and longer than before"}, {"a", "long value that does not fit in a small string buffer"}};
  EXPECT_EQ(m, n);
  n.set("a", "other");
  EXPECT_FALSE(m == n);
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.begin(), m.end());
}

TEST(StringMap, HoldsAnyBytesIncludingNul) {
  const std::string k("a\0b", 3), v("\0\0x", 3);
  StringMap m;
  m.set(k, v);
  m.set("a", "plain");
  EXPECT_EQ(m.get(k), std::optional<std::string_view>(v));
  EXPECT_EQ(m.get("a"), std::optional<std::string_view>("plain"));
  EXPECT_EQ(m.size(), 2u);
}

TEST(StringMap, SelfAssignAndSetFromItsOwnView) {
  StringMap m{{"a", "1"}, {"b", "2"}};
  m.assign(m.begin(), m.end());
  EXPECT_EQ(as_map(m), (std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}}));
  m.set("c", *m.get("a"));
  EXPECT_EQ(m.get("c"), std::optional<std::string_view>("1"));
}

// Random operations against std::map, and the JSON both give.
TEST(StringMap, AgreesWithStdMapUnderRandomOperations) {
  std::mt19937 rng(7);
  auto str = [&] {
    std::string s(rng() % 24, 'x');
    for (char& c : s) c = static_cast<char>('a' + rng() % 4);
    return s;
  };
  for (int round = 0; round < 200; ++round) {
    std::map<std::string, std::string> ref;
    StringMap m;
    for (int i = 0; i < 20; ++i) {
      const std::string k = str(), v = str();
      switch (rng() % 3) {
        case 0: ref[k] = v; m.set(k, v); break;
        case 1: EXPECT_EQ(ref.erase(k) == 1, m.erase(k)); break;
        default: {
          auto it = ref.find(k);
          EXPECT_EQ(it == ref.end() ? std::nullopt : std::optional<std::string_view>(it->second), m.get(k));
        }
      }
    }
    ASSERT_EQ(as_map(m), ref);
    EXPECT_EQ(m.size(), ref.size());
    // Read from JSON as the std::map was (the writer's side: json_writer_test).
    nlohmann::json b = ref;
    EXPECT_EQ(b.get<StringMap>(), m);
  }
}

TEST(StringMap, FromJsonRefusesNonStringValues) {
  auto j = nlohmann::json::parse(R"({"a": "x", "b": 1})");
  EXPECT_THROW(j.get<StringMap>(), nlohmann::json::type_error);
}

}  // namespace
}  // namespace podshim::core
