#include "selinux/mounts.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace podshim::selinux {
namespace {

TEST(Classify, BindFreshAndPseudo) {
  EXPECT_EQ(classify({"/src", "/dst", "bind", {"ro"}}), MountKind::Bind);
  EXPECT_EQ(classify({"/src", "/dst", "", {"ro", "nosuid"}}), MountKind::Bind);
  EXPECT_EQ(classify({"/src", "/dst", "none", {"rbind", "ro"}}), MountKind::Bind);
  EXPECT_EQ(classify({"/src", "/dst", "tmpfs", {"ro,bind"}}), MountKind::Bind);
  EXPECT_EQ(classify({"tmpfs", "/dst", "tmpfs", {"size=64k"}}), MountKind::Fresh);
  EXPECT_EQ(classify({"/dev/sdb1", "/data", "ext4", {}}), MountKind::Fresh);
  EXPECT_EQ(classify({"proc", "/proc", "proc", {}}), MountKind::Pseudo);
  EXPECT_EQ(classify({"sysfs", "/sys", "sysfs", {"ro"}}), MountKind::Pseudo);
  EXPECT_EQ(classify({"mqueue", "/dev/mqueue", "mqueue", {}}), MountKind::Pseudo);
  // "bindfoo" is not "bind".
  EXPECT_EQ(classify({"tmpfs", "/dst", "tmpfs", {"bindfoo"}}), MountKind::Fresh);
}

TEST(SplitOptions, RespectsQuotes) {
  auto v = split_options("rw,context=\"system_u:object_r:t:s0:c1,c2\",nosuid");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], "rw");
  EXPECT_EQ(v[1], "context=\"system_u:object_r:t:s0:c1,c2\"");
  EXPECT_EQ(v[2], "nosuid");
  EXPECT_EQ(split_options("ro").size(), 1u);
}

TEST(SecurityOptions, RefusesSmuggledContexts) {
  for (const char* o :
       {"context=system_u:object_r:etc_t:s0", "fscontext=x", "defcontext=\"a:b:c:s0:c1,c2\"",
        "rootcontext=y", "rw,context=z", " Context=z", "ro,nosuid,ROOTCONTEXT=q"}) {
    MountEntry m{"/src", "/dst", "bind", {"ro", o}};
    auto r = check_no_security_options(m);
    ASSERT_FALSE(r) << o;
    EXPECT_EQ(r.error().code, EPERM);
    EXPECT_NE(r.error().message.find("'/dst'"), std::string::npos) << r.error().message;
  }
  for (const char* o : {"ro", "nosuid", "mode=0755", "size=1m", "contextual", "x-context=1"}) {
    MountEntry m{"tmpfs", "/dst", "tmpfs", {o}};
    EXPECT_TRUE(check_no_security_options(m)) << o;
  }
}

TEST(ContextOption, IsQuoted) {
  auto l = Label::parse("system_u:object_r:container_file_t:s0:c1,c2");
  ASSERT_TRUE(l);
  EXPECT_EQ(context_option(*l), "context=\"system_u:object_r:container_file_t:s0:c1,c2\"");
  // The comma inside stays inside one option.
  EXPECT_EQ(split_options("rw," + context_option(*l)).size(), 2u);
}

TEST(Tracker, SecondPodMakesASourceShared) {
  SharedSourceTracker t;
  EXPECT_FALSE(*t.register_use("/var/lib/x", "pod-a"));
  EXPECT_FALSE(*t.register_use("/var/lib/x", "pod-a"));  // same pod again: still private
  EXPECT_FALSE(t.is_shared("/var/lib/x"));
  EXPECT_TRUE(*t.register_use("/var/lib/x", "pod-b"));
  EXPECT_TRUE(t.is_shared("/var/lib/x"));
  EXPECT_FALSE(*t.register_use("/var/lib/y", "pod-b"));
  EXPECT_EQ(t.pods_using("/var/lib/x"), 2u);
  t.release_pod("pod-a");
  EXPECT_FALSE(t.is_shared("/var/lib/x"));
  EXPECT_EQ(t.pods_using("/var/lib/x"), 1u);
  t.release_pod("pod-b");
  EXPECT_EQ(t.pods_using("/var/lib/x"), 0u);
  EXPECT_EQ(t.to_json()["sources"].size(), 0u);
}

TEST(Tracker, RefusesBadInput) {
  SharedSourceTracker t;
  EXPECT_FALSE(t.register_use("/x", ""));
  EXPECT_FALSE(t.register_use("relative", "pod"));
  EXPECT_FALSE(t.register_use("", "pod"));
}

TEST(Tracker, JsonRoundTrip) {
  SharedSourceTracker t;
  ASSERT_TRUE(t.register_use("/a", "p1"));
  ASSERT_TRUE(t.register_use("/a", "p2"));
  ASSERT_TRUE(t.register_use("/b", "p1"));
  auto j = t.to_json();
  auto back = SharedSourceTracker::from_json(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->is_shared("/a"));
  EXPECT_FALSE(back->is_shared("/b"));
  EXPECT_EQ(back->to_json(), j);
  for (const char* bad : {R"([])", R"({"sources": []})", R"({"sources": {"/a": "p1"}})",
                          R"({"sources": {"/a": [1]}})", R"({"sources": {"rel": ["p"]}})"}) {
    EXPECT_FALSE(SharedSourceTracker::from_json(nlohmann::json::parse(bad))) << bad;
  }
}

TEST(Tracker, ConcurrentRegistrationsCountEveryPod) {
  SharedSourceTracker t;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&t, i] {
      for (int k = 0; k < 100; ++k) (void)t.register_use("/s", "pod-" + std::to_string(i));
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.pods_using("/s"), 8u);
}

}  // namespace
}  // namespace podshim::selinux
