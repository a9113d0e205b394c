#include "cgroup/read_back.h"

#include <algorithm>

#include "base/str.h"
#include "cgroup/controllers.h"

namespace podshim::cgroup {

Result<Actual> read_back(const CgroupDir& d, WeightFormula f, bool with_stat, std::span<const KnownAttr> known) {
  Actual a;
  // The limits and requests, through each row's read-back (controllers.cc).
  for (const Controller& row : controllers()) {
    if (!row.read_back) continue;
    auto k = std::find_if(known.begin(), known.end(), [&](const KnownAttr& x) { return x.file == row.file; });
    if (k != known.end()) {
      PODSHIM_TRY(row.read_back(k->value, a, f));
      continue;
    }
    auto v = d.read_trimmed(std::string(row.file));
    // A registered resource's controller may be off in this cgroup: then
    // there is nothing of it to read, which is no failure of the rest.
    if (!v && !row.name.empty() && v.error().code == ENOENT) continue;
    if (!v) return Unexpected(v.error());
    PODSHIM_TRY(row.read_back(*v, a, f));
  }
  // What the kernel observes (not attributes podshim writes).
  auto cur = d.read_u64("memory.current");
  if (!cur) return Unexpected(cur.error());
  a.memory_current = *cur;
  if (with_stat) {
    static constexpr std::array<std::string_view, 3> kStat{"anon", "file", "shmem"};
    std::array<uint64_t, 3> v{};
    PODSHIM_TRY(d.read_fields("memory.stat", kStat, v));
    a.anon = v[0];
    a.file = v[1];
    a.shmem = v[2];
  }
  auto ev = read_memory_events(d);
  if (!ev) return Unexpected(ev.error());
  a.oom = ev->oom;
  a.oom_kill = ev->oom_kill;
  a.events_max = ev->max;
  a.events_high = ev->high;
  return a;
}

MemoryEvents parse_memory_events(std::string_view text) {
  static constexpr std::array<std::string_view, 4> kKeys{"oom", "oom_kill", "high", "max"};
  std::array<uint64_t, 4> v{};
  parse_fields(text, kKeys.data(), v.data(), v.size());
  return MemoryEvents{v[0], v[1], v[2], v[3]};
}

Result<MemoryEvents> read_memory_events(const CgroupDir& d) {
  auto text = d.read("memory.events");
  if (!text) return Unexpected(text.error());
  return parse_memory_events(*text);
}

}  // namespace podshim::cgroup
