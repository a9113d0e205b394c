#include "selinux/apply.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace podshim::selinux {
namespace {

using nlohmann::json;

constexpr char kXattr[] = "security.selinux";
constexpr char kMountLabel[] = "system_u:object_r:container_file_t:s0:c715,c811";

std::string raw_label(const std::string& p) {
  char buf[512];
  ssize_t n = lgetxattr(p.c_str(), kXattr, buf, sizeof buf);
  if (n < 0) return "<none>";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

json config_with_labels() {
  return json{{"process", {{"selinuxLabel", "system_u:system_r:container_t:s0:c715,c811"}}},
              {"linux", {{"mountLabel", kMountLabel}}}};
}

class Apply : public ::testing::Test {
 protected:
  void SetUp() override {
    set_enabled_override_for_testing(true);
    char tmpl[] = "/tmp/podshim-apply-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    src_ = root_ + "/src";
    ASSERT_EQ(mkdir(src_.c_str(), 0755), 0);
    std::ofstream(src_ + "/f") << "x";
    xattrs_ = geteuid() == 0 && lsetxattr(root_.c_str(), kXattr, "x", 2, 0) == 0;
    if (xattrs_) {
      ASSERT_EQ(lremovexattr(root_.c_str(), kXattr), 0);
    }
  }
  void TearDown() override {
    set_enabled_override_for_testing(std::nullopt);
    ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
  }
  void need_xattrs() {
    if (!xattrs_) GTEST_SKIP() << "needs root and a file system storing security.selinux";
  }
  std::string root_, src_;
  bool xattrs_ = false;
};

TEST_F(Apply, DisabledMeansNoLabelsAndNoError) {
  set_enabled_override_for_testing(false);
  json cfg = json{{"process", {{"selinuxLabel", "garbage"}}}};
  std::vector<InjectedMount> mounts{{src_, "/data", "bind", {"rbind", "ro"}},
                                    {"tmpfs", "/scratch", "tmpfs", {"size=1m"}}};
  auto r = apply_labels(cfg, mounts, {{"/dev/x", "/dev/x"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->selinux_enabled);
  EXPECT_TRUE(r->mount_edits.empty());
  EXPECT_TRUE(r->labelled.empty());
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_NE(r->notes[0].find("disabled"), std::string::npos);
  EXPECT_EQ(raw_label(src_), "<none>");
}

TEST_F(Apply, SmuggledContextIsRefusedEvenWhenDisabled) {
  for (bool enabled : {false, true}) {
    set_enabled_override_for_testing(enabled);
    std::vector<InjectedMount> mounts{
        {"tmpfs", "/scratch", "tmpfs", {"size=1m", "context=\"system_u:object_r:etc_t:s0\""}}};
    auto r = apply_labels(config_with_labels(), mounts, {});
    ASSERT_FALSE(r) << enabled;
    EXPECT_NE(r.error().message.find("/scratch"), std::string::npos) << r.error().message;
  }
}

TEST_F(Apply, ContainerWithoutLabel) {
  std::vector<InjectedMount> mounts{{src_, "/data", "bind", {"rbind"}}};
  auto r = apply_labels(json::object(), mounts, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->selinux_enabled);
  EXPECT_FALSE(r->private_file_label);
  EXPECT_TRUE(r->labelled.empty());
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_EQ(raw_label(src_), "<none>");
}

TEST_F(Apply, FreshFilesystemsGetContextAndPseudoOnesNothing) {
  std::vector<InjectedMount> mounts{{"tmpfs", "/scratch", "tmpfs", {"size=1m", "mode=0755"}},
                                    {"proc", "/proc2", "proc", {}}};
  auto r = apply_labels(config_with_labels(), mounts, {});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->mount_edits.size(), 1u);
  EXPECT_EQ(r->mount_edits[0].destination, "/scratch");
  EXPECT_EQ(r->mount_edits[0].options,
            (std::vector<std::string>{"size=1m", "mode=0755",
                                      std::string("context=\"") + kMountLabel + "\""}));
}

TEST_F(Apply, FileTypeIsConfigurable) {
  ApplyConfig cfg;
  cfg.file.file_type = "container_ro_file_t";
  auto r = apply_labels(config_with_labels(), {{"tmpfs", "/s", "tmpfs", {}}}, {}, cfg);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->private_file_label->str(), "system_u:object_r:container_ro_file_t:s0:c715,c811");
  EXPECT_EQ(r->mount_edits[0].options.back(),
            "context=\"system_u:object_r:container_ro_file_t:s0:c715,c811\"");
}

TEST_F(Apply, ProcessLabelAloneGivesTheLevel) {
  json cfg{{"process", {{"selinuxLabel", "system_u:system_r:container_t:s0:c1,c2"}}}};
  auto r = apply_labels(cfg, {{"tmpfs", "/s", "tmpfs", {}}}, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->private_file_label->str(), "system_u:object_r:container_file_t:s0:c1,c2");
  json range{{"process", {{"selinuxLabel", "unconfined_u:unconfined_r:unconfined_t:s0-s0:c0.c1023"}}}};
  auto bad = apply_labels(range, {{"tmpfs", "/s", "tmpfs", {}}}, {});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("s0-s0:c0.c1023"), std::string::npos);
}

TEST_F(Apply, BindSourcesAreRelabelledPrivately) {
  need_xattrs();
  std::vector<InjectedMount> mounts{{src_, "/data", "bind", {"rbind", "ro"}},
                                    {src_ + "/", "/data2", "bind", {"rbind"}},  // same source
                                    {"/dev/null", "/null", "bind", {"bind"}}};
  auto r = apply_labels(config_with_labels(), mounts, {{"/dev/fuse", "/dev/fuse"}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->labelled.size(), 1u);
  EXPECT_EQ(r->labelled[0].resolved, src_);
  EXPECT_EQ(r->labelled[0].sharing, Sharing::Private);
  EXPECT_EQ(r->labelled[0].stats.relabelled, 2u);
  EXPECT_EQ(raw_label(src_ + "/f"), kMountLabel);
  EXPECT_TRUE(r->mount_edits.empty());  // bind mounts ignore context=
  EXPECT_EQ(raw_label("/dev/null"), raw_label("/dev/null"));
  ASSERT_EQ(r->notes.size(), 2u);
  EXPECT_NE(r->notes[0].find("/dev/null"), std::string::npos);
  EXPECT_NE(r->notes[1].find("/dev/fuse"), std::string::npos);
}

TEST_F(Apply, TrackerMakesASecondPodsSourceShared) {
  need_xattrs();
  SharedSourceTracker tracker;
  ApplyConfig a;
  a.tracker = &tracker;
  a.pod_uid = "pod-a";
  a.infer_sharing_from_disk = false;
  std::vector<InjectedMount> mounts{{src_, "/data", "bind", {"rbind"}}};
  auto ra = apply_labels(config_with_labels(), mounts, {}, a);
  ASSERT_TRUE(ra) << ra.error().message;
  EXPECT_EQ(ra->labelled[0].sharing, Sharing::Private);
  EXPECT_EQ(raw_label(src_ + "/f"), kMountLabel);

  ApplyConfig b = a;
  b.pod_uid = "pod-b";
  json other{{"linux", {{"mountLabel", "system_u:object_r:container_file_t:s0:c3,c4"}}}};
  auto rb = apply_labels(other, mounts, {}, b);
  ASSERT_TRUE(rb) << rb.error().message;
  EXPECT_EQ(rb->labelled[0].sharing, Sharing::Shared);
  EXPECT_EQ(raw_label(src_ + "/f"), "system_u:object_r:container_file_t:s0");

  ApplyConfig missing_uid;
  missing_uid.tracker = &tracker;
  EXPECT_FALSE(apply_labels(config_with_labels(), mounts, {}, missing_uid));
}

TEST_F(Apply, DiskLabelOfAnotherPodMakesItShared) {
  need_xattrs();
  std::string other = "system_u:object_r:container_file_t:s0:c3,c4";
  ASSERT_EQ(lsetxattr(src_.c_str(), kXattr, other.c_str(), other.size() + 1, 0), 0);
  std::vector<InjectedMount> mounts{{src_, "/data", "bind", {"rbind"}}};
  auto r = apply_labels(config_with_labels(), mounts, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->labelled[0].sharing, Sharing::Shared);
  EXPECT_EQ(raw_label(src_), "system_u:object_r:container_file_t:s0");
  // Another container of the same pod (same level) keeps it shared, not private.
  auto again = apply_labels(config_with_labels(), mounts, {});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->labelled[0].sharing, Sharing::Shared);

  // A foreign label (not container_file_t) is simply replaced by the private one.
  std::string foreign = "system_u:object_r:var_lib_t:s0";
  ASSERT_EQ(lsetxattr(src_.c_str(), kXattr, foreign.c_str(), foreign.size() + 1, 0), 0);
  auto r2 = apply_labels(config_with_labels(), mounts, {});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->labelled[0].sharing, Sharing::Private);
  EXPECT_EQ(raw_label(src_), kMountLabel);
}

TEST_F(Apply, SystemPathSourceIsAnErrorNamingTheMount) {
  ApplyConfig dry;
  dry.relabel.dry_run = true;  // a regression must not relabel the host
  dry.infer_sharing_from_disk = false;
  auto r = apply_labels(config_with_labels(), {{"/etc", "/host-etc", "bind", {"rbind"}}}, {}, dry);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EPERM);
  EXPECT_NE(r.error().message.find("/host-etc"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("'/etc'"), std::string::npos) << r.error().message;
  auto missing = apply_labels(config_with_labels(), {{root_ + "/nope", "/x", "bind", {}}}, {}, dry);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
}

}  // namespace
}  // namespace podshim::selinux
