// The last few memory.current readings of each container, as the daemon's
// periodic read-back (and its reads after runtime events) took them. A memory
// shrink uses them as the trend the cgroup showed before the request arrived:
// when that trend and a fresh reading leave ample room under the new limit,
// the shrink need not watch the cgroup under its memory.high clamp first (see
// shrink.cc, history_clears()).
//
// memory.current is exact at any moment (mm/memcontrol.c charges it at once,
// unlike memory.stat's batched counters), and it counts page cache too, so a
// trend taken from it can only overstate growth: overstating sends the shrink
// to its watch, never past it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace podshim::cgroup {

struct UsageSample {
  std::chrono::steady_clock::time_point at;
  uint64_t bytes = 0;
};

// Shared by the read-back (which records) and the engine (which reads);
// keyed by the id a ResizeTarget carries (a container's id).
class UsageHistory {
 public:
  // Readings kept per container: with the read-back's default 5 s interval,
  // about half a minute of trend.
  static constexpr size_t kKept = 6;

  void record(std::string_view id, std::chrono::steady_clock::time_point at, uint64_t bytes) {
    std::lock_guard l(mu_);
    auto it = rings_.find(id);
    if (it == rings_.end()) it = rings_.emplace(std::string(id), Ring{}).first;
    Ring& r = it->second;
    // A reading no later than the newest (a test clock, a reordered call)
    // replaces nothing and adds nothing: the trend needs time between them.
    if (r.n > 0 && at <= r.s[(r.head + kKept - 1) % kKept].at) return;
    r.s[r.head] = {at, bytes};
    r.head = static_cast<uint8_t>((r.head + 1) % kKept);
    if (r.n < kKept) ++r.n;
  }
  void forget(std::string_view id) {
    std::lock_guard l(mu_);
    if (auto it = rings_.find(id); it != rings_.end()) rings_.erase(it);
  }
  // Oldest first; empty when the container was never read.
  std::vector<UsageSample> samples(std::string_view id) const {
    std::lock_guard l(mu_);
    std::vector<UsageSample> out;
    auto it = rings_.find(id);
    if (it == rings_.end()) return out;
    const Ring& r = it->second;
    out.reserve(r.n);
    for (size_t i = 0; i < r.n; ++i) out.push_back(r.s[(r.head + kKept - r.n + i) % kKept]);
    return out;
  }
  size_t size() const {
    std::lock_guard l(mu_);
    return rings_.size();
  }

 private:
  struct Ring {
    std::array<UsageSample, kKept> s{};
    uint8_t n = 0, head = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Ring, std::less<>> rings_;
};

}  // namespace podshim::cgroup
