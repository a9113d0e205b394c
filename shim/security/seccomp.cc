#include "shim/security/seccomp.h"

#include <seccomp.h>
#include <sys/prctl.h>

#include <memory>

namespace podshim::security {
namespace {

// Shared by both programs: memory, signals, time, basic fd and file I/O.
const char* const kCommon[] = {
    "read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close", "close_range",
    "openat", "openat2", "open", "fstat", "newfstatat", "stat", "lstat", "statx", "fstatfs",
    "statfs", "getdents64", "readlink", "readlinkat", "faccessat", "faccessat2", "access",
    "fcntl", "dup", "dup2", "dup3", "pipe2", "ioctl",
    "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "membarrier",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigtimedwait",
    "futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address",
    "clock_gettime", "clock_getres", "gettimeofday", "nanosleep", "clock_nanosleep",
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
    "getresuid", "getresgid", "getrandom", "uname", "prctl", "arch_prctl", "capget",
    "getrlimit", "prlimit64", "sched_getaffinity", "sched_yield", "sysinfo", "getcwd",
    "restart_syscall", "exit", "exit_group", "tgkill", "umask",
    "poll", "ppoll", "select", "pselect6",
    // unix sockets: status socket, NRI socket, journald, sd-bus, podshimd client
    "socket", "socketpair", "connect", "sendmsg", "recvmsg", "sendto", "recvfrom",
    "sendmmsg", "shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername",
    "memfd_create", "ftruncate", "fsync", "fdatasync",
};

const char* const kDaemon[] = {
    // event loop (sd-event)
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
    "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd4", "eventfd2",
    "pidfd_open", "pidfd_send_signal", "waitid",
    // status socket server
    "bind", "listen", "accept", "accept4",
    // state directory and journal
    "mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "fchmod", "fchmodat", "fchown", "fchownat", "chown", "symlinkat",
    // Store::compact makes the rewritten state files durable with one syncfs
    // (shim/core/state.cc); refused, every change past the journal's size
    // limit rewrote its file and retried the compaction.
    "syncfs",
    // CDI registry live refresh
    "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    // the state store's compaction thread (hooks-only mode, shim/core/state.cc)
    "clone", "clone3", "sched_getparam", "sched_setscheduler", "sched_getscheduler",
    // SELinux label read-back of container processes
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "name_to_handle_at", "kill",
    // A memory shrink cuts its reclaiming cgroup writes at its deadline with
    // a per-thread timer signal (base/syscall_deadline.h); refused, the
    // writes are unbounded again.
    "timer_create", "timer_settime", "timer_delete",
};

const char* const kHook[] = {
    "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr",
    "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
};

SeccompProfile build(const char* name, std::initializer_list<const char* const*> lists,
                     std::initializer_list<size_t> sizes) {
  SeccompProfile p;
  p.name = name;
  auto sz = sizes.begin();
  for (const char* const* l : lists) {
    for (size_t i = 0; i < *sz; ++i) p.allow.emplace_back(l[i]);
    ++sz;
  }
  return p;
}

struct CtxFree {
  void operator()(void* c) const { seccomp_release(c); }
};

}  // namespace

SeccompProfile daemon_profile() {
  return build("podshimd", {kCommon, kDaemon},
               {std::size(kCommon), std::size(kDaemon)});
}

SeccompProfile hook_profile() {
  return build("podshim-hook", {kCommon, kHook}, {std::size(kCommon), std::size(kHook)});
}

Result<void> install_seccomp(const SeccompProfile& profile) {
  std::unique_ptr<void, CtxFree> ctx(seccomp_init(SCMP_ACT_ERRNO(
      static_cast<uint32_t>(profile.refuse_errno))));
  if (!ctx) return fail(ENOMEM, "seccomp_init failed for the {} profile", profile.name);
  for (const std::string& s : profile.allow) {
    int nr = seccomp_syscall_resolve_name(s.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // not a syscall on this architecture
    int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0);
    if (rc < 0) return fail_code(-rc, "allowing syscall {} in the {} profile", s, profile.name);
  }
  // A binary tree of syscall numbers instead of a linear list: every syscall
  // pays for the filter, and with ~150 allowed calls the list is long. An
  // optimisation only: a libseccomp without it builds the same filter.
  (void)seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  // Apply to every thread, so a helper thread started earlier is covered.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc < 0) return fail_code(-rc, "requesting thread synchronisation for seccomp");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail_errno("setting no_new_privs");
  rc = seccomp_load(ctx.get());
  if (rc < 0) return fail_code(-rc, "loading the {} seccomp filter", profile.name);
  return {};
}

}  // namespace podshim::security
