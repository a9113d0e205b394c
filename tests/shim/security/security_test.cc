#include <sched.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>

#include <gtest/gtest.h>

#include "shim/security/caps.h"
#include "base/syscall_deadline.h"
#include "shim/security/seccomp.h"

namespace podshim::security {
namespace {

// Runs `body` in a forked child (capabilities and seccomp filters cannot be
// undone, so never in the test process itself); the child's exit code is the
// number of failed checks, and it prints what failed.
int in_child(const std::function<int()>& body) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    // A private mount namespace, so a mount() that a broken filter or
    // capability drop failed to refuse cannot touch the host's /mnt.
    if (geteuid() == 0) {
      if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        _exit(99);
    }
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return 100;
  return WEXITSTATUS(status);
}

#define CHILD_CHECK(cond)                                         \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "child check failed: %s (line %d)\n", #cond, __LINE__); \
      ++failures;                                                 \
    }                                                             \
  } while (0)

TEST(Seccomp, RefusesSyscallOutsideTheDaemonList) {
  int rc = in_child([] {
    int failures = 0;
    auto r = install_seccomp(daemon_profile());
    if (!r) {
      fprintf(stderr, "%s\n", r.error().message.c_str());
      return 50;
    }
    errno = 0;
    CHILD_CHECK(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == -1 && errno == EPERM);
    errno = 0;
    CHILD_CHECK(mount("none", "/mnt", "tmpfs", 0, nullptr) == -1 && errno == EPERM);
    // Allowed calls still work.
    CHILD_CHECK(getpid() > 0);
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    CHILD_CHECK(fd >= 0);
    return failures;
  });
  EXPECT_EQ(rc, 0);
}

// The shrink's deadline (a per-thread timer signal) works under the
// daemon's filter: a blocked read ends at it.
TEST(Seccomp, TheDaemonListLetsASyscallDeadlineFire) {
  int rc = in_child([] {
    int failures = 0;
    if (!install_seccomp(daemon_profile())) return 50;
    int p[2];
    CHILD_CHECK(pipe(p) == 0);
    char c;
    SyscallDeadline d(std::chrono::milliseconds(20));
    if (!d.armed()) {
      fprintf(stderr, "child check failed: the deadline's timer was refused\n");
      return 1;  // the read below would block for good
    }
    CHILD_CHECK(read(p[0], &c, 1) == -1 && errno == EINTR);
    CHILD_CHECK(d.fired());
    return failures;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Seccomp, HookListRefusesSocketServerAndPtrace) {
  int rc = in_child([] {
    int failures = 0;
    if (!install_seccomp(hook_profile())) return 50;
    errno = 0;
    CHILD_CHECK(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == -1 && errno == EPERM);
    errno = 0;
    CHILD_CHECK(listen(0, 1) == -1 && errno == EPERM);  // listen is not on the hook's list
    return failures;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Seccomp, WithoutFilterPtraceIsNotRefusedByUs) {
  // The control for the two tests above: the same call is not EPERM when no
  // filter is installed, so their assertions can trip.
  int rc = in_child([] {
    errno = 0;
    long r = ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    return (r == -1 && errno == EPERM) ? 1 : 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Caps, RestrictKeepsOnlyWhatIsAsked) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to hold capabilities";
  int rc = in_child([] {
    int failures = 0;
    auto r = restrict_capabilities({CAP_CHOWN});
    if (!r) {
      fprintf(stderr, "%s\n", r.error().message.c_str());
      return 50;
    }
    auto eff = capability_names(CAP_EFFECTIVE);
    CHILD_CHECK(eff && eff->size() == 1 && (*eff)[0] == "cap_chown");
    CHILD_CHECK(!in_bounding_set(CAP_SYS_ADMIN));
    CHILD_CHECK(in_bounding_set(CAP_CHOWN));
    auto inh = capability_names(CAP_INHERITABLE);
    CHILD_CHECK(inh && inh->empty());
    // CAP_SYS_ADMIN is gone: mounting fails even as uid 0.
    errno = 0;
    CHILD_CHECK(mount("none", "/mnt", "tmpfs", MS_RDONLY, nullptr) == -1 && errno == EPERM);
    return failures;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Caps, AskingForAnUnheldCapabilityFailsClearly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  int rc = in_child([] {
    if (!restrict_capabilities({})) return 50;
    auto r = restrict_capabilities({CAP_SYS_ADMIN});
    if (r) return 1;
    return r.error().message.find("cap_sys_admin") != std::string::npos ? 0 : 2;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Caps, ParseNames) {
  EXPECT_EQ(*parse_capability("CAP_CHOWN"), CAP_CHOWN);
  EXPECT_EQ(*parse_capability("fowner"), CAP_FOWNER);
  auto bad = parse_capability("cap_fly");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("cap_fly"), std::string::npos);
}

}  // namespace
}  // namespace podshim::security
