// The clamp journal's file: what recover() replays, what it tolerates, and
// that a shrink costs an append, not a new file.
#include "cgroup/clamp_journal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace podshim::cgroup {
namespace {

class ClampJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/podshim-clamp-test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/state");
    std::filesystem::create_directories(dir_ + "/cg/kubepods/c1");
    std::filesystem::create_directories(dir_ + "/cg/kubepods/c2");
    put("cg/kubepods/c1/memory.high", "33554432");
    put("cg/kubepods/c2/memory.high", "16777216");
    state_fd_ = ::open((dir_ + "/state").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    root_fd_ = ::open((dir_ + "/cg").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  void TearDown() override {
    ::close(state_fd_);
    ::close(root_fd_);
    std::filesystem::remove_all(dir_);
  }
  void put(const std::string& rel, const std::string& v) { std::ofstream(dir_ + "/" + rel) << v; }
  std::string get(const std::string& rel) {
    std::ifstream in(dir_ + "/" + rel);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::map<std::string, std::string> live() {
    auto r = ClampJournal::read(state_fd_);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : std::map<std::string, std::string>{};
  }
  std::string dir_;
  int state_fd_ = -1, root_fd_ = -1;
};

TEST_F(ClampJournalTest, RecordsAndDropsInOneFile) {
  ClampJournal j(state_fd_);
  ASSERT_TRUE(j.record("kubepods/c1", "max"));
  ClampJournal copy = j;  // copies share the file and the view
  ASSERT_TRUE(copy.record("kubepods/c2", "268435456"));
  EXPECT_EQ(live(), (std::map<std::string, std::string>{{"kubepods/c1", "max"}, {"kubepods/c2", "268435456"}}));
  j.drop("kubepods/c1");
  EXPECT_EQ(live(), (std::map<std::string, std::string>{{"kubepods/c2", "268435456"}}));
  std::vector<std::string> files;
  for (auto& f : std::filesystem::directory_iterator(dir_ + "/state")) files.push_back(f.path().filename());
  EXPECT_EQ(files, std::vector<std::string>{"clamps.log"});
}

TEST_F(ClampJournalTest, RefusesEntriesThatCouldNotBeReplayed) {
  ClampJournal j(state_fd_);
  EXPECT_FALSE(j.record("../escape", "max"));
  EXPECT_FALSE(j.record("kubepods/c1", "12 34"));
  EXPECT_FALSE(ClampJournal().record("kubepods/c1", "max")) << "a journal without a directory";
  EXPECT_TRUE(live().empty());
}

TEST_F(ClampJournalTest, ManyShrinksCreateNoFilesAndTheLogIsCutBack) {
  ClampJournal j(state_fd_);
  ASSERT_TRUE(j.record("kubepods/c1", "max"));
  struct stat first {};
  ASSERT_EQ(::fstatat(state_fd_, "clamps.log", &first, 0), 0);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(j.record("kubepods/c2", "max"));
    j.drop("kubepods/c2");
  }
  struct stat now {};
  ASSERT_EQ(::fstatat(state_fd_, "clamps.log", &now, 0), 0);
  EXPECT_EQ(now.st_ino, first.st_ino) << "appends only, no rename while a clamp is held";
  j.drop("kubepods/c1");
  ASSERT_TRUE(j.record("kubepods/c2", "max"));
  j.drop("kubepods/c2");
  ASSERT_EQ(::fstatat(state_fd_, "clamps.log", &now, 0), 0);
  EXPECT_EQ(now.st_ino, first.st_ino) << "cut back in place";
  EXPECT_LT(now.st_size, 64 << 10) << "cut back once nothing was in force";
  EXPECT_TRUE(live().empty());
}

TEST_F(ClampJournalTest, RecoverRestoresWhatIsInForceAndIgnoresATornTail) {
  put("state/clamps.log", "podshim-clamps v1\n"
                          "C 11 kubepods/c1 max\n"
                          "C 11 kubepods/c2 268435456\n"
                          "D 11 kubepods/c2\n"
                          "C 11 kubepods/c2 1048");  // podshimd died in this write
  ClampJournal j(state_fd_);
  auto r = j.recover(root_fd_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(get("cg/kubepods/c1/memory.high"), "max");
  EXPECT_EQ(get("cg/kubepods/c2/memory.high"), "16777216") << "dropped, and the torn record never took effect";
  EXPECT_TRUE(live().empty());
}

TEST_F(ClampJournalTest, RecoverReplaysTheFilesOfEarlierVersions) {
  put("state/clamp-0123456789abcdef", "podshim-clamp v1\nkubepods/c2\n104857600\n");
  put("state/plan-00000001", "whatever");
  ClampJournal j(state_fd_);
  ASSERT_TRUE(j.recover(root_fd_));
  EXPECT_EQ(get("cg/kubepods/c2/memory.high"), "104857600");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/state/clamp-0123456789abcdef"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/state/plan-00000001"));
}

TEST_F(ClampJournalTest, AClampOfAGoneCgroupCountsAsRestoredAndAFailedOneStays) {
  put("state/clamps.log", "podshim-clamps v1\nC 13 kubepods/gone max\nC 11 kubepods/c1 max\n");
  std::filesystem::remove(dir_ + "/cg/kubepods/c1/memory.high");  // the write will fail
  ClampJournal j(state_fd_);
  auto r = j.recover(root_fd_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("memory.high"), std::string::npos) << r.error().message;
  EXPECT_EQ(live(), (std::map<std::string, std::string>{{"kubepods/c1", "max"}})) << "kept for the next recover";
}

TEST_F(ClampJournalTest, AMalformedLogIsReportedAndMovedAside) {
  put("state/clamps.log", "podshim-clamps v1\nX nonsense\n");
  ClampJournal j(state_fd_);
  auto r = j.recover(root_fd_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("record 1 malformed"), std::string::npos) << r.error().message;
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/state/clamps.log.corrupt"));
  EXPECT_TRUE(live().empty());
}

}  // namespace
}  // namespace podshim::cgroup
