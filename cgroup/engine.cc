#include "cgroup/engine.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "base/fs.h"
#include "base/str.h"
#include "cgroup/cgroup_dir.h"
#include "cgroup/plan.h"

namespace podshim::cgroup {

AttrValues attr_values(const K8sResources& r, WeightFormula f, bool systemd_rounding) {
  AttrValues v;
  // kuberuntime calculateLinuxResources: shares from the limit when the
  // request is unset but the limit is set.
  std::optional<int64_t> weight_from = r.cpu_request_milli ? r.cpu_request_milli : r.cpu_limit_milli;
  if (weight_from) v.cpu_weight = std::to_string(milli_cpu_to_weight(*weight_from, f));
  v.cpu_max = cpu_max_value(r.cpu_limit_milli, systemd_rounding);
  v.memory_max = memory_max_value(r.memory_limit_bytes);
  return v;
}

Error shrink_refused(ShrinkRefusal r) {
  std::string msg = fmt::format(
      "'{}': memory limit ({}) below current usage ({}) (anon={} file={} shmem={}); "
      "leaving memory.max unchanged",
      r.id, r.target, r.usage, r.anon, r.file, r.shmem);
  return Error{EBUSY, std::move(msg), ErrorKind::ShrinkRefused, std::move(r)};
}

namespace {

constexpr std::string_view kClampMagic = "podshim-clamp v1";

// A journal file name for a cgroup path: FNV-1a, enough to keep distinct
// cgroups in distinct files (the path itself is inside the file).
std::string path_key(std::string_view relpath) {
  uint64_t h = 1469598103934665603ull;
  for (char c : relpath) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace

struct Engine::Impl {
  EngineOptions opts;
  UniqueFd root_fd;
  UniqueFd state_fd;
  std::mutex locks_mu;
  std::map<std::string, std::shared_ptr<std::mutex>> locks;
  std::mutex um_mu;
  std::shared_ptr<UnitManager> um;
  // TEST SEAM (tests/kernel/crash): pauses that hold a crash window open so
  // a test can kill -9 the process at a known point. Read once in create()
  // from PODSHIM_TEST_PAUSE_AFTER_CLAMP_MS (after memory.high is clamped and
  // the clamp journaled) and PODSHIM_TEST_PAUSE_AFTER_STEP_MS (after the
  // first step of a multi-step plan); zero, the default, means no pause.
  std::chrono::milliseconds test_pause_after_clamp{0}, test_pause_after_step{0};

  struct Bound {
    std::string id;
    CgroupLocation loc;
    CgroupDir dir;
    bool is_pod = false;
  };

  Result<UnitManager*> unit_manager() {
    std::lock_guard<std::mutex> l(um_mu);
    if (!um) um = opts.unit_manager ? opts.unit_manager : make_sdbus_unit_manager();
    return um.get();
  }

  Result<Bound> bind(const std::string& id, const std::string& path, bool is_pod) {
    auto loc = resolve_cgroup_path(path, opts.driver);
    if (!loc) return wrap(loc, fmt::format("'{}'", id));
    auto dir = CgroupDir::open(root_fd.get(), loc->relpath);
    if (!dir) return wrap(dir, fmt::format("'{}'", id));
    return Bound{id, std::move(*loc), std::move(*dir), is_pod};
  }

  // Writes attribute values through the driver: for systemd, the unit
  // properties first and then the files, as runc does, so a later
  // `systemctl daemon-reload` re-applies the new values instead of reverting
  // them (moby#41233, kubernetes#113857), and the files carry values systemd
  // cannot express (periods below its minimum, opencontainers/cgroups#4).
  Result<void> set_attrs(const Bound& t, const std::vector<std::pair<std::string, std::string>>& kv) {
    if (t.loc.driver == DriverKind::Systemd) {
      std::vector<UnitProperty> props;
      for (const auto& [file, value] : kv) {
        auto p = properties_for_attr(file, value);
        if (!p) return wrap(p, fmt::format("'{}'", t.id));
        props.insert(props.end(), p->begin(), p->end());
      }
      if (!props.empty()) {
        auto um = unit_manager();
        if (!um) return Unexpected(um.error());
        auto r = (*um)->set_unit_properties(t.loc.unit, props);
        if (!r) return wrap(r, fmt::format("'{}'", t.id));
      }
    }
    for (const auto& [file, value] : kv) PODSHIM_TRY(write_attr(t, file, value));
    return {};
  }

  Result<void> write_attr(const Bound& t, const std::string& file, const std::string& value) {
    if (opts.before_write) {
      auto h = opts.before_write(t.id, file, value);
      if (!h) return wrap(h, fmt::format("'{}' {}", t.id, file));
    }
    auto r = t.dir.write(file, value);
    if (!r) return wrap(r, fmt::format("'{}'", t.id));
    return {};
  }

  // ---- memory shrink without OOM kills (kubernetes#135670) ----

  Result<void> journal_clamp(const Bound& t, const std::string& prev_high) {
    std::string body = fmt::format("{}\n{}\n{}\n", kClampMagic, t.loc.relpath, prev_high);
    // Atomic (rename) but not fsynced: the journal must survive a podshimd
    // crash, which it does from the page cache; a node crash takes every
    // cgroup it describes with it, so an fsync would buy nothing but latency.
    auto r = fs::write_file_atomic_at(state_fd.get(), "clamp-" + path_key(t.loc.relpath), body, 0600,
                                      /*durable=*/false);
    if (!r) return wrap(r, "journaling memory.high clamp");
    return {};
  }
  void unjournal_clamp(const Bound& t) {
    std::string name = "clamp-" + path_key(t.loc.relpath);
    ::unlinkat(state_fd.get(), name.c_str(), 0);
  }

  Result<void> shrink_memory(const Bound& t, const std::string& new_max, ResizeReport* rep) {
    auto target_opt = parse_memory_max(new_max);
    if (!target_opt) return Unexpected(target_opt.error());
    if (!*target_opt) return set_attrs(t, {{"memory.max", new_max}});  // "max" is no shrink
    const uint64_t target = page_round_down(**target_opt);
    const uint64_t headroom = opts.shrink_headroom_bytes;
    auto usage = t.dir.read_u64("memory.current");
    if (!usage) return wrap(usage, fmt::format("'{}'", t.id));
    if (*usage + headroom <= target) return set_attrs(t, {{"memory.max", new_max}});

    auto stat = t.dir.read_keyed("memory.stat");
    if (!stat) return wrap(stat, fmt::format("'{}'", t.id));
    auto get = [&](std::string_view k) {
      auto it = stat->find(k);
      return it == stat->end() ? uint64_t{0} : it->second;
    };
    const uint64_t anon = get("anon"), file = get("file"), shmem = get("shmem");
    auto refuse = [&](uint64_t now) {
      return Unexpected(shrink_refused(ShrinkRefusal{t.id, target, now, anon, file, shmem}));
    };
    // Pre-check: without swap only page cache that is not shmem/tmpfs and
    // reclaimable slab can go; anon and shmem stay (facts §8: shmem made the
    // kernel OOM-kill and still left usage above the limit).
    uint64_t reclaimable = (file > shmem ? file - shmem : 0) + get("slab_reclaimable");
    uint64_t floor = *usage > reclaimable ? *usage - reclaimable : 0;
    if (floor + headroom > target) return refuse(*usage);

    // Clamp memory.high at the target so usage cannot grow back while we
    // reclaim; writing it below usage also makes the kernel reclaim, and
    // memory.high never invokes the OOM killer.
    auto prev_high = t.dir.read_trimmed("memory.high");
    if (!prev_high) return wrap(prev_high, fmt::format("'{}'", t.id));
    auto prev_high_v = parse_memory_max(*prev_high);
    if (!prev_high_v) return wrap(prev_high_v, fmt::format("'{}' memory.high", t.id));
    bool clamp_needed = !*prev_high_v || **prev_high_v > target;
    if (clamp_needed) {
      PODSHIM_TRY(journal_clamp(t, *prev_high));
      auto w = write_attr(t, "memory.high", std::to_string(target));
      if (!w) {
        unjournal_clamp(t);
        return w;
      }
      if (test_pause_after_clamp.count() > 0) std::this_thread::sleep_for(test_pause_after_clamp);  // test seam
    }
    auto restore_high = [&]() -> Result<void> {
      if (!clamp_needed) return {};
      auto r = write_attr(t, "memory.high", *prev_high);
      if (r) unjournal_clamp(t);  // on failure recover() retries from the journal
      return r;
    };

    const auto deadline = std::chrono::steady_clock::now() + opts.shrink_timeout;
    const bool has_reclaim = t.dir.has("memory.reclaim");  // Linux 5.19+
    uint64_t now = *usage;
    for (;;) {
      auto cur = t.dir.read_u64("memory.current");
      if (!cur) {
        (void)restore_high();
        return wrap(cur, fmt::format("'{}'", t.id));
      }
      now = *cur;
      if (now + headroom <= target) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        auto r = restore_high();
        auto e = refuse(now);
        if (!r) e.value().message += fmt::format("; restoring memory.high failed: {}", r.error().message);
        return e;
      }
      if (has_reclaim) {
        // EAGAIN means "could not reclaim all of it"; the re-check decides.
        (void)write_attr(t, "memory.reclaim", std::to_string(now + headroom - target));
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    auto w = set_attrs(t, {{"memory.max", new_max}});
    auto r = restore_high();
    if (!w) return w;
    if (!r) return wrap(r, "restoring memory.high after shrinking");
    if (rep && *usage > now) rep->bytes_reclaimed += *usage - now;
    return {};
  }

  // Applies one set of changes (before → after), counting in *applied the
  // changes whose write completed. A memory.max that goes down takes the
  // safe shrink path, also when rolling back an increase.
  Result<void> apply_changes(const Bound& t, const std::vector<AttrChange>& changes, ResizeReport* rep,
                             size_t* applied = nullptr) {
    size_t n = 0;
    std::vector<std::pair<std::string, std::string>> kv;
    auto flush = [&]() -> Result<void> {
      PODSHIM_TRY(set_attrs(t, kv));
      n += kv.size();
      kv.clear();
      return {};
    };
    Result<void> r;
    for (const auto& c : changes) {
      if (c.file == "memory.max") {
        auto a = parse_memory_max(c.after), b = parse_memory_max(c.before);
        bool shrinks = a && b && a->has_value() && (!b->has_value() || **a < **b);
        if (shrinks) {
          r = flush();
          if (!r) break;
          r = shrink_memory(t, c.after, rep);
          if (!r) break;
          ++n;
          continue;
        }
      }
      kv.emplace_back(c.file, c.after);
    }
    if (r) r = flush();
    if (applied) *applied = n;
    return r;
  }

  static std::vector<AttrChange> reversed(const std::vector<AttrChange>& changes) {
    std::vector<AttrChange> out;
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) out.push_back({it->file, it->after, it->before});
    return out;
  }

  // Per-cgroup locks held for one resize. Members are destroyed in reverse:
  // the locks are released before the references that keep the mutexes alive.
  struct Held {
    std::vector<std::shared_ptr<std::mutex>> refs;
    std::vector<std::unique_lock<std::mutex>> locks;
  };

  Held lock_all(std::vector<std::string> keys) {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    Held h;
    {
      std::lock_guard<std::mutex> g(locks_mu);
      for (auto it = locks.begin(); it != locks.end();)
        it = it->second.use_count() == 1 ? locks.erase(it) : std::next(it);
      for (const auto& k : keys) {
        auto& m = locks[k];
        if (!m) m = std::make_shared<std::mutex>();
        h.refs.push_back(m);
      }
    }
    // Sorted order: two resizes sharing cgroups cannot deadlock.
    for (auto& m : h.refs) h.locks.emplace_back(*m);
    return h;
  }

  Result<ResizeReport> resize(const PodResizeRequest& req) {
    std::vector<Bound> bound;
    std::vector<K8sResources> desired;
    if (req.pod) {
      auto b = bind(req.pod->id, req.pod->cgroup_path, true);
      if (!b) return Unexpected(b.error());
      bound.push_back(std::move(*b));
      desired.push_back(req.pod->desired);
    }
    for (const auto& c : req.containers) {
      auto b = bind(c.id, c.cgroup_path, false);
      if (!b) return Unexpected(b.error());
      bound.push_back(std::move(*b));
      desired.push_back(c.desired);
    }
    std::vector<std::string> keys;
    for (const auto& b : bound) keys.push_back(b.loc.relpath);
    auto held = lock_all(keys);

    // Read current values under the lock, so the plan reflects the kernel.
    std::vector<PlanTarget> targets;
    for (size_t i = 0; i < bound.size(); ++i) {
      const Bound& b = bound[i];
      PlanTarget pt;
      pt.id = b.id;
      pt.is_pod = b.is_pod;
      AttrValues want = attr_values(desired[i], b.is_pod ? opts.pod_formula : container_formula(),
                                    b.loc.driver == DriverKind::Systemd);
      auto rd = [&](const char* f, std::string* out) -> Result<void> {
        auto v = b.dir.read_trimmed(f);
        if (!v) return wrap(v, fmt::format("'{}'", b.id));
        *out = std::move(*v);
        return {};
      };
      if (want.cpu_weight) PODSHIM_TRY(rd("cpu.weight", &pt.cur_cpu_weight));
      PODSHIM_TRY(rd("cpu.max", &pt.cur_cpu_max));
      PODSHIM_TRY(rd("memory.max", &pt.cur_memory_max));
      pt.want_cpu_weight = want.cpu_weight;
      pt.want_cpu_max = want.cpu_max;
      pt.want_memory_max = want.memory_max;
      targets.push_back(std::move(pt));
    }
    std::vector<PlanStep> plan = plan_resize(targets);
    ResizeReport rep;
    if (plan.empty()) return rep;  // already applied: re-running is harmless

    // No plan journal: every step leaves the cgroups in a state the kubelet's
    // order makes safe (pod limits raised before container limits, lowered
    // after), so a podshimd crash between steps leaves a consistent, partly
    // applied resize that the retried request (the kubelet retries, the API
    // client sees its connection drop) completes. Only a memory.high clamp
    // is worth journaling: it is the one value no one else would undo.

    for (size_t i = 0; i < plan.size(); ++i) {
      const PlanStep& s = plan[i];
      const Bound& t = bound[s.target];
      size_t landed = 0;
      auto r = apply_changes(t, s.changes, &rep, &landed);
      if (!r) {
        // Roll back in reverse: what landed of the failed step first (a batch
        // of writes counts as landed only when all of it did), then every
        // applied step.
        std::string rollback_errors;
        for (size_t j = i + 1; j-- > 0;) {
          const Bound& u = bound[plan[j].target];
          std::vector<AttrChange> undo = plan[j].changes;
          if (j == i) undo.resize(landed);
          if (undo.empty()) continue;
          auto rb = apply_changes(u, reversed(undo), nullptr);
          if (!rb) rollback_errors += fmt::format("; rollback of '{}' failed: {}", u.id, rb.error().message);
        }
        Error e = r.error();
        e.message += rollback_errors;
        return Unexpected(std::move(e));
      }
      std::vector<StepReport> step_rep;
      for (const auto& c : s.changes) step_rep.push_back({t.id, c.file, c.before, c.after});
      rep.steps.insert(rep.steps.end(), step_rep.begin(), step_rep.end());
      if (opts.after_step) opts.after_step(step_rep);
      if (i == 0 && plan.size() > 1 && test_pause_after_step.count() > 0)
        std::this_thread::sleep_for(test_pause_after_step);  // test seam
    }
    return rep;
  }

  WeightFormula container_formula() const { return opts.formulas ? opts.formulas->formula() : opts.formula; }

  Result<Actual> read_actual(const std::string& path, WeightFormula f) {
    auto b = bind(path, path, false);
    if (!b) return Unexpected(b.error());
    const CgroupDir& d = b->dir;
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

  Result<std::vector<std::string>> list_state(std::string_view prefix) {
    int dfd = ::dup(state_fd.get());
    if (dfd < 0) return fail_errno("dup");
    DIR* dir = ::fdopendir(dfd);
    if (!dir) {
      ::close(dfd);
      return fail_errno("reading state directory '{}'", opts.state_dir);
    }
    ::rewinddir(dir);
    std::vector<std::string> out;
    while (dirent* e = ::readdir(dir)) {
      std::string n = e->d_name;
      if (str::starts_with(n, prefix)) out.push_back(n);
    }
    ::closedir(dir);
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<void> recover() {
    std::string errors;
    // 1. memory.high clamps left by a crash mid-shrink.
    auto clamps = list_state("clamp-");
    if (!clamps) return Unexpected(clamps.error());
    for (const auto& name : *clamps) {
      auto body = fs::read_file_at(state_fd.get(), name);
      auto lines = body ? str::split(*body, '\n') : std::vector<std::string_view>{};
      if (lines.size() < 3 || lines[0] != kClampMagic) {
        errors += fmt::format("; malformed clamp journal '{}'", name);
        ::unlinkat(state_fd.get(), name.c_str(), 0);
        continue;
      }
      std::string rel(lines[1]), high(lines[2]);
      if (!fs::check_relative(rel) || !parse_memory_max(high)) {
        errors += fmt::format("; invalid clamp journal '{}'", name);
        ::unlinkat(state_fd.get(), name.c_str(), 0);
        continue;
      }
      auto dir = CgroupDir::open(root_fd.get(), rel);
      if (!dir) {
        if (dir.error().code != ENOENT) {
          errors += "; " + dir.error().message;
          continue;
        }
      } else if (auto w = dir->write("memory.high", high); !w) {
        errors += "; " + w.error().message;
        continue;
      }
      ::unlinkat(state_fd.get(), name.c_str(), 0);
    }
    // 2. Plan journals written by podshim versions before the runtime became
    // the source of truth: nothing to replay (see resize()), so drop them.
    if (auto plans = list_state("plan-")) {
      for (const auto& name : *plans) ::unlinkat(state_fd.get(), name.c_str(), 0);
    }
    if (!errors.empty()) return fail(EIO, "recovering cgroup state{}", errors);
    return {};
  }
};


Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(EngineOptions opts) {
  auto impl = std::make_unique<Impl>();
  auto root = fs::open_dir(opts.cgroup_root);
  if (!root) return wrap(root, "cgroup root");
  impl->root_fd = std::move(*root);
  std::string journal_dir = opts.state_dir + "/cgroup";
  PODSHIM_TRY(fs::mkdir_p(journal_dir, 0700));
  auto st = fs::open_dir(journal_dir);
  if (!st) return wrap(st, "state directory");
  impl->state_fd = std::move(*st);
  if (opts.shrink_timeout.count() <= 0 || opts.shrink_timeout > std::chrono::milliseconds(1900))
    return fail(EINVAL, "shrink timeout {} ms must be in (0, 1900] to stay under NRI's 2 s",
                opts.shrink_timeout.count());
  impl->opts = std::move(opts);
  // Test seam (see Impl): unset or unparsable means no pause.
  auto test_ms = [](const char* name) {
    const char* v = std::getenv(name);
    if (!v) return std::chrono::milliseconds(0);
    auto n = str::parse_u64(v);
    return std::chrono::milliseconds(n ? static_cast<int64_t>(std::min<uint64_t>(*n, 600000)) : 0);
  };
  impl->test_pause_after_clamp = test_ms("PODSHIM_TEST_PAUSE_AFTER_CLAMP_MS");
  impl->test_pause_after_step = test_ms("PODSHIM_TEST_PAUSE_AFTER_STEP_MS");
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<ResizeReport> Engine::resize(const PodResizeRequest& req) { return impl_->resize(req); }
// Interim: the timer-driven shrink and ReclaimOnly land with the engine split
// (podshim issue 16); until then both run to completion in place.
void Engine::resize(const PodResizeRequest& req, Done done) { done(impl_->resize(req)); }
Result<void> Engine::release(const std::vector<std::string>& cgroup_paths) {
  (void)cgroup_paths;
  return {};
}
Result<Actual> Engine::read_actual(const std::string& p) { return impl_->read_actual(p, impl_->container_formula()); }
Result<Actual> Engine::read_actual(const std::string& p, WeightFormula f) { return impl_->read_actual(p, f); }
Result<void> Engine::recover() { return impl_->recover(); }

}  // namespace podshim::cgroup
