// CgroupDir's kept read fds: a value written (or changed behind its back, in
// place, as kernfs attributes change) is what the next read returns; a kept
// fd that fails gives way to a fresh open and its error; at most kMaxKept
// fds stay open per directory.
#include "cgroup/cgroup_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace podshim::cgroup {
namespace {

size_t open_fds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

class CgroupDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/podshim-cgroup-dir-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    std::filesystem::create_directories(root_ + "/kubepods/pod1/c1");
    root_fd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root_fd_, 0);
  }
  void TearDown() override {
    ::close(root_fd_);
    std::filesystem::remove_all(root_);
  }
  // Rewrites a file in place (same inode), as the kernel's attributes change.
  void put(const std::string& attr, const std::string& value) {
    std::ofstream(root_ + "/kubepods/pod1/c1/" + attr, std::ios::trunc) << value;
  }
  std::string root_;
  int root_fd_ = -1;
};

TEST_F(CgroupDirTest, ReadAgainSeesWhatWasWrittenSince) {
  put("memory.max", "201326592\n");
  auto d = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(*d->read_trimmed("memory.max"), "201326592");
  ASSERT_TRUE(d->write("memory.max", "max"));
  EXPECT_EQ(*d->read_trimmed("memory.max"), "max") << "a kept fd read at offset 0, whole";
  put("memory.max", "134217728\n");  // changed by someone else
  EXPECT_EQ(*d->read_u64("memory.max"), 134217728u);
  put("memory.stat", "anon 1\nfile 2\n");
  EXPECT_EQ(d->read_keyed("memory.stat")->at("file"), 2u);
  put("memory.stat", "anon 3\nfile 4\nshmem 5\n");
  auto st = d->read_keyed("memory.stat");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->size(), 3u);
  EXPECT_EQ(st->at("shmem"), 5u);
}

TEST_F(CgroupDirTest, KeepsAtMostEightFdsAndReportsAMissingFileByName) {
  auto d = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
  ASSERT_TRUE(d);
  for (int i = 0; i < 12; i++) put("attr." + std::to_string(i), std::to_string(i));
  const size_t before = open_fds();
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 12; i++) EXPECT_EQ(*d->read("attr." + std::to_string(i)), std::to_string(i));
  EXPECT_EQ(open_fds(), before + 8);
  auto missing = d->read("memory.pressure");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_NE(missing.error().message.find("kubepods/pod1/c1"), std::string::npos) << missing.error().message;
  EXPECT_FALSE(d->read("../c1/attr.0")) << "attribute names stay single file names";
}

}  // namespace
}  // namespace podshim::cgroup
