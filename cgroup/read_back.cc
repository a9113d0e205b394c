#include "cgroup/read_back.h"

#include "base/str.h"

namespace podshim::cgroup {

Result<Actual> read_back(const CgroupDir& d, WeightFormula f) {
  Actual a;
  auto w = d.read_trimmed("cpu.weight");
  if (!w) return Unexpected(w.error());
  a.cpu_weight_raw = *w;
  auto wv = str::parse_u64(*w);
  if (!wv) return wrap(wv, "cpu.weight");
  a.cpu_request_milli = weight_to_milli_cpu(*wv, f);
  auto m = d.read_trimmed("cpu.max");
  if (!m) return Unexpected(m.error());
  a.cpu_max_raw = *m;
  auto mv = parse_cpu_max(*m);
  if (!mv) return Unexpected(mv.error());
  if (mv->quota_us) a.cpu_limit_milli = quota_us_to_milli_cpu(*mv->quota_us, mv->period_us);
  auto mm = d.read_trimmed("memory.max");
  if (!mm) return Unexpected(mm.error());
  a.memory_max_raw = *mm;
  auto mmv = parse_memory_max(*mm);
  if (!mmv) return Unexpected(mmv.error());
  if (*mmv) a.memory_limit_bytes = static_cast<int64_t>(**mmv);
  auto cur = d.read_u64("memory.current");
  if (!cur) return Unexpected(cur.error());
  a.memory_current = *cur;
  auto st = d.read_keyed("memory.stat");
  if (!st) return Unexpected(st.error());
  auto get = [](const auto& m, std::string_view k) {
    auto it = m.find(k);
    return it == m.end() ? uint64_t{0} : it->second;
  };
  a.anon = get(*st, "anon");
  a.file = get(*st, "file");
  a.shmem = get(*st, "shmem");
  auto ev = d.read_keyed("memory.events");
  if (!ev) return Unexpected(ev.error());
  a.oom = get(*ev, "oom");
  a.oom_kill = get(*ev, "oom_kill");
  a.events_max = get(*ev, "max");
  a.events_high = get(*ev, "high");
  return a;
}

}  // namespace podshim::cgroup
