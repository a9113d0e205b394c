// What every kernel test needs to know about the machine it runs on: whether
// it may write cgroups at all, and whether the kernel has the facilities the
// test uses. A test that cannot run says which facility is missing.
//
// The first gate is PODSHIM_IN_VM=1, which tests/vm/vm-run sets in its guest
// and nothing else sets: these tests make and write cgroups under
// /sys/fs/cgroup, which must never happen on a developer's host, whatever its
// cgroup layout (a host with a pure cgroup2 /sys/fs/cgroup would pass every
// probe below). The facilities are probed, not assumed from the flag.
#pragma once

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/str.h"

namespace podshim::kernel_test {

// A file's text with surrounding whitespace (the kernel's trailing newline)
// removed; "" when it cannot be read.
inline std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(str::trim(ss.str()));
}

// Writes `v` to `path` (a cgroup attribute: one write); false when the
// kernel refused it.
inline bool put(const std::string &path, const std::string &v) {
  std::ofstream out(path);
  out << v;
  out.flush();
  return out.good();
}

// The value of `key` in a flat keyed file (memory.stat, memory.events:
// "key value" lines); 0 when absent.
inline uint64_t keyed(const std::string &path, const std::string &key) {
  std::istringstream in(slurp(path));
  std::string k;
  uint64_t v;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// Polls `pred` every 20 ms until it holds (true) or `limit` has passed
// (false): a bounded wait for what the kernel or a daemon does on its own.
inline bool wait_for(const std::function<bool()> &pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// A child process placed in the cgroup directory `cgroup` the way a runtime
// places a container's: it runs `work` only once its pid is in
// cgroup.procs, so every page it touches is charged there, then waits to be
// killed. -1 when it could not be started or placed.
inline pid_t start_in_cgroup(const std::string &cgroup, const std::function<void()> &work) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[1]);
    char c;
    if (::read(p[0], &c, 1) != 1) _exit(2);
    work();
    for (;;) pause();
  }
  close(p[0]);
  const bool placed = pid > 0 && put(cgroup + "/cgroup.procs", std::to_string(pid));
  const bool started = placed && ::write(p[1], "x", 1) == 1;
  close(p[1]);
  return started ? pid : -1;
}

struct Needs {
  std::string cgroup_root = "/sys/fs/cgroup";
  // Controllers the root must offer (its cgroup.controllers).
  std::vector<std::string> controllers = {"cpu", "memory"};
  // Pressure stall information (memory.pressure; off with psi=0 on the
  // kernel command line or without CONFIG_PSI).
  bool psi = false;
  // systemd as PID 1 (vm-run --mode systemd).
  bool systemd = false;
};

// Why a kernel test cannot run here, naming the missing facility; nullopt
// when it can.
inline std::optional<std::string> missing(const Needs &n = {}) {
  const char *vm = std::getenv("PODSHIM_IN_VM");
  if (!vm || std::string(vm) != "1")
    return "not in the test VM: kernel tests write " + n.cgroup_root +
           " and run only inside tests/vm/vm-run (which sets PODSHIM_IN_VM=1)";
  struct statfs st {};
  if (statfs(n.cgroup_root.c_str(), &st) != 0) return n.cgroup_root + " does not exist";
  if (st.f_type != CGROUP2_SUPER_MAGIC)
    return n.cgroup_root + " is not a cgroup2 mount (cgroup v1 or hybrid layout)";
  if (geteuid() != 0) return "not root: cgroups cannot be made or written";
  const std::string offered = " " + slurp(n.cgroup_root + "/cgroup.controllers") + " ";
  for (const auto &c : n.controllers)
    if (offered.find(" " + c + " ") == std::string::npos)
      return "the " + c + " controller is not offered at " + n.cgroup_root +
             " (cgroup.controllers:" + offered + ")";
  if (n.psi && access("/proc/pressure/memory", R_OK) != 0)
    return "no pressure stall information (/proc/pressure/memory: CONFIG_PSI "
           "off or psi=0)";
  if (n.systemd && slurp("/proc/1/comm") != "systemd") return "systemd is not PID 1 (vm-run --mode systemd)";
  return std::nullopt;
}

}  // namespace podshim::kernel_test

// Skips the test (from its body or SetUp) when the machine lacks what it needs.
#define PODSHIM_KERNEL_TEST_NEEDS(...)                                                   \
  do {                                                                                   \
    if (auto why_ = ::podshim::kernel_test::missing(__VA_ARGS__)) GTEST_SKIP() << *why_; \
  } while (0)
