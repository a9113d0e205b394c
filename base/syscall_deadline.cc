#include "base/syscall_deadline.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <ctime>
#include <mutex>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"

namespace podshim {
namespace {

// glibc keeps SIGRTMIN and the one above for itself (nptl) and moves
// SIGRTMIN past them; nothing else in podshim uses real-time signals.
int deadline_signal() { return SIGRTMIN + 3; }

thread_local volatile sig_atomic_t t_fired = 0;
thread_local bool t_armed = false;

void on_deadline(int) { t_fired = 1; }

struct ThreadTimer {
  timer_t id{};
  bool ok = false;
  ThreadTimer() {
    sigevent ev{};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = deadline_signal();
    ev._sigev_un._tid = static_cast<pid_t>(::syscall(SYS_gettid));
    ok = ::timer_create(CLOCK_MONOTONIC, &ev, &id) == 0;
    if (!ok) {
      static std::once_flag warned;
      int err = errno;
      std::call_once(warned, [err] {
        log::warn("timer_create: {}: memory shrinks cannot cut a slow reclaiming cgroup write at their deadline",
                  std::strerror(err));
      });
      return;
    }
    // The loop's thread may block signals it takes through signalfd; this
    // one must reach the handler.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, deadline_signal());
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
  ~ThreadTimer() {
    if (ok) ::timer_delete(id);
  }
  ThreadTimer(const ThreadTimer&) = delete;
  ThreadTimer& operator=(const ThreadTimer&) = delete;
};

ThreadTimer& thread_timer() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = on_deadline;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the interrupted call returns
    ::sigaction(deadline_signal(), &sa, nullptr);
  });
  thread_local ThreadTimer t;
  return t;
}

bool set_timer(timer_t id, std::chrono::milliseconds after) {
  itimerspec its{};
  its.it_value.tv_sec = static_cast<time_t>(after.count() / 1000);
  its.it_value.tv_nsec = static_cast<long>((after.count() % 1000) * 1000000);
  return ::timer_settime(id, 0, &its, nullptr) == 0;
}

}  // namespace

SyscallDeadline::SyscallDeadline(std::chrono::milliseconds after) {
  ThreadTimer& t = thread_timer();
  if (!t.ok) return;
  t_fired = 0;
  armed_ = set_timer(t.id, std::max(after, std::chrono::milliseconds(1)));
  t_armed = armed_;
}

SyscallDeadline::~SyscallDeadline() {
  if (!armed_) return;
  // Disarmed before t_armed is cleared: a signal generated up to here is
  // delivered on the way out of timer_settime and only sets t_fired.
  (void)set_timer(thread_timer().id, std::chrono::milliseconds(0));
  t_armed = false;
}

bool SyscallDeadline::fired() const { return armed_ && t_fired != 0; }

bool syscall_deadline_fired() { return t_armed && t_fired != 0; }

}  // namespace podshim
