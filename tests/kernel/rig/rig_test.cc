// Kernel test proving that the VM rig (tests/vm/vm-run) gives a real cgroup v2 kernel: memory is
// charged to the cgroup a process lives in, limits round-trip through the kernel's own parsing,
// and shrinking memory.max below usage OOM-kills instead of failing the write (the kernel's
// memory_max_write reclaims, then calls the OOM killer while usage stays above the new limit:
// mm/memcontrol.c; Documentation/admin-guide/cgroup-v2.rst, "memory.max").
//
// It runs only where vm-run sets PODSHIM_IN_VM=1 and skips everywhere else, so it can never touch
// the host's cgroups. Inside the VM a missing controller is a failure, not a skip: the rig's
// "--no-controller memory" run relies on that to show the test can fail.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

namespace {

constexpr std::string_view kCgroupRoot = "/sys/fs/cgroup";
constexpr long long kMiB = 1024 * 1024;
constexpr long long kHogBytes = 64 * kMiB;
// From linux/magic.h; spelled out so the test needs no kernel headers.
constexpr long kCgroup2SuperMagic = 0x63677270;

bool InVm() {
  const char* v = std::getenv("PODSHIM_IN_VM");
  return v != nullptr && std::string_view(v) == "1";
}

std::optional<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// Returns 0 when the whole value was written in one write(2), else the errno. One write matters:
// cgroup files parse each write separately.
int WriteFile(const std::string& path, std::string_view value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n;
  do {
    n = write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int err = n < 0 ? errno : (static_cast<size_t>(n) == value.size() ? 0 : EIO);
  close(fd);
  return err;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Value of "key N" in a flat-keyed file such as memory.stat or memory.events.
std::optional<long long> KeyedValue(const std::string& text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return std::stoll(std::string(line.substr(key.size() + 1)));
    }
    pos = eol + 1;
  }
  return std::nullopt;
}

// Blocks until one byte arrives (or the writer closes); used to sequence parent and child.
bool ReadByte(int fd) {
  char c;
  ssize_t n;
  do {
    n = read(fd, &c, 1);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

bool WriteByte(int fd) {
  char c = 'x';
  ssize_t n;
  do {
    n = write(fd, &c, 1);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

// Child body: wait until the parent has moved us into the cgroup (charges are taken at fault
// time and do not move with the task in v2, so touching memory earlier would charge the root),
// then fault in kHogBytes of anonymous memory, report, and sleep until killed.
// Only async-signal-safe calls after fork.
[[noreturn]] void HogChild(int go_fd, int ready_fd) {
  if (!ReadByte(go_fd)) _exit(10);
  void* p = mmap(nullptr, kHogBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) _exit(11);
  // Non-zero bytes so no page can stay backed by the shared zero page.
  std::memset(p, 0x5a, kHogBytes);
  if (!WriteByte(ready_fd)) _exit(12);
  for (;;) pause();
}

class RigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!InVm()) GTEST_SKIP() << "needs the real-kernel VM (tests/vm/vm-run sets PODSHIM_IN_VM=1)";
    struct statfs fs {};
    ASSERT_EQ(statfs(std::string(kCgroupRoot).c_str(), &fs), 0) << std::strerror(errno);
    ASSERT_EQ(static_cast<long>(fs.f_type), kCgroup2SuperMagic)
        << kCgroupRoot << " is not a cgroup2 mount";

    static std::atomic<int> counter{0};
    path_ = std::string(kCgroupRoot) + "/podshim-rig-" + std::to_string(getpid()) + "-" +
            std::to_string(counter++);
    ASSERT_EQ(mkdir(path_.c_str(), 0755), 0) << path_ << ": " << std::strerror(errno);
    created_ = true;
  }

  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
      child_ = -1;
    }
    if (!created_) return;
    // The cgroup empties as soon as the reaped task has gone through exit; retry briefly in
    // case the kernel is still tearing it down.
    for (int i = 0; i < 50; ++i) {
      if (rmdir(path_.c_str()) == 0 || errno == ENOENT) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "rmdir " << path_ << ": " << std::strerror(errno);
  }

  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

  // Forks the hog, moves it into the cgroup by writing its pid to cgroup.procs, and waits
  // until its memory is faulted in.
  void StartHogInCgroup() {
    int go[2], ready[2];
    ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
    child_ = fork();
    ASSERT_GE(child_, 0) << std::strerror(errno);
    if (child_ == 0) {
      close(go[1]);
      close(ready[0]);
      HogChild(go[0], ready[1]);
    }
    close(go[0]);
    close(ready[1]);
    int err = WriteFile(File("cgroup.procs"), std::to_string(child_));
    bool sent = err == 0 && WriteByte(go[1]);
    close(go[1]);
    bool hog_ready = sent && ReadByte(ready[0]);
    close(ready[0]);
    ASSERT_EQ(err, 0) << "moving pid " << child_ << " into " << path_ << ": "
                      << std::strerror(err);
    ASSERT_TRUE(hog_ready) << "the hog child died before touching its memory";
  }

  std::string path_;
  bool created_ = false;
  pid_t child_ = -1;
};

TEST_F(RigTest, MemoryIsChargedToTheCgroup) {
  ASSERT_NO_FATAL_FAILURE(StartHogInCgroup());

  auto current = ReadFile(File("memory.current"));
  ASSERT_TRUE(current.has_value()) << "no memory.current: is the memory controller enabled?";
  EXPECT_GE(std::stoll(*current), kHogBytes);

  auto stat = ReadFile(File("memory.stat"));
  ASSERT_TRUE(stat.has_value()) << "no memory.stat: is the memory controller enabled?";
  auto anon = KeyedValue(*stat, "anon");
  ASSERT_TRUE(anon.has_value()) << "memory.stat has no anon line:\n" << *stat;
  EXPECT_GE(*anon, 60 * kMiB);
}

TEST_F(RigTest, LimitsRoundTripThroughTheKernel) {
  ASSERT_NO_FATAL_FAILURE(StartHogInCgroup());

  struct Case {
    std::string_view file, write, read_back;
  };
  // memory.max is stored in pages, so the value must come back as the exact byte count.
  for (const Case& c : {Case{"cpu.max", "50000 100000", "50000 100000"},
                        Case{"cpu.weight", "39", "39"},
                        Case{"memory.max", "268435456", "268435456"}}) {
    int err = WriteFile(File(c.file), c.write);
    ASSERT_EQ(err, 0) << "writing '" << c.write << "' to " << c.file << ": "
                      << std::strerror(err);
    auto got = ReadFile(File(c.file));
    ASSERT_TRUE(got.has_value()) << c.file << " is not readable";
    EXPECT_EQ(Trim(*got), c.read_back) << c.file;
  }
}

TEST_F(RigTest, ShrinkingMemoryMaxBelowUsageOomKills) {
  ASSERT_NO_FATAL_FAILURE(StartHogInCgroup());

  auto events_before = ReadFile(File("memory.events"));
  ASSERT_TRUE(events_before.has_value()) << "no memory.events: is the memory controller enabled?";
  auto kills_before = KeyedValue(*events_before, "oom_kill");
  ASSERT_TRUE(kills_before.has_value()) << *events_before;

  // The kernel never refuses the shrink: the write blocks through reclaim, then the memcg OOM
  // killer runs and the write reports success.
  int err = WriteFile(File("memory.max"), std::to_string(32 * kMiB));
  ASSERT_EQ(err, 0) << "writing memory.max below usage: " << std::strerror(err);

  int status = 0;
  ASSERT_EQ(waitpid(child_, &status, 0), child_) << std::strerror(errno);
  child_ = -1;
  ASSERT_TRUE(WIFSIGNALED(status)) << "hog exited normally with status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  auto events_after = ReadFile(File("memory.events"));
  ASSERT_TRUE(events_after.has_value());
  auto kills_after = KeyedValue(*events_after, "oom_kill");
  ASSERT_TRUE(kills_after.has_value()) << *events_after;
  EXPECT_GE(*kills_after, *kills_before + 1) << "memory.events:\n" << *events_after;

  auto max = ReadFile(File("memory.max"));
  ASSERT_TRUE(max.has_value());
  EXPECT_EQ(Trim(*max), std::to_string(32 * kMiB));
}

}  // namespace
