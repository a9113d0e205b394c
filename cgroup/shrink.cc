#include "cgroup/shrink.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <vector>

#include <unistd.h>

#include "base/str.h"
#include "base/syscall_deadline.h"
#include "cgroup/convert.h"

namespace podshim::cgroup {
namespace {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

// The steps are described in shrink.h.

struct Psi {
  double some_avg10 = 0, full_avg10 = 0;
  uint64_t some_total = 0, full_total = 0;
};
// memory.pressure: "some avg10=0.00 avg60=0.00 avg300=0.00 total=0" and a
// "full" line (Documentation/accounting/psi.rst).
std::optional<Psi> read_psi(const ShrinkCgroup& t) {
  auto s = t.dir->read("memory.pressure");
  if (!s) return std::nullopt;
  Psi p;
  for (auto line : str::split(*s, '\n')) {
    bool some = str::starts_with(line, "some "), full = str::starts_with(line, "full ");
    if (!some && !full) continue;
    for (auto field : str::split(line, ' ')) {
      auto eq = field.find('=');
      if (eq == std::string_view::npos) continue;
      auto key = field.substr(0, eq);
      std::string val(field.substr(eq + 1));
      if (key == "avg10") (some ? p.some_avg10 : p.full_avg10) = std::strtod(val.c_str(), nullptr);
      if (key == "total") {
        auto v = str::parse_u64(val);
        if (v) (some ? p.some_total : p.full_total) = *v;
      }
    }
  }
  return p;
}

struct Shrink {
  ShrinkContext ctx;
  ShrinkCgroup cg;
  std::string new_max;
  ResizeReport* rep = nullptr;
  bool reclaim_only = false;
  ShrinkDone cb;
  uint64_t target = 0, headroom = 0, usage0 = 0, usage = 0;
  // memory.stat as last read (the report shows it as read), and how far
  // it may lag the kernel (memory_stat_lag_bytes()).
  uint64_t anon = 0, file = 0, shmem = 0, slab = 0;
  uint64_t dirty = 0;  // file_dirty + file_writeback: page cache that reclaim must wait for
  uint64_t lag = 0;
  // The Usage refusal rests on the lag (reported with the refusal).
  bool lag_decided = false;
  // For the trend: memory.stat's four values at the previous sample, and
  // the lowest memory.current seen since they last changed.
  std::array<uint64_t, 4> stat_seen{};
  bool stat_seen_valid = false;
  uint64_t usage_min_since_stat = 0;
  std::string prev_high;
  // The memory.high an earlier ReclaimOnly resize's held clamp set (it
  // stays in force, and journaled, if this shrink gives up).
  std::optional<std::string> earlier_clamp;
  bool clamp_needed = false;
  bool has_reclaim = false;
  bool reclaim_tried = false;  // one memory.reclaim write made, whatever it returned
  Clock::time_point t0, reclaim_deadline, watch_t0;
  ms watch{0};
  std::vector<std::pair<double, double>> samples;  // (seconds since t0, unreclaimable(): see sample())
  std::optional<Psi> psi0;
  double some_avg10_max = 0, full_avg10_max = 0;
  double some_window = 0, full_window = 0;
  // The read-back's readings cleared the shrink (history_clears()): no
  // watch under the clamp before the write; their trend, bytes/s.
  bool history_cleared = false;
  double history_rate = 0;
};
using ShrinkPtr = std::shared_ptr<Shrink>;

constexpr uint64_t kReclaimChunk = 64u << 20;
void reclaim_tick(const ShrinkPtr& s);
void start_watch(const ShrinkPtr& s);
void watch_tick(const ShrinkPtr& s);
void decide(const ShrinkPtr& s);
void wrote_max(const ShrinkPtr& s, Result<void> w);
void record(const Shrink& s);
Result<void> restore_high(const Shrink& s);
void give_up(const ShrinkPtr& s, Unexpected e);
Unexpected refuse(const Shrink& s, ShrinkWhy why);
ms remaining(const Shrink& s, Clock::time_point deadline);
Result<void> write_by(const Shrink& s, const char* file, uint64_t value, Clock::time_point deadline);
// The shrink's clock: EngineOptions::clock when a test drives time.
Clock::time_point now(const Shrink& s) { return s.ctx.opts->clock ? s.ctx.opts->clock() : Clock::now(); }


// memory.stat is not exact at any moment, memory.current is. Since Linux
// 6.8 (mm/memcontrol.c: memcg_rstat_updated(),
// memcg_vmstats_needs_flush(), flush_memcg_stats_dwork()) each CPU tallies
// its stat updates (in pages) and folds them into the cgroup's count once
// they reach MEMCG_CHARGE_BATCH (64); reading memory.stat flushes only when
// that count is above MEMCG_CHARGE_BATCH x online CPUs, and the periodic
// worker flushes everything every 2 s (deferrable: measured up to 4 s).
// Older kernels keep one such count for the whole node, to the same bound.
// So a small change, such as 1 MiB just touched in a fresh cgroup on a
// 16-CPU node, is missing from memory.stat for seconds while memory.current
// has it at once. The kernel's comment there gives the bound: out of sync
// by at most MEMCG_CHARGE_BATCH x CPUs pages. The per-CPU remainders not yet
// folded in add at most as much again in update units, but a page that
// joins or leaves anon or file also moves an LRU counter in the same tally,
// so it costs two units: the lag of anon plus file stays within
// MEMCG_CHARGE_BATCH x CPUs pages. Nothing here needs the stat fresher
// than that: decisions are made from memory.current, and what the stat
// adds is discounted by this bound where it would admit a shrink.
constexpr uint64_t kMemcgChargeBatch = 64;  // include/linux/memcontrol.h

// memory.stat's anon, file, shmem and slab_reclaimable into `s`, as the
// kernel lists them (the refusal reports them so).
Result<void> read_breakdown(Shrink& s) {
  static constexpr std::array<std::string_view, 6> kKeys{"anon",         "file",      "shmem", "slab_reclaimable",
                                                         "file_dirty", "file_writeback"};
  std::array<uint64_t, 6> v{};
  PODSHIM_TRY(s.cg.dir->read_fields("memory.stat", kKeys, v));
  s.anon = v[0], s.file = v[1], s.shmem = v[2], s.slab = v[3];
  s.dirty = v[4] + v[5];
  return {};
}

// What memory.stat lists as reclaimable without swap: page cache that is
// not shmem/tmpfs, and reclaimable slab (shmem cannot be reclaimed without
// swap: the kernel OOM-kills and usage stays above the limit). A stale stat
// can list more than memory.current charges: never more than usage.
uint64_t stat_reclaimable(const Shrink& s) {
  return std::min(s.usage, (s.file > s.shmem ? s.file - s.shmem : 0) + s.slab);
}

// The least the cgroup keeps whatever reclaim does, from memory.current:
// usage less what the stat lists as reclaimable, that less `lag` (a stale
// stat may still list pages that are gone, or were never page cache), and
// never below the stat's own anon + shmem (bounded by usage).
uint64_t unreclaimable_floor(const Shrink& s, uint64_t lag) {
  uint64_t r = stat_reclaimable(s);
  r = r > lag ? r - lag : 0;
  return std::max(s.usage - r, std::min(s.usage, s.anon + s.shmem));
}

// Samples the unreclaimable part for the trend (the breakdown is kept for
// a refusal), at s.usage read just before. memory.stat's anon + shmem,
// plus memory.current's rise since the stat last moved: while the stat
// stays as it was (not flushed, see above) growth shows only in
// memory.current, and it counts as unreclaimable until the stat says
// otherwise. A stat that moves every sample (a flush each read) is taken
// as it is, so page cache growing in step with it is not growth.
Result<void> sample(Shrink& s) {
  PODSHIM_TRY(read_breakdown(s));
  std::array<uint64_t, 4> st{s.anon, s.file, s.shmem, s.slab};
  if (!s.stat_seen_valid || st != s.stat_seen) {
    s.stat_seen = st;
    s.stat_seen_valid = true;
    s.usage_min_since_stat = s.usage;
  }
  s.usage_min_since_stat = std::min(s.usage_min_since_stat, s.usage);
  uint64_t y = std::min(s.usage, s.anon + s.shmem + (s.usage - s.usage_min_since_stat));
  double sec = std::chrono::duration<double>(now(s) - s.t0).count();
  s.samples.emplace_back(sec, static_cast<double>(y));
  return {};
}

// Least-squares slope of the samples, bytes/s; 0 with fewer than three
// samples or no time between them.
double growth_rate(const std::vector<std::pair<double, double>>& xs) {
  if (xs.size() < 3) return 0;
  double mt = 0, my = 0;
  for (const auto& [t, y] : xs) mt += t, my += y;
  mt /= xs.size(), my /= xs.size();
  double num = 0, den = 0;
  for (const auto& [t, y] : xs) num += (t - mt) * (y - my), den += (t - mt) * (t - mt);
  return den > 1e-9 ? num / den : 0;
}

// Whether the readings the read-back took before this request (plus the
// fresh one the shrink just made) leave no need to watch the cgroup under its
// memory.high clamp before the write: all of the below must hold.
//  - A reading at least one watch old exists, so the span the watch would
//    measure has already been measured; the rate over it is the rise since
//    that reading over its age.
//  - When that reading is older than kOnsetSpan and usage has risen past
//    kNoiseBytes since, the rise may have begun just now at a steeper rate
//    than its average says: the watch measures it instead.
//  - The least-squares trend over the recent readings and the fresh one
//    (three or more) is counted too, whichever rate is higher.
//  - The cgroup's memory PSI "some" avg10 is not above the threshold.
//  - memory.current now, plus that rate over the growth window, plus the
//    headroom, fits under the target: the clamp will not make the kernel
//    reclaim, so it cannot stall the workload (memory.high throttles only
//    above it: Documentation/admin-guide/cgroup-v2.rst, "memory.high").
// memory.current counts page cache as well as anon and shmem, so its trend
// can only overstate the unreclaimable growth the watch would measure.
// Anything short of that: the watch, as without readings.
bool history_clears(Shrink& s) {
  constexpr auto kOnsetSpan = std::chrono::seconds(1);
  constexpr uint64_t kNoiseBytes = 1u << 20;
  constexpr auto kTrendSpan = std::chrono::seconds(30);
  const auto& hist = s.ctx.opts->usage_history;
  if (!hist || s.watch.count() == 0) return false;
  const auto t = now(s);
  const auto readings = hist->samples(s.cg.id);
  const UsageSample* ref = nullptr;
  for (auto it = readings.rbegin(); it != readings.rend(); ++it)
    if (it->at <= t && t - it->at >= s.watch) {
      ref = &*it;
      break;
    }
  if (!ref) return false;
  const auto age = t - ref->at;
  const uint64_t rise = s.usage > ref->bytes ? s.usage - ref->bytes : 0;
  if (age > kOnsetSpan && rise > kNoiseBytes) return false;
  double rate = static_cast<double>(rise) / std::chrono::duration<double>(age).count();
  std::vector<std::pair<double, double>> xs;
  for (const auto& r : readings)
    if (r.at <= t && t - r.at <= kTrendSpan)
      xs.emplace_back(-std::chrono::duration<double>(t - r.at).count(), static_cast<double>(r.bytes));
  xs.emplace_back(0.0, static_cast<double>(s.usage));
  rate = std::max(rate, growth_rate(xs));
  if (auto p = read_psi(s.cg); p && p->some_avg10 > s.ctx.opts->shrink_pressure_threshold) return false;
  const double window_s = std::chrono::duration<double>(s.ctx.opts->shrink_growth_window).count();
  if (static_cast<double>(s.usage) + rate * window_s + static_cast<double>(s.headroom) > static_cast<double>(s.target))
    return false;
  s.history_rate = rate;
  return true;
}

void reclaim_tick(const ShrinkPtr& s) {
  auto cur = s->cg.dir->read_u64("memory.current");
  if (!cur) return give_up(s, wrap(cur, fmt::format("'{}'", s->cg.id)));
  s->usage = *cur;
  (void)sample(*s);  // a failed read leaves the sample out
  if (s->usage + s->headroom <= s->target) return start_watch(s);
  // The deadline refuses only once reclaim has been asked for: a process
  // stalled past it between the clamp and the first tick (a loaded node,
  // the journal's fsync) must not refuse a shrink it never tried.
  if ((s->reclaim_tried || !s->has_reclaim) && now(*s) >= s->reclaim_deadline)
    return give_up(s, refuse(*s, ShrinkWhy::Timeout));
  ms next = s->ctx.opts->shrink_tick;
  if (s->has_reclaim) {
    // In chunks, so one write(2) never holds the loop for long; EAGAIN
    // means "could not reclaim all of it" and the next tick re-checks.
    uint64_t want = std::min<uint64_t>(s->usage + s->headroom - s->target, kReclaimChunk);
    s->reclaim_tried = true;
    if (write_by(*s, "memory.reclaim", want, s->reclaim_deadline)) next = ms(0);
  }
  s->ctx.sched(std::min(next, remaining(*s, s->reclaim_deadline)), [s] { reclaim_tick(s); });
}
ms remaining(const Shrink& s, Clock::time_point deadline) {
  auto r = std::chrono::duration_cast<ms>(deadline - now(s));
  return r.count() > 0 ? r : ms(0);
}

// A write that makes the kernel reclaim in our thread (memory.high below
// usage, memory.reclaim), cut at `deadline`: the kernel reclaims until done
// or a signal is pending, and with dirty page cache that took seconds (see
// base/syscall_deadline.h). Cut short, memory.high holds the clamp all the
// same and memory.reclaim fails with EINTR; either way memory.current,
// read next, decides.
Result<void> write_by(const Shrink& s, const char* file, uint64_t value, Clock::time_point deadline) {
  SyscallDeadline d(remaining(s, deadline));
  return s.ctx.write(file, std::to_string(value));
}

void start_watch(const ShrinkPtr& s) {
  s->watch_t0 = now(*s);
  s->psi0 = read_psi(s->cg);
  if (s->psi0) s->some_avg10_max = s->psi0->some_avg10, s->full_avg10_max = s->psi0->full_avg10;
  if (s->watch.count() == 0 || s->history_cleared) return decide(s);
  s->ctx.sched(std::min(s->ctx.opts->shrink_tick, s->watch), [s] { watch_tick(s); });
}

// The stall share over the watch so far, percent.
void measure_psi(Shrink& s) {
  if (!s.psi0) return;
  auto p = read_psi(s.cg);
  if (!p) return;
  s.some_avg10_max = std::max(s.some_avg10_max, p->some_avg10);
  s.full_avg10_max = std::max(s.full_avg10_max, p->full_avg10);
  double us = std::chrono::duration<double, std::micro>(now(s) - s.watch_t0).count();
  if (us <= 0) return;
  auto pct = [&](uint64_t a, uint64_t b) { return a > b ? std::min(100.0, (a - b) * 100.0 / us) : 0.0; };
  s.some_window = pct(p->some_total, s.psi0->some_total);
  s.full_window = pct(p->full_total, s.psi0->full_total);
}

void watch_tick(const ShrinkPtr& s) {
  // The trend needs memory.current at each sample (see sample()); a failed
  // read skips the sample, as a failed memory.stat read does.
  if (auto cur = s->cg.dir->read_u64("memory.current")) {
    s->usage = *cur;
    (void)sample(*s);
  }
  measure_psi(*s);
  auto elapsed = now(*s) - s->watch_t0;
  // Back off early when the clamp already hurts: the workload is being
  // throttled while we watch.
  if (elapsed >= s->watch / 2 && s->some_window > s->ctx.opts->shrink_pressure_threshold)
    return give_up(s, refuse(*s, ShrinkWhy::Pressure));
  if (elapsed >= s->watch) return decide(s);
  s->ctx.sched(std::min(s->ctx.opts->shrink_tick, remaining(*s, s->watch_t0 + s->watch)), [s] { watch_tick(s); });
}

void decide(const ShrinkPtr& s) {
  const ShrinkCgroup& t = s->cg;
  measure_psi(*s);
  if (s->some_window > s->ctx.opts->shrink_pressure_threshold) return give_up(s, refuse(*s, ShrinkWhy::Pressure));
  const double rate = std::max(growth_rate(s->samples), s->history_rate);
  // The level the trend starts from: the last sample, or what the last
  // memory.current and memory.stat read say the cgroup keeps (the
  // pre-check's bound), whichever is higher.
  const double unreclaimable = std::max(s->samples.empty() ? 0.0 : s->samples.back().second,
                                        static_cast<double>(unreclaimable_floor(*s, s->lag)));
  const double window_s = std::chrono::duration<double>(s->ctx.opts->shrink_growth_window).count();
  if (rate > 0 && unreclaimable + rate * window_s + static_cast<double>(s->headroom) > static_cast<double>(s->target))
    return give_up(s, refuse(*s, ShrinkWhy::Growth));
  // Usage at the moment of the write: the clamp holds it near the target,
  // but memory.high can be overshot; a memory.max below usage makes the
  // write itself reclaim and, failing that, OOM-kill (mm/memcontrol.c,
  // memory_max_write).
  auto cur = t.dir->read_u64("memory.current");
  if (!cur) return give_up(s, wrap(cur, fmt::format("'{}'", t.id)));
  s->usage = *cur;
  if (s->usage > s->target && s->has_reclaim) {
    // EAGAIN (not all of it reclaimed) is the usual failure; usage, read
    // again, decides.
    const auto settle_starts = s->t0 + s->ctx.opts->shrink_timeout - s->watch;
    (void)write_by(*s, "memory.reclaim", s->usage + s->headroom - s->target, settle_starts);
    if (auto c2 = t.dir->read_u64("memory.current")) s->usage = *c2;
  }
  if (s->usage > s->target) return give_up(s, refuse(*s, ShrinkWhy::Timeout));
  record(*s);
  if (s->reclaim_only) {
    if (s->rep && s->usage0 > s->usage) s->rep->bytes_reclaimed += s->usage0 - s->usage;
    // Keep the clamp until release(): the runtime writes memory.max.
    if (s->clamp_needed) {
      auto dir = CgroupDir::open(s->ctx.root_fd, t.relpath);
      s->ctx.held->put(t.relpath, s->prev_high, dir ? std::make_shared<CgroupDir>(std::move(*dir)) : nullptr);
      if (s->ctx.clamped) s->ctx.clamped->push_back(t.relpath);
      if (s->rep) s->rep->steps.push_back({t.id, "memory.high", s->prev_high, std::to_string(s->target)});
    }
    return s->cb({});
  }
  s->ctx.write_max(s->new_max, [s](Result<void> w) { wrote_max(s, std::move(w)); });
}

void wrote_max(const ShrinkPtr& s, Result<void> w) {
  auto r = restore_high(*s);
  if (!w) return s->cb(std::move(w));
  if (!r) return s->cb(wrap(r, "restoring memory.high after shrinking"));
  if (s->rep && s->usage0 > s->usage) s->rep->bytes_reclaimed += s->usage0 - s->usage;
  // Settle after the write: a kill in it is part of the outcome (events).
  auto cb = std::move(s->cb);
  if (s->watch.count() == 0) return cb({});
  s->ctx.sched(s->watch, [cb = std::move(cb)] { cb({}); });
}

// What the shrink saw, into the report (highest over the cgroups shrunk).
void record(const Shrink& s) {
  if (!s.rep) return;
  ResizeReport& r = *s.rep;
  r.psi_some_avg10 = std::max(r.psi_some_avg10, s.some_avg10_max);
  r.psi_full_avg10 = std::max(r.psi_full_avg10, s.full_avg10_max);
  r.psi_some_window = std::max(r.psi_some_window, s.some_window);
  r.psi_full_window = std::max(r.psi_full_window, s.full_window);
  int64_t g = static_cast<int64_t>(std::max(growth_rate(s.samples), s.history_rate));
  if (std::abs(g) > std::abs(r.growth_bytes_per_sec)) r.growth_bytes_per_sec = g;
}

Result<void> restore_high(const Shrink& s) {
  if (!s.clamp_needed) return {};
  auto r = s.ctx.write("memory.high", s.prev_high);
  if (r) {
    s.ctx.journal.drop(s.cg.relpath);  // on failure recover() retries from the journal
    s.ctx.held->erase(s.cg.relpath);
  }
  return r;
}

// Ends a shrink that will not write memory.max: restores memory.high.
void give_up(const ShrinkPtr& s, Unexpected e) {
  record(*s);
  if (s->reclaim_only) {
    // A clamp held from an earlier ReclaimOnly resize stays held (and
    // journaled) until its release(); only this op's own clamp goes.
    if (s->earlier_clamp) {
      if (auto w = s->ctx.write("memory.high", *s->earlier_clamp); !w)
        e.value().message += fmt::format("; restoring the held memory.high clamp failed: {}", w.error().message);
      auto cb = std::move(s->cb);
      return cb(std::move(e));
    }
  }
  auto r = restore_high(*s);
  if (!r) e.value().message += fmt::format("; restoring memory.high failed: {}", r.error().message);
  auto cb = std::move(s->cb);
  cb(std::move(e));
}

Unexpected refuse(const Shrink& s, ShrinkWhy why) {
  ShrinkRefusal r{s.cg.id, s.target, s.usage, s.anon, s.file, s.shmem};
  r.dirty = s.dirty;
  r.why = why;
  r.growth_bytes_per_sec = static_cast<int64_t>(growth_rate(s.samples));
  r.psi_some_avg10 = s.some_avg10_max;
  r.psi_full_avg10 = s.full_avg10_max;
  r.psi_some_window = s.some_window;
  r.psi_full_window = s.full_window;
  r.pressure_threshold = s.ctx.opts->shrink_pressure_threshold;
  r.growth_window = s.ctx.opts->shrink_growth_window;
  r.elapsed = std::chrono::duration_cast<ms>(now(s) - s.t0);
  Error e = shrink_refused(std::move(r));
  if (s.lag_decided)
    e.message += fmt::format(" (memory.stat may lag the kernel by up to {} bytes on this node: that much of "
                             "what it lists as reclaimable was not counted as such)",
                             std::min(s.lag, stat_reclaimable(s)));
  return Unexpected(std::move(e));
}

}  // namespace

uint64_t memory_stat_lag_bytes() {
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  long page = ::sysconf(_SC_PAGESIZE);
  return kMemcgChargeBatch * static_cast<uint64_t>(cpus > 0 ? cpus : 1) * static_cast<uint64_t>(page > 0 ? page : 4096);
}

namespace {

// Clamps memory.high at the target, journaled first so that a crash leaves a
// clamp recover() undoes, then starts reclaiming (reclaim_tick).
void clamp_and_reclaim(const ShrinkPtr& s) {
  // The memory.high to come back to: a clamp a ReclaimOnly resize still
  // holds on this cgroup is not the cgroup's own value.
  {
    if (auto h = s->ctx.held->prev_high(s->cg.relpath)) s->prev_high = *h;
  }
  // What memory.high holds now: with no held clamp, the value to come
  // back to as well (one read for both).
  auto cur_high = s->cg.dir->read_trimmed("memory.high");
  if (s->prev_high.empty()) {
    if (!cur_high) return s->cb(wrap(cur_high, fmt::format("'{}'", s->cg.id)));
    s->prev_high = *cur_high;
  }
  auto prev_high_v = parse_memory_max(s->prev_high);
  if (!prev_high_v) return s->cb(wrap(prev_high_v, fmt::format("'{}' memory.high", s->cg.id)));
  auto cur_high_v = cur_high ? parse_memory_max(*cur_high) : Result<std::optional<uint64_t>>(std::nullopt);
  {
    if (s->ctx.held->has(s->cg.relpath) && cur_high) s->earlier_clamp = *cur_high;
  }
  s->clamp_needed = !*prev_high_v || **prev_high_v > s->target;
  // Linux 5.19+; looked up once: whether the file exists is the kernel's,
  // not the moment's.
  s->has_reclaim = s->cg.dir->has("memory.reclaim");
  if (s->clamp_needed) {
    auto j = s->ctx.journal.record(s->cg.relpath, s->prev_high);
    if (!j) return s->cb(std::move(j));
    // Skip the write when a held clamp already sits at the target.
    bool at_target = cur_high_v && *cur_high_v && **cur_high_v == s->target;
    if (!at_target) {
      auto w = write_by(*s, "memory.high", s->target, s->reclaim_deadline);
      if (!w) {
        if (!s->earlier_clamp) s->ctx.journal.drop(s->cg.relpath);  // a held clamp keeps its entry
        return s->cb(std::move(w));
      }
    }
    if (s->ctx.opts->test_pause_after_clamp.count() > 0)  // test seam
      return s->ctx.sched(s->ctx.opts->test_pause_after_clamp, [s] { reclaim_tick(s); });
  }
  reclaim_tick(s);
}

}  // namespace

void shrink_memory(ShrinkContext ctx, ShrinkCgroup cg, const std::string& new_max, ShrinkDone cb) {
  const ShrinkCgroup& t = cg;
  ResizeReport* rep = ctx.rep;
  const bool reclaim_only = ctx.reclaim_only;
  auto target_opt = parse_memory_max(new_max);
  if (!target_opt) return cb(Unexpected(target_opt.error()));
  if (!*target_opt) return ctx.write_max(new_max, std::move(cb));  // "max" is no shrink
  auto s = std::make_shared<Shrink>();
  s->ctx = std::move(ctx);
  s->cg = cg;
  s->new_max = new_max;
  s->rep = rep;
  s->reclaim_only = reclaim_only;
  s->cb = std::move(cb);
  s->target = page_round_down(**target_opt);
  s->headroom = s->ctx.opts->shrink_headroom_bytes;
  s->t0 = now(*s);
  // The budget: reclaim, then a watch before and a settle after the write,
  // each at most a quarter of it.
  s->watch = std::min(s->ctx.opts->settle, s->ctx.opts->shrink_timeout / 4);
  s->reclaim_deadline = s->t0 + s->ctx.opts->shrink_timeout - 2 * s->watch;
  auto usage = t.dir->read_u64("memory.current");
  if (!usage) return s->cb(wrap(usage, fmt::format("'{}'", t.id)));
  s->usage0 = s->usage = *usage;
  s->lag = *s->ctx.opts->memory_stat_lag_bytes;  // Engine::create always fills it
  // The breakdown, and the trend's first sample: memory.stat's anon + shmem.
  if (auto st = sample(*s); !st) return s->cb(wrap(st, fmt::format("'{}'", t.id)));
  // Pre-check: refuse when what reclaim cannot take (unreclaimable_floor:
  // memory.current less what memory.stat lists as reclaimable, that less
  // the stat's possible lag) plus headroom is above the target. A stale
  // stat moves that floor by at most the lag, and the floor takes it on
  // the side of refusing: a target only the lag puts out of reach is
  // refused too, and the message says so. Admitting it would clamp
  // memory.high below what the cgroup may keep and throttle the workload
  // for the whole reclaim budget before refusing on timeout. The price: a
  // shrink to within the lag of the floor is refused even when the stat
  // was fresh (512 KiB on a 2-CPU node, 4 MiB on 16 CPUs, with 4 KiB pages).
  if (unreclaimable_floor(*s, s->lag) + s->headroom > s->target) {
    s->lag_decided = unreclaimable_floor(*s, 0) + s->headroom <= s->target;
    return s->cb(refuse(*s, ShrinkWhy::Usage));
  }

  s->history_cleared = history_clears(*s);

  clamp_and_reclaim(s);
}

}  // namespace podshim::cgroup
