// Relabelling with real security.selinux xattrs. Root can write them on a
// file system with xattr support even while SELinux is off (setxattr of
// security.selinux as root on ext4 stores the value), so these tests
// exercise the real walk on the host; they skip, saying why, elsewhere.
#include "selinux/relabel.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace podshim::selinux {
namespace {

constexpr char kXattr[] = "security.selinux";

std::string raw_label(const std::string& p) {
  char buf[512];
  ssize_t n = lgetxattr(p.c_str(), kXattr, buf, sizeof buf);
  if (n < 0) return errno == ENODATA ? "<none>" : "<error>";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

void set_raw(const std::string& p, const std::string& l) {
  ASSERT_EQ(lsetxattr(p.c_str(), kXattr, l.c_str(), l.size() + 1, 0), 0) << p;
}

TEST(CheckRelabelAllowed, RefusesSystemPathsAndTrees) {
  for (const char* p : {"/", "/etc", "/usr", "/var", "/var/lib", "/var/log", "/run", "/tmp",
                        "/home", "/root", "/boot", "/dev", "/proc", "/sys", "/lib64",
                        "/dev/nvidia0", "/dev/dri/card0", "/proc/1/root", "/sys/kernel/debug"}) {
    auto r = check_relabel_allowed(p);
    ASSERT_FALSE(r) << p;
    EXPECT_EQ(r.error().code, EPERM) << p;
    EXPECT_NE(r.error().message.find(std::string("'") + p + "'"), std::string::npos)
        << r.error().message;
  }
  for (const char* p : {"/var/lib/kubelet/pods/x/volumes", "/tmp/data", "/devices", "/sysroot",
                        "/procfs-copy", "/etc/cdi-mounts", "/srv/data", "/var/run/cdi/x"}) {
    EXPECT_TRUE(check_relabel_allowed(p)) << p;
  }
  EXPECT_FALSE(check_relabel_allowed("relative/path"));
  EXPECT_FALSE(check_relabel_allowed(""));
}

class Relabel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "writing security.selinux xattrs needs root";
    char tmpl[] = "/tmp/podshim-relabel-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    src_ = root_ + "/src";
    outside_ = root_ + "/outside";
    ASSERT_EQ(mkdir(src_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(outside_.c_str(), 0755), 0);
    if (lsetxattr(root_.c_str(), kXattr, "x", 2, 0) < 0) {
      int e = errno;
      GTEST_SKIP() << "the file system of " << root_ << " cannot store security.selinux: "
                   << strerror(e);
    }
    ASSERT_EQ(lremovexattr(root_.c_str(), kXattr), 0);
    auto l = Label::parse("system_u:object_r:container_file_t:s0:c1,c2");
    ASSERT_TRUE(l);
    label_ = *l;
  }
  void TearDown() override {
    if (!root_.empty()) {
      ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
    }
  }
  void file(const std::string& p) { std::ofstream(p) << "data"; }
  void dir(const std::string& p) { ASSERT_EQ(mkdir(p.c_str(), 0755), 0) << p; }

  std::string root_, src_, outside_;
  Label label_ = *Label::parse("u:r:t:s0");
};

TEST_F(Relabel, LabelsTheTreeAndSkipsWhatIsAlreadyRight) {
  dir(src_ + "/a");
  dir(src_ + "/a/b");
  file(src_ + "/f");
  file(src_ + "/a/g");
  file(src_ + "/a/b/h");
  ASSERT_EQ(mkfifo((src_ + "/a/fifo").c_str(), 0600), 0);  // must not be opened (would block)
  set_raw(src_ + "/a/g", label_.str());                     // already right

  auto r = relabel(src_, label_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->visited, 7u);
  EXPECT_EQ(r->relabelled, 6u);
  EXPECT_EQ(r->unchanged, 1u);
  for (const char* p : {"", "/a", "/a/b", "/f", "/a/g", "/a/b/h", "/a/fifo"})
    EXPECT_EQ(raw_label(src_ + p), label_.str()) << p;
  EXPECT_EQ(raw_label(root_), "<none>");  // the parent is not touched

  // A second pass writes nothing.
  auto again = relabel(src_, label_);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->relabelled, 0u);
  EXPECT_EQ(again->unchanged, 7u);

  // A changed label is rewritten everywhere (a private source becoming shared).
  auto shared = label_.with_level("s0");
  ASSERT_TRUE(shared);
  auto r3 = relabel(src_, *shared);
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->relabelled, 7u);
  EXPECT_EQ(raw_label(src_ + "/a/b/h"), shared->str());
}

TEST_F(Relabel, RelabelsSymlinksThemselvesAndNeverFollowsThem) {
  file(outside_ + "/secret");
  dir(outside_ + "/dir");
  file(outside_ + "/dir/inner");
  ASSERT_EQ(symlink((outside_ + "/secret").c_str(), (src_ + "/to-file").c_str()), 0);
  ASSERT_EQ(symlink((outside_ + "/dir").c_str(), (src_ + "/to-dir").c_str()), 0);
  ASSERT_EQ(symlink("../outside", (src_ + "/up").c_str()), 0);
  // Every target stays inside root_: if following ever regressed, this test
  // must fail without relabelling anything of the host's.
  dir(root_ + "/elsewhere");
  ASSERT_EQ(symlink((root_ + "/elsewhere").c_str(), (src_ + "/abs").c_str()), 0);
  ASSERT_EQ(symlink("dangling-target", (src_ + "/dangling").c_str()), 0);

  auto r = relabel(src_, label_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->symlinks, 5u);
  EXPECT_EQ(r->visited, 6u);  // the source and the five links; nothing behind them
  for (const char* l : {"/to-file", "/to-dir", "/up", "/abs", "/dangling"})
    EXPECT_EQ(raw_label(src_ + l), label_.str()) << l;
  EXPECT_EQ(raw_label(outside_), "<none>");
  EXPECT_EQ(raw_label(outside_ + "/secret"), "<none>");
  EXPECT_EQ(raw_label(outside_ + "/dir"), "<none>");
  EXPECT_EQ(raw_label(outside_ + "/dir/inner"), "<none>");
  EXPECT_EQ(raw_label(root_ + "/elsewhere"), "<none>");
}

TEST_F(Relabel, SourceSymlinkIsResolvedAndChecked) {
  // A source that is itself a symlink is followed (runc bind-mounts the
  // target), and the target is what gets checked and labelled.
  file(src_ + "/f");
  std::string link = root_ + "/link-to-src";
  ASSERT_EQ(symlink(src_.c_str(), link.c_str()), 0);
  auto r = relabel(link, label_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(raw_label(src_ + "/f"), label_.str());
  EXPECT_EQ(raw_label(link), "<none>");
  auto resolved = resolve_path(link);
  ASSERT_TRUE(resolved);
  EXPECT_EQ(*resolved, src_);

  // A symlink to a system path is refused after resolving it. dry_run: a
  // regression must fail the test, not relabel the host.
  const RelabelOptions dry{.dry_run = true};
  for (const char* target : {"/etc", "/usr/../var", "/", "/var/lib/.", "/dev"}) {
    std::string bad = root_ + "/to-system";
    unlink(bad.c_str());
    ASSERT_EQ(symlink(target, bad.c_str()), 0);
    auto refused = relabel(bad, label_, dry);
    ASSERT_FALSE(refused) << target;
    EXPECT_EQ(refused.error().code, EPERM) << target;
    EXPECT_NE(refused.error().message.find("resolves to"), std::string::npos)
        << refused.error().message;
  }
}

TEST_F(Relabel, RefusesSystemPathsGivenDirectly) {
  const RelabelOptions dry{.dry_run = true};  // see above: never risk the host's labels
  for (const char* p : {"/etc", "/usr/../etc", "/tmp", "/", "/var//lib", "/dev/null", "/proc/self"}) {
    auto r = relabel(p, label_, dry);
    ASSERT_FALSE(r) << p;
    EXPECT_EQ(r.error().code, EPERM) << p << ": " << r.error().message;
    EXPECT_NE(r.error().message.find("refusing to relabel"), std::string::npos)
        << r.error().message;
  }
}

TEST_F(Relabel, BadPathsAreClearErrors) {
  auto rel = relabel("relative/src", label_);
  ASSERT_FALSE(rel);
  EXPECT_NE(rel.error().message.find("not absolute"), std::string::npos);
  auto missing = relabel(root_ + "/missing", label_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_NE(missing.error().message.find(root_ + "/missing"), std::string::npos);
}

TEST_F(Relabel, NonRecursiveAndDepthLimit) {
  dir(src_ + "/a");
  dir(src_ + "/a/b");
  file(src_ + "/a/b/c");
  auto r = relabel(src_, label_, {.recursive = false});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->visited, 1u);
  EXPECT_EQ(raw_label(src_), label_.str());
  EXPECT_EQ(raw_label(src_ + "/a"), "<none>");

  auto deep = relabel(src_, label_, {.max_depth = 1});
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().code, ELOOP);
  EXPECT_NE(deep.error().message.find(src_ + "/a"), std::string::npos) << deep.error().message;
}

TEST_F(Relabel, DryRunCountsButWritesNothing) {
  file(src_ + "/f");
  set_raw(src_ + "/f", label_.str());
  file(src_ + "/g");
  auto r = relabel(src_, label_, {.dry_run = true});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->relabelled, 2u);
  EXPECT_EQ(r->unchanged, 1u);
  EXPECT_EQ(raw_label(src_), "<none>");
  EXPECT_EQ(raw_label(src_ + "/g"), "<none>");
}

TEST_F(Relabel, GetLabelDoesNotFollow) {
  file(src_ + "/f");
  ASSERT_EQ(symlink("f", (src_ + "/l").c_str()), 0);
  auto none = get_label(src_ + "/f");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(*none);
  set_raw(src_ + "/f", label_.str());
  EXPECT_EQ(get_label(src_ + "/f")->value_or(""), label_.str());
  auto link = get_label(src_ + "/l");
  ASSERT_TRUE(link);
  EXPECT_FALSE(*link);
}

}  // namespace
}  // namespace podshim::selinux
