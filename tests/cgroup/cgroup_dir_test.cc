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
  constexpr std::array<std::string_view, 3> keys{"file", "shmem", "anon"};
  std::array<uint64_t, 3> v{};
  put("memory.stat", "anon 1\nfile 2\n");
  ASSERT_TRUE(d->read_fields("memory.stat", keys, v));
  EXPECT_EQ(v, (std::array<uint64_t, 3>{2, 0, 1})) << "a key the file lacks reads 0";
  put("memory.stat", "anon 3\nfile 4\nshmem 5\nthp not-a-counter\n");
  ASSERT_TRUE(d->read_fields("memory.stat", keys, v));
  EXPECT_EQ(v, (std::array<uint64_t, 3>{4, 5, 3})) << "read afresh, in the keys' order";
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

// An attribute read with Keep::ReadWrite is written through the same fd: one
// pwrite, no new open. Shown by replacing the file on disk after the read:
// the write lands in the kept inode, not in the new file an open would find.
// On a plain file (the fake trees) a shorter value leaves no tail behind.
TEST_F(CgroupDirTest, AReadWriteKeptAttributeIsWrittenThroughItsFdAndStaysExact) {
  put("cpu.max", "max 100000\n");
  auto d = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
  ASSERT_TRUE(d);
  EXPECT_EQ(*d->read_trimmed("cpu.max", CgroupDir::Keep::ReadWrite), "max 100000");
  const size_t fds = open_fds();
  ASSERT_TRUE(d->write("cpu.max", "250000 100000"));
  EXPECT_EQ(*d->read_trimmed("cpu.max"), "250000 100000");
  ASSERT_TRUE(d->write("cpu.max", "max"));
  EXPECT_EQ(*d->read_trimmed("cpu.max"), "max") << "a shorter value must not leave the old tail";
  EXPECT_EQ(open_fds(), fds);

  const std::string file = root_ + "/kubepods/pod1/c1/cpu.max";
  std::ofstream(file + ".new") << "fresh\n";
  std::filesystem::rename(file + ".new", file);
  ASSERT_TRUE(d->write("cpu.max", "50000 100000"));
  std::ifstream in(file);
  std::string now;
  std::getline(in, now);
  EXPECT_EQ(now, "fresh") << "the write reopened the attribute instead of using the kept fd";

  // A read-only kept attribute is written with an O_TRUNC open, as before.
  put("memory.max", "max\n");
  EXPECT_EQ(*d->read_trimmed("memory.max"), "max");
  std::ofstream(root_ + "/kubepods/pod1/c1/memory.max.new") << "fresh\n";
  std::filesystem::rename(root_ + "/kubepods/pod1/c1/memory.max.new", root_ + "/kubepods/pod1/c1/memory.max");
  ASSERT_TRUE(d->write("memory.max", "1048576"));
  std::ifstream in2(root_ + "/kubepods/pod1/c1/memory.max");
  std::getline(in2, now);
  EXPECT_EQ(now, "1048576");
}

// A CgroupDir closes what it kept when it goes away: with one close_range
// when its fds are contiguous, one by one when another fd sits between
// them, which must stay open.
TEST_F(CgroupDirTest, ClosesItsKeptFdsAndNoOtherWhenItGoesAway) {
  for (const char* f : {"cpu.max", "cpu.weight", "memory.max", "memory.events"}) put(f, "1\n");
  const size_t before = open_fds();
  {
    auto d = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
    ASSERT_TRUE(d);
    for (const char* f : {"cpu.max", "cpu.weight", "memory.max", "memory.events"}) ASSERT_TRUE(d->read(f));
    EXPECT_EQ(open_fds(), before + 5);
    CgroupDir moved = std::move(*d);  // the moved-from one owns nothing to close
    EXPECT_EQ(*moved.read_trimmed("cpu.max"), "1");
  }
  EXPECT_EQ(open_fds(), before);

  int other = -1;
  {
    auto d = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->read("cpu.max"));
    other = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // between the cgroup's fds
    ASSERT_GE(other, 0);
    ASSERT_TRUE(d->read("cpu.weight"));
    ASSERT_TRUE(d->read("memory.max"));
    EXPECT_EQ(open_fds(), before + 5);
  }
  EXPECT_EQ(open_fds(), before + 1);
  EXPECT_EQ(::fcntl(other, F_GETFD), FD_CLOEXEC) << "an fd between the cgroup's was closed";
  ::close(other);

  // Move-assigning over a CgroupDir closes what it held.
  {
    auto a = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
    auto b = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->read("cpu.max") && a->read("cpu.weight"));
    *a = std::move(*b);
    EXPECT_EQ(open_fds(), before + 1);
  }
  EXPECT_EQ(open_fds(), before);
}

TEST_F(CgroupDirTest, ReadFieldsTakesTheNamedCountersAndZeroForTheRest) {
  put("memory.events", "low 9\nhigh 1\nmax 2\noom 3\noom_kill 4\noom_group_kill 5\n");
  put("memory.stat", "anon 10\nfile 20\nweird x1\n  shmem 30  \n");
  auto d = CgroupDir::open(root_fd_, "kubepods/pod1/c1");
  ASSERT_TRUE(d);
  std::array<uint64_t, 4> ev{7, 7, 7, 7};
  ASSERT_TRUE(d->read_fields("memory.events", std::array<std::string_view, 4>{"oom", "oom_kill", "high", "max"}, ev));
  EXPECT_EQ(ev, (std::array<uint64_t, 4>{3, 4, 1, 2}));
  std::array<uint64_t, 4> st{7, 7, 7, 7};
  ASSERT_TRUE(d->read_fields("memory.stat", std::array<std::string_view, 4>{"anon", "weird", "shmem", "absent"}, st));
  EXPECT_EQ(st, (std::array<uint64_t, 4>{10, 0, 30, 0}));
  std::array<uint64_t, 1> none{};
  auto missing = d->read_fields("memory.pressure", std::array<std::string_view, 1>{"some"}, none);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
}

}  // namespace
}  // namespace podshim::cgroup
