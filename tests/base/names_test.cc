#include "base/names.h"

#include <gtest/gtest.h>

namespace podshim {
namespace {

enum class Shade { Dark, Light, Mid };
constexpr Names<Shade, 3> kShades{{{{Shade::Dark, "dark"}, {Shade::Light, "light"}, {Shade::Mid, "mid"}}}};

TEST(Names, EachValueRoundTripsThroughItsName) {
  for (Shade s : {Shade::Dark, Shade::Light, Shade::Mid}) {
    auto back = kShades.parse(kShades.name(s), "shade");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, s);
  }
  static_assert(kShades.name(Shade::Light) == "light");
}

TEST(Names, AValueOutsideTheTableIsWrittenAsTheFirstName) {
  EXPECT_EQ(kShades.name(static_cast<Shade>(7)), "dark");
}

TEST(Names, AnUnknownNameIsRefusedNamingTheInputAndEveryAcceptedName) {
  auto r = kShades.parse("Dark", "shade");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(r.error().message, "invalid shade 'Dark' (want dark, light or mid)");
  constexpr Names<Shade, 1> kOne{{{{Shade::Mid, "mid"}}}};
  EXPECT_EQ(kOne.parse("", "shade").error().message, "invalid shade '' (want mid)");
}

}  // namespace
}  // namespace podshim
