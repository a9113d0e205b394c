#include "selinux/label.h"

#include <selinux/selinux.h>

#include <string>

#include <gtest/gtest.h>

namespace podshim::selinux {
namespace {

TEST(McsLevel, ParsesContainerLevels) {
  struct Case {
    const char* in;
    std::vector<uint32_t> cats;
  } cases[] = {
      {"s0", {}}, {"s0:c0", {0}}, {"s0:c1023", {1023}}, {"s0:c124,c675", {124, 675}},
      {"s0:c0,c1023", {0, 1023}},
  };
  for (const auto& c : cases) {
    auto l = McsLevel::parse(c.in);
    ASSERT_TRUE(l) << c.in << ": " << l.error().message;
    EXPECT_EQ(l->categories(), c.cats) << c.in;
    EXPECT_EQ(l->str(), c.in);  // round trip
    EXPECT_EQ(l->is_shared(), c.cats.empty());
  }
}

TEST(McsLevel, RefusesWhatIsNotAContainerLevel) {
  for (const char* bad :
       {"", "s1", "s0:", "s0:c", "s0:c1024", "s0:c99999999999999999999", "s0:c5,c5", "s0:c7,c3",
        "s0:c1,c2,c3", "s0:c01", "s0:c1,", "s0:,c1", "s0-s0:c0.c1023", "s0:c0.c1023", "s0:x1",
        "s0:c-1", "s0:c1 ", " s0", "c1,c2", "s0:c1;c2"}) {
    auto l = McsLevel::parse(bad);
    EXPECT_FALSE(l) << "accepted '" << bad << "' as " << (l ? l->str() : "");
    if (!l) {
      EXPECT_NE(l.error().message.find("'"), std::string::npos) << l.error().message;
    }
  }
}

TEST(McsLevel, FromCategoriesValidates) {
  EXPECT_EQ(McsLevel::from_categories({3, 9})->str(), "s0:c3,c9");
  EXPECT_EQ(McsLevel::from_categories({})->str(), "s0");
  EXPECT_FALSE(McsLevel::from_categories({9, 3}));
  EXPECT_FALSE(McsLevel::from_categories({1024}));
  EXPECT_FALSE(McsLevel::from_categories({1, 2, 3}));
}

TEST(Label, ParsesAndSplits) {
  auto l = Label::parse("system_u:system_r:container_t:s0:c124,c675");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->user(), "system_u");
  EXPECT_EQ(l->role(), "system_r");
  EXPECT_EQ(l->type(), "container_t");
  EXPECT_EQ(l->level(), "s0:c124,c675");
  EXPECT_EQ(l->str(), "system_u:system_r:container_t:s0:c124,c675");
  auto m = l->mcs_level();
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->categories(), (std::vector<uint32_t>{124, 675}));

  // Ranges are valid labels (unconfined users carry them) but not container levels.
  auto u = Label::parse("unconfined_u:unconfined_r:unconfined_t:s0-s0:c0.c1023");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->level(), "s0-s0:c0.c1023");
  EXPECT_FALSE(u->mcs_level());
}

TEST(Label, RefusesMalformedLabels) {
  for (const char* bad : {"", "container_t", "a:b", "system_u:system_r:container_t",
                          "system_u:system_r::s0", ":system_r:container_t:s0",
                          "system_u:system_r:container_t:", "system_u:system_r:con\"tainer_t:s0",
                          "system_u:system_r:container_t:s0:c1\",c2", "sys tem_u:r:t:s0",
                          "system_u:system_r:container,t:s0", "u:r:t:s0\n", "u:r:t:S0",
                          "u:r:t:c1", "u:r:t:s0:c1=x"}) {
    auto l = Label::parse(bad);
    EXPECT_FALSE(l) << "accepted '" << bad << "'";
  }
  std::string with_nul("u:r:t:s0\0x", 10);
  EXPECT_FALSE(Label::parse(with_nul));
}

TEST(Label, ErrorsNameTheInput) {
  auto l = Label::parse("system_u:system_r:bad\"type:s0");
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().message.find("system_u:system_r:bad\"type:s0"), std::string::npos)
      << l.error().message;
  EXPECT_EQ(l.error().code, EINVAL);
}

TEST(Label, MakeAndModify) {
  auto l = Label::make("system_u", "object_r", "container_file_t", "s0:c1,c2");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->str(), "system_u:object_r:container_file_t:s0:c1,c2");
  auto t = l->with_type("container_ro_file_t");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->str(), "system_u:object_r:container_ro_file_t:s0:c1,c2");
  auto s = l->with_level("s0");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->str(), "system_u:object_r:container_file_t:s0");
  EXPECT_FALSE(l->with_type("x:y"));
  EXPECT_FALSE(l->with_level("s0\"c1"));
  EXPECT_FALSE(Label::make("", "object_r", "t", "s0"));
  // Round trip through parse.
  EXPECT_EQ(*Label::parse(l->str()), *l);
}

TEST(FileLabel, PrivateKeepsTheContainerLevel) {
  auto proc = Label::parse("system_u:system_r:container_t:s0:c715,c811");
  ASSERT_TRUE(proc);
  auto priv = file_label_for(*proc, Sharing::Private);
  ASSERT_TRUE(priv) << priv.error().message;
  EXPECT_EQ(priv->str(), "system_u:object_r:container_file_t:s0:c715,c811");
  auto shared = file_label_for(*proc, Sharing::Shared);
  ASSERT_TRUE(shared) << shared.error().message;
  EXPECT_EQ(shared->str(), "system_u:object_r:container_file_t:s0");
}

TEST(FileLabel, TypeIsConfigurable) {
  auto proc = Label::parse("system_u:system_r:container_t:s0:c1,c2");
  FileLabelConfig cfg;
  cfg.file_type = "container_ro_file_t";
  EXPECT_EQ(file_label_for(*proc, Sharing::Private, cfg)->str(),
            "system_u:object_r:container_ro_file_t:s0:c1,c2");
  cfg.file_type = "bad type";
  EXPECT_FALSE(file_label_for(*proc, Sharing::Private, cfg));
}

TEST(FileLabel, PrivateNeedsAContainerLevel) {
  auto u = Label::parse("unconfined_u:unconfined_r:unconfined_t:s0-s0:c0.c1023");
  ASSERT_TRUE(u);
  auto r = file_label_for(*u, Sharing::Private);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("s0-s0:c0.c1023"), std::string::npos) << r.error().message;
  // Shared does not look at the level at all.
  EXPECT_TRUE(file_label_for(*u, Sharing::Shared));
}

TEST(Enabled, OverrideSeam) {
  set_enabled_override_for_testing(true);
  EXPECT_TRUE(selinux_enabled());
  set_enabled_override_for_testing(false);
  EXPECT_FALSE(selinux_enabled());
  set_enabled_override_for_testing(std::nullopt);
  // The host's own answer: whatever it is, it must match libselinux.
  EXPECT_EQ(selinux_enabled(), ::is_selinux_enabled() == 1);
}

}  // namespace
}  // namespace podshim::selinux
