#include "base/fs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace podshim::fs {
namespace {

class FsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    set_force_walk_for_testing(GetParam());
    char tmpl[] = "/tmp/podshim-fs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ASSERT_EQ(mkdir((root_ + "/a").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root_ + "/a/b").c_str(), 0755), 0);
    write_host("a/b/cpu.max", "max 100000\n");
    ASSERT_EQ(mkdir((root_ + "/outside").c_str(), 0755), 0);
    write_host("outside/secret", "s3cret");
    // Symlink tricks a hostile runtime path could use.
    ASSERT_EQ(symlink("../outside", (root_ + "/a/escape").c_str()), 0);
    ASSERT_EQ(symlink("cpu.max", (root_ + "/a/b/link").c_str()), 0);
    auto d = open_dir(root_ + "/a");
    ASSERT_TRUE(d) << d.error().message;
    dir_ = std::move(*d);
  }
  void TearDown() override {
    set_force_walk_for_testing(false);
    std::string cmd = "rm -rf '" + root_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  void write_host(const std::string& rel, const std::string& data) {
    FILE* f = fopen((root_ + "/" + rel).c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(data.c_str(), f);
    fclose(f);
  }
  std::string root_;
  UniqueFd dir_;
};

TEST_P(FsTest, ReadsAndWritesBeneath) {
  auto r = read_file_at(dir_.get(), "b/cpu.max");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, "max 100000\n");
  ASSERT_TRUE(write_attr_at(dir_.get(), "b/cpu.max", "50000 100000"));
  EXPECT_EQ(*read_file_at(dir_.get(), "b/cpu.max"), "50000 100000");
}

TEST_P(FsTest, RefusesEscapes) {
  for (const char* bad : {"../outside/secret", "/etc/passwd", "b/../../outside/secret", "",
                          "b//cpu.max", "./b/cpu.max", "escape/secret", "b/link"}) {
    auto r = read_file_at(dir_.get(), bad);
    EXPECT_FALSE(r) << "should refuse '" << bad << "'";
  }
  auto r = read_file_at(dir_.get(), "escape/secret");
  ASSERT_FALSE(r);
  // Symlinks are refused with ELOOP (openat2 RESOLVE_NO_SYMLINKS) or
  // ENOTDIR/ELOOP (O_NOFOLLOW walk).
  EXPECT_TRUE(r.error().code == ELOOP || r.error().code == ENOTDIR) << r.error().message;
}

// The errno form refuses exactly what open_beneath() refuses, and tells a
// missing file from a refused one.
TEST_P(FsTest, ErrnoFormRefusesTheSameEscapes) {
  for (const char* bad : {"../outside/secret", "/etc/passwd", "b/../../outside/secret", "",
                          "b//cpu.max", "./b/cpu.max", "escape/secret", "b/link"}) {
    const int fd = open_beneath_errno(dir_.get(), bad, O_RDONLY);
    EXPECT_LT(fd, 0) << "should refuse '" << bad << "'";
    EXPECT_NE(fd, -ENOENT) << "'" << bad << "' refused as missing";
    if (fd >= 0) ::close(fd);
  }
  EXPECT_EQ(open_beneath_errno(dir_.get(), "b/memory.max", O_RDONLY), -ENOENT);
  EXPECT_EQ(open_beneath_errno(dir_.get(), "nope/memory.max", O_RDONLY), -ENOENT);
  const int fd = open_beneath_errno(dir_.get(), "b/cpu.max", O_RDONLY);
  ASSERT_GE(fd, 0) << -fd;
  char buf[32] = {};
  EXPECT_EQ(::read(fd, buf, sizeof buf - 1), 11);
  EXPECT_STREQ(buf, "max 100000\n");
  ::close(fd);
  // A path longer than the stack buffer takes the heap copy.
  std::string deep(600, 'x');
  EXPECT_EQ(open_beneath_errno(dir_.get(), deep, O_RDONLY), -ENAMETOOLONG);
}

TEST_P(FsTest, ReadAttrTakesAShortReadAsTheEnd) {
  auto r = read_attr_at(dir_.get(), "b/cpu.max");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, "max 100000\n");
  // Longer than one read: the rest is read to the end.
  std::string big;
  for (int i = 0; i < 1000; ++i) big += "line " + std::to_string(i) + "\n";
  write_host("a/b/memory.stat", big);
  r = read_attr_at(dir_.get(), "b/memory.stat");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, big);
  r = read_attr_at(dir_.get(), "b/memory.stat", 100);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EFBIG);
  EXPECT_FALSE(read_attr_at(dir_.get(), "b/link"));
}

TEST_P(FsTest, WriteAttrDoesNotCreate) {
  auto r = write_attr_at(dir_.get(), "b/memory.max", "1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ENOENT);
  EXPECT_NE(r.error().message.find("b/memory.max"), std::string::npos);
}

TEST_P(FsTest, ReadLimit) {
  auto r = read_file_at(dir_.get(), "b/cpu.max", 4);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EFBIG);
}

TEST_P(FsTest, AtomicWriteReplaces) {
  ASSERT_TRUE(write_file_atomic_at(dir_.get(), "b/state.json", "{\"v\":1}", 0600));
  ASSERT_TRUE(write_file_atomic_at(dir_.get(), "b/state.json", "{\"v\":2}", 0600));
  EXPECT_EQ(*read_file_at(dir_.get(), "b/state.json"), "{\"v\":2}");
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/a/b/state.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // No temporary file left behind.
  EXPECT_NE(access((root_ + "/a/b/.state.json.tmp." + std::to_string(getpid())).c_str(), F_OK), 0);
  EXPECT_FALSE(write_file_atomic_at(dir_.get(), "escape/x", "y"));
}

TEST(Fs, MkdirP) {
  char tmpl[] = "/tmp/podshim-mk-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string p = std::string(tmpl) + "/x/y/z";
  ASSERT_TRUE(mkdir_p(p, 0700));
  ASSERT_TRUE(mkdir_p(p, 0700));  // idempotent
  struct stat st {};
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  std::string cmd = std::string("rm -rf '") + tmpl + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
}

INSTANTIATE_TEST_SUITE_P(Openat2AndWalk, FsTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "walk" : "openat2"; });

}  // namespace
}  // namespace podshim::fs
