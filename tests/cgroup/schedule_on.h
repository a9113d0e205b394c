// A callback run once on an sd-event loop after a delay: podshimd's
// scheduler, for tests that drive the engine on their own loop.
#pragma once

#include <systemd/sd-event.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>

namespace podshim::cgroup::testing {

// podshimd's scheduler on a private sd-event loop (shim/daemon/main.cc
// schedule_on does the same on the daemon's), but with an accuracy of 1 µs:
// sd-event's default (accuracy 0, 250 ms, sd_event_add_time(3)) coalesces
// timers and would measure its own slack, not whether the loop is free.
inline void schedule_on(sd_event* loop, std::chrono::milliseconds delay, std::function<void()> fn) {
  auto* w = new std::function<void()>(std::move(fn));
  uint64_t now = 0;
  sd_event_now(loop, CLOCK_MONOTONIC, &now);
  sd_event_source* src = nullptr;
  int r = sd_event_add_time(
      loop, &src, CLOCK_MONOTONIC, now + static_cast<uint64_t>(delay.count()) * 1000, 1,
      [](sd_event_source* s, uint64_t, void* u) -> int {
        (*static_cast<std::function<void()>*>(u))();
        sd_event_source_unref(s);
        return 0;
      },
      w);
  if (r < 0) {
    std::fprintf(stderr, "sd_event_add_time failed: %d\n", r);
    std::abort();
  }
  sd_event_source_set_destroy_callback(src, [](void* u) { delete static_cast<std::function<void()>*>(u); });
}

}  // namespace podshim::cgroup::testing
