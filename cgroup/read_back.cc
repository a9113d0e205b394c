#include "cgroup/read_back.h"

#include <algorithm>

#include "base/str.h"
#include "cgroup/controllers.h"

namespace podshim::cgroup {

Result<Actual> read_back(AttrSource& src, WeightFormula f, bool with_stat) {
  Actual a;
  bool any = false;
  // The limits and requests, through each row's read-back (controllers.cc).
  for (const Controller& row : controllers()) {
    if (!row.read_back) continue;
    auto v = src.text(row.file);
    if (!v) return Unexpected(v.error());
    if (!*v) continue;
    any = any || row.name.empty();
    PODSHIM_TRY(row.read_back(**v, a, f));
  }
  // What the kernel observes (not attributes podshim writes).
  auto cur = src.text("memory.current");
  if (!cur) return Unexpected(cur.error());
  if (*cur) {
    any = true;
    auto c = str::parse_u64(**cur);
    if (!c) return wrap(c, "memory.current");
    a.memory_current = *c;
  }
  if (!any) return fail(ENOENT, "the cgroup has neither cpu nor memory attributes (removed?)");
  if (with_stat) {
    auto stat = src.text("memory.stat");
    if (!stat) return Unexpected(stat.error());
    if (*stat) {
      static constexpr std::array<std::string_view, 3> kStat{"anon", "file", "shmem"};
      std::array<uint64_t, 3> v{};
      parse_fields(**stat, kStat.data(), v.data(), v.size());
      a.anon = v[0];
      a.file = v[1];
      a.shmem = v[2];
    }
  }
  auto ev = src.text("memory.events");
  if (!ev) return Unexpected(ev.error());
  if (*ev) {
    const MemoryEvents e = parse_memory_events(**ev);
    a.oom = e.oom;
    a.oom_kill = e.oom_kill;
    a.events_max = e.max;
    a.events_high = e.high;
  }
  return a;
}

namespace {

// A CgroupDir's files, or what the caller already read of them.
class DirSource final : public AttrSource {
 public:
  DirSource(const CgroupDir& d, std::span<const KnownAttr> known) : d_(d), known_(known) {}
  Result<std::optional<std::string_view>> text(std::string_view file) override {
    for (const KnownAttr& k : known_)
      if (k.file == file) return std::optional<std::string_view>(k.value);
    auto v = d_.read(file);
    if (!v && v.error().code == ENOENT) return std::optional<std::string_view>();
    if (!v) return Unexpected(v.error());
    buf_ = std::move(*v);
    return std::optional<std::string_view>(str::trim(buf_));
  }

 private:
  const CgroupDir& d_;
  std::span<const KnownAttr> known_;
  std::string buf_;
};

}  // namespace

Result<Actual> read_back(const CgroupDir& d, WeightFormula f, bool with_stat, std::span<const KnownAttr> known) {
  DirSource src(d, known);
  return read_back(src, f, with_stat);
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
