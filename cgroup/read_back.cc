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
    if (!v) return Unexpected(v.error());
    PODSHIM_TRY(row.read_back(*v, a, f));
  }
  // What the kernel observes (not attributes podshim writes).
  auto cur = d.read_u64("memory.current");
  if (!cur) return Unexpected(cur.error());
  a.memory_current = *cur;
  auto get = [](const auto& m, std::string_view k) {
    auto it = m.find(k);
    return it == m.end() ? uint64_t{0} : it->second;
  };
  if (with_stat) {
    auto st = d.read_keyed("memory.stat");
    if (!st) return Unexpected(st.error());
    a.anon = get(*st, "anon");
    a.file = get(*st, "file");
    a.shmem = get(*st, "shmem");
  }
  auto ev = d.read_keyed("memory.events");
  if (!ev) return Unexpected(ev.error());
  a.oom = get(*ev, "oom");
  a.oom_kill = get(*ev, "oom_kill");
  a.events_max = get(*ev, "max");
  a.events_high = get(*ev, "high");
  return a;
}

}  // namespace podshim::cgroup
