#pragma once

#include <chrono>

// Ends a blocking system call of the calling thread at a deadline, by a
// signal sent to that thread alone.
//
// What it is for: some cgroup writes run reclaim in the writer's context
// until the kernel is done or a signal is pending. mm/memcontrol.c,
// memory_high_write(), memory_max_write() and memory_reclaim() check
// signal_pending() between reclaim passes; memory.high and memory.max keep
// the new value and return success, memory.reclaim fails with EINTR. On
// Linux 6.12 (4 vCPUs under TCG) a cgroup with 80 MiB of dirty page cache
// made a memory.high write at 32 MiB take up to 4.7 s and a memory.reclaim
// write 4.3 s: past containerd's 2 s NRI plugin timeout, so the runtime
// dropped the plugin and wrote memory.max itself, and the kernel OOM-killed
// the container. A deadline armed around such a write keeps the shrink
// within its budget.
//
// One timer per thread (timer_create with SIGEV_THREAD_ID), created on
// first use; the signal's handler is installed without SA_RESTART and only
// marks that it fired. Writers that retry on EINTR (CgroupDir::write,
// fs::write_attr_at) stop retrying once it has fired.

namespace podshim {

class SyscallDeadline {
 public:
  // Arms the calling thread's timer `after` from now (at least 1 ms).
  // A deadline that cannot be armed (no timer: ENOMEM, RLIMIT_SIGPENDING)
  // leaves the call unbounded, as it was; armed() says so.
  explicit SyscallDeadline(std::chrono::milliseconds after);
  ~SyscallDeadline();
  SyscallDeadline(const SyscallDeadline&) = delete;
  SyscallDeadline& operator=(const SyscallDeadline&) = delete;

  bool armed() const { return armed_; }
  // Whether the deadline has passed (its signal came) since it was armed.
  bool fired() const;

 private:
  bool armed_ = false;
};

// Whether a deadline armed on this thread has fired and is still armed:
// an EINTR the caller should not retry.
bool syscall_deadline_fired();

}  // namespace podshim
