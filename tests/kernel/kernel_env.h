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

#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
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
