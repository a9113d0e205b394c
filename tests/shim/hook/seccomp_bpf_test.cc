// The seccomp filter compiled into podshim-hook at build time
// (shim/hook/seccomp_gen.cc) behaves like the profile it was compiled from:
// each child loads it and tries an allowed and a refused syscall.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "shim/hook/seccomp_bpf.h"
#include "shim/security/seccomp.h"

namespace podshim::hook {
namespace {

// Runs `body` in a child after loading the filter; returns its exit status.
template <typename F>
int in_child(F body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!install_hook_seccomp()) _exit(90);
    _exit(body());
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

TEST(HookSeccompBpf, RefusesWhatTheProfileDoesNotAllow) {
  auto profile = security::hook_profile();
  auto allowed = [&](const char* s) {
    for (const auto& a : profile.allow) {
      if (a == s) return true;
    }
    return false;
  };
  ASSERT_FALSE(allowed("ptrace"));
  ASSERT_TRUE(allowed("getpid"));
  // Refused calls fail with the profile's errno instead of killing the hook.
  EXPECT_EQ(in_child([] { return syscall(SYS_ptrace, 0, 0, 0, 0) == -1 && errno == EPERM ? 0 : 1; }), 0);
  EXPECT_EQ(in_child([] { return getpid() > 0 ? 0 : 1; }), 0);
  // The filter is really in place (Seccomp: 2 = filter mode).
  EXPECT_EQ(in_child([] {
              FILE* f = fopen("/proc/self/status", "r");
              if (!f) return 2;
              char line[256];
              int mode = -1;
              while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "Seccomp: %d", &mode) == 1) break;
              }
              fclose(f);
              return mode == 2 ? 0 : 1;
            }),
            0);
}

}  // namespace
}  // namespace podshim::hook
