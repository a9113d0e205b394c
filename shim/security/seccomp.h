// Syscall allow-lists for podshimd and podshim-hook (libseccomp).
//
// Installed after start-up, once sockets are bound and configuration is read.
// Anything outside the list fails with an errno (EPERM by default) rather than
// killing the process: a syscall we forgot shows up as a logged error in the
// tests instead of a dead node agent. `--no-seccomp` skips installation for
// debugging.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace podshim::security {

struct SeccompProfile {
  std::string name;                    // "podshimd", "podshim-hook"
  std::vector<std::string> allow;      // syscall names, resolved by libseccomp
  int refuse_errno = 1;                // EPERM
};

// The allow-list for podshimd: event loop, sockets, cgroup and state file
// I/O, inotify, journald, sd-bus. No exec, no ptrace, no mount, no bpf.
SeccompProfile daemon_profile();

// The allow-list for podshim-hook: reading the state and config.json,
// lstat/xattr calls for labelling and device checks, one unix-socket client.
SeccompProfile hook_profile();

// Sets no_new_privs and loads the filter into the calling thread (and, with
// TSYNC, every thread of the process). Unknown syscall names on this
// architecture are skipped (they cannot be called anyway).
Result<void> install_seccomp(const SeccompProfile& profile);

}  // namespace podshim::security
