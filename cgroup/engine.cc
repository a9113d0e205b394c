#include "cgroup/engine.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/fs.h"
#include "base/str.h"
#include "cgroup/cgroup_dir.h"
#include "cgroup/clamp_journal.h"
#include "cgroup/driver.h"
#include "cgroup/plan.h"
#include "cgroup/read_back.h"
#include "cgroup/shrink.h"

namespace podshim::cgroup {

// The named view of the table's conversions (podshimctl cgroup-values).
AttrValues attr_values(const K8sResources& r, WeightFormula f, bool systemd_rounding) {
  const ConvertContext c{f, systemd_rounding};
  auto want = [&](std::string_view file) { return controller_for(file)->want(r, c); };
  AttrValues v;
  v.cpu_weight = want("cpu.weight");
  v.cpu_max = want("cpu.max").value_or("");
  v.memory_max = want("memory.max").value_or("");
  return v;
}

namespace {

// "50 MiB/s", "300 KiB/s": a rate for a message.
std::string rate_text(int64_t bytes_per_sec) {
  const double v = static_cast<double>(bytes_per_sec);
  if (std::abs(v) >= 1024.0 * 1024.0) return fmt::format("{:.1f} MiB/s", v / (1024.0 * 1024.0));
  return fmt::format("{:.0f} KiB/s", v / 1024.0);
}

}  // namespace

std::string_view shrink_why_name(ShrinkWhy w) {
  switch (w) {
    case ShrinkWhy::Usage: return "usage";
    case ShrinkWhy::Growth: return "growth";
    case ShrinkWhy::Pressure: return "pressure";
    case ShrinkWhy::Timeout: return "timeout";
  }
  return "usage";
}

Error shrink_refused(ShrinkRefusal r) {
  std::string msg;
  switch (r.why) {
    case ShrinkWhy::Usage:
      msg = fmt::format("'{}': memory limit ({}) below current usage ({}) (anon={} file={} shmem={}); "
                        "leaving memory.max unchanged",
                        r.id, r.target, r.usage, r.anon, r.file, r.shmem);
      break;
    case ShrinkWhy::Timeout:
      msg = fmt::format("'{}': memory limit ({}) below current usage ({}) (anon={} file={} shmem={}) "
                        "after reclaiming for {} ms; leaving memory.max unchanged",
                        r.id, r.target, r.usage, r.anon, r.file, r.shmem, r.elapsed.count());
      // Reclaim skips dirty page cache until the flusher has written it
      // (mm/vmscan.c wakes it and moves on), so a large dirty share is the
      // likely reason, and the same shrink can pass once it is clean.
      if (r.dirty > 0)
        msg += fmt::format(" ({} of the page cache was dirty or under writeback: reclaimable only once written "
                           "back, so a later retry may pass)",
                           r.dirty);
      break;
    case ShrinkWhy::Growth:
      msg = fmt::format("'{}': memory limit ({}) refused: usage grows {} (usage {}, anon={} shmem={}) "
                        "and would reach the limit within {} ms; leaving memory.max unchanged",
                        r.id, r.target, rate_text(r.growth_bytes_per_sec), r.usage, r.anon, r.shmem,
                        r.growth_window.count());
      break;
    case ShrinkWhy::Pressure:
      msg = fmt::format("'{}': memory limit ({}) refused: memory pressure some {:.1f}% full {:.1f}% "
                        "under the memory.high clamp (threshold {:.1f}%; avg10 some {:.2f} full {:.2f}; "
                        "usage {}); memory.high restored, memory.max unchanged",
                        r.id, r.target, r.psi_some_window, r.psi_full_window, r.pressure_threshold,
                        r.psi_some_avg10, r.psi_full_avg10, r.usage);
      break;
  }
  return Error{EBUSY, std::move(msg), ErrorKind::ShrinkRefused, std::move(r)};
}


struct Engine::Impl {
  EngineOptions opts;
  UniqueFd root_fd;
  bool cgroupfs = false;  // root_fd is on cgroup2: attribute writes need no truncation (CgroupDir::open)
  UniqueFd state_fd;
  ClampJournal clamps;  // on state_fd; copies share its file and view
  std::mutex locks_mu;
  std::mutex um_mu;
  std::shared_ptr<UnitManager> um;

  struct Bound {
    std::string id;
    CgroupLocation loc;
    CgroupDir dir;
    bool is_pod = false;
  };

  Result<UnitManager*> unit_manager() {
    std::lock_guard<std::mutex> l(um_mu);
    if (!um) {
      SdBusOptions so;
      so.call_timeout = opts.unit_call_timeout;
      so.event = opts.schedule ? opts.event : nullptr;
      um = opts.unit_manager ? opts.unit_manager : make_sdbus_unit_manager(std::move(so));
    }
    return um.get();
  }

  Result<Bound> bind(const std::string& id, const std::string& path, bool is_pod) {
    auto loc = resolve_cgroup_path(path, opts.driver);
    if (!loc) return wrap(loc, fmt::format("'{}'", id));
    auto dir = CgroupDir::open(root_fd.get(), loc->relpath, cgroupfs);
    if (!dir) return wrap(dir, fmt::format("'{}'", id));
    return Bound{id, std::move(*loc), std::move(*dir), is_pod};
  }

  // Writes attribute values through the cgroup's driver (cgroup/driver.h).
  std::unique_ptr<Driver> cgroupfs_driver = make_cgroupfs_driver();
  std::unique_ptr<Driver> systemd_driver = make_systemd_driver([this] { return unit_manager(); });
  Driver& driver_for(const Bound& t) {
    return t.loc.driver == DriverKind::Systemd ? *systemd_driver : *cgroupfs_driver;
  }
  Result<void> set_attrs(const Bound& t, const AttrValuesList& kv) {
    return driver_for(t).set(t.id, t.loc, kv, [&](const std::string& file, const std::string& value) {
      return write_attr(t, file, value);
    });
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

  ClampJournal journal() const { return clamps; }
  Result<void> journal_clamp(const Bound& t, const std::string& prev_high) {
    return journal().record(t.loc.relpath, prev_high);
  }
  void unjournal_clamp(const Bound& t) { journal().drop(t.loc.relpath); }

  // ---- the operation: one resize as a state machine on `sched` ----
  //
  // Every wait (reclaim ticks, settle watches, test pauses, waiting for a
  // cgroup another resize holds) is a callback handed to `sched`: the loop's
  // timer (opts.schedule) for asynchronous resizes, the in-place waiter of
  // the calling thread for blocking ones. Nothing below sleeps.

  using Clock = std::chrono::steady_clock;
  using ms = std::chrono::milliseconds;
  using Sched = std::function<void(ms, std::function<void()>)>;
  using Cb = std::function<void(Result<void>)>;

  struct Op {
    Sched sched;
    bool async = false;  // on the loop: driver calls (systemd's reply) wait on it too
    PodResizeRequest req;
    Done done;
    std::vector<Bound> bound;
    std::vector<K8sResources> desired;
    std::vector<std::string> keys;
    std::vector<PlanStep> plan;
    ResizeReport rep;
    std::map<std::string, MemoryEvents> ev_before;  // by target id
    Clock::time_point t0;
    // ReclaimOnly: the clamps this op put on (relpath), undone on failure.
    std::vector<std::string> clamped;
    uint64_t seq = 0;  // arrival order, for the per-cgroup queues
    // What start_op read of each bound cgroup (index as `bound`), so that
    // the read-back after the op opens only the files it wrote.
    std::vector<PlanTarget> targets;
  };
  using OpPtr = std::shared_ptr<Op>;

  // Sets attributes for `op`: an asynchronous op waits for the driver
  // (systemd's reply) on the loop, a blocking one in place. `t` lives in
  // op->bound, kept alive by the callbacks; `alive` guards the engine.
  void set_attrs(const OpPtr& op, const Bound& t, AttrValuesList kv, Cb cb) {
    if (!op->async) return cb(set_attrs(t, kv));
    std::weak_ptr<bool> a = alive;
    auto write = [this, a, op, &t](const std::string& file, const std::string& value) -> Result<void> {
      if (!a.lock()) return fail(ECANCELED, "'{}': the cgroup engine was destroyed", t.id);
      return write_attr(t, file, value);
    };
    driver_for(t).set_async(t.id, t.loc, kv, std::move(write), [a, cb = std::move(cb)](Result<void> r) {
      if (a.lock()) cb(std::move(r));
    });
  }

  // Per-cgroup serialisation: a cgroup (relpath) is busy while one op holds
  // it; ops that want a busy cgroup queue in arrival order. An op starts
  // only when all its cgroups are free and no earlier waiter wants one of
  // them, so each cgroup's resizes run in the order they arrived.
  //
  // The waiters queue per cgroup: "no earlier waiter wants one of them" is
  // "first in each of its cgroups' queues". A release looks only at the
  // first waiter of each cgroup it frees; scanning every waiter (and
  // copying their keys into a set) on each acquire and release cost a
  // seventh of the loop's time with a few hundred resizes queued behind
  // settling shrinks.
  std::unordered_set<std::string> busy;
  std::unordered_map<std::string, std::deque<OpPtr>> queues;
  uint64_t next_seq = 0;

  void acquire(const OpPtr& op) {
    std::vector<OpPtr> start;
    {
      std::lock_guard<std::mutex> g(locks_mu);
      op->seq = next_seq++;
      for (const auto& k : op->keys) queues[k].push_back(op);
      start = grant_locked({op});
    }
    // An op whose cgroups are free starts at once, so a resize with nothing
    // to wait for (no shrink) completes before resize() returns; only waits
    // go through the scheduler.
    for (auto& o : start) {
      if (o == op)
        start_op(o);
      else
        o->sched(ms(0), [this, o] { start_op(o); });
    }
  }
  void release_keys(const OpPtr& op) {
    std::vector<OpPtr> start;
    {
      std::lock_guard<std::mutex> g(locks_mu);
      std::vector<OpPtr> next;
      for (const auto& k : op->keys) {
        busy.erase(k);
        if (auto q = queues.find(k); q != queues.end()) next.push_back(q->second.front());
      }
      start = grant_locked(std::move(next));
    }
    for (auto& o : start) o->sched(ms(0), [this, o] { start_op(o); });
  }
  bool startable_locked(const Op& op) const {
    for (const auto& k : op.keys) {
      if (busy.count(k)) return false;
      auto q = queues.find(k);
      if (q == queues.end() || q->second.front().get() != &op) return false;
    }
    return true;
  }
  // Of `candidates`, the ops that may start now, taken in arrival order
  // (their cgroups marked busy, their queue places given up).
  std::vector<OpPtr> grant_locked(std::vector<OpPtr> candidates) {
    std::sort(candidates.begin(), candidates.end(), [](const OpPtr& a, const OpPtr& b) { return a->seq < b->seq; });
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    std::vector<OpPtr> out;
    for (auto& c : candidates) {
      if (!startable_locked(*c)) continue;
      for (const auto& k : c->keys) {
        auto q = queues.find(k);
        q->second.pop_front();
        if (q->second.empty()) queues.erase(q);
        busy.insert(k);
      }
      out.push_back(std::move(c));
    }
    return out;
  }

  void submit(OpPtr op) {
    op->t0 = Clock::now();
    auto fail_now = [&](Error e) {
      op->sched(ms(0), [op, e = std::move(e)]() mutable { op->done(Unexpected(std::move(e))); });
    };
    if (op->req.pod) {
      auto b = bind(op->req.pod->id, op->req.pod->cgroup_path, true);
      if (!b) return fail_now(b.error());
      op->bound.push_back(std::move(*b));
      op->desired.push_back(op->req.pod->desired);
    }
    for (const auto& c : op->req.containers) {
      auto b = bind(c.id, c.cgroup_path, false);
      if (!b) return fail_now(b.error());
      op->bound.push_back(std::move(*b));
      op->desired.push_back(c.desired);
    }
    for (const auto& b : op->bound) op->keys.push_back(b.loc.relpath);
    std::sort(op->keys.begin(), op->keys.end());
    op->keys.erase(std::unique(op->keys.begin(), op->keys.end()), op->keys.end());
    acquire(op);
  }

  // Whether a step of op's plan writes `file` of bound cgroup `target`.
  static bool written(const Op& op, size_t target, std::string_view file) {
    for (const PlanStep& s : op.plan)
      if (s.target == target)
        for (const AttrChange& c : s.changes)
          if (c.file == file) return true;
    return false;
  }

  static bool shrinks(const Op& op) {
    for (const PlanStep& s : op.plan)
      if (std::any_of(s.changes.begin(), s.changes.end(), lowers_memory)) return true;
    return false;
  }

  void finish(const OpPtr& op, Result<void> r) {
    if (r) {
      // memory.events deltas over the op and its settle periods.
      const bool settled = shrinks(*op);
      for (size_t bi = 0; bi < op->bound.size(); ++bi) {
        const Bound& b = op->bound[bi];
        std::optional<MemoryEvents> now;
        if (op->req.mode == WriteMode::All) {
          // One read-back gives the caller the values written and these
          // counters (ReclaimOnly: the runtime has not written yet). A file
          // the op did not write is not read again when the op did not wait
          // (no shrink settled): start_op read it moments ago, under this
          // same turn of the cgroup.
          std::vector<KnownAttr> known;
          if (bi < op->targets.size() && !settled)
            for (const PlanAttr& pa : op->targets[bi].attrs)
              if (!written(*op, bi, pa.row->file)) known.push_back({pa.row->file, pa.cur});
          const WeightFormula f = b.is_pod ? opts.pod_formula : container_formula();
          if (auto a = read_back(b.dir, f, /*with_stat=*/false, known)) {
            now = MemoryEvents{a->oom, a->oom_kill, a->events_high, a->events_max};
            op->rep.after[b.id] = std::move(*a);
          }
        }
        auto before = op->ev_before.find(b.id);
        if (before == op->ev_before.end()) continue;
        if (!now)
          if (auto ev = read_memory_events(b.dir)) now = *ev;
        if (!now) continue;
        auto d = [](uint64_t a, uint64_t z) { return a > z ? a - z : uint64_t{0}; };
        op->rep.events[b.id] = MemoryEvents{d(now->oom, before->second.oom), d(now->oom_kill, before->second.oom_kill),
                                            d(now->high, before->second.high), d(now->max, before->second.max)};
      }
    }
    op->rep.duration = std::chrono::duration_cast<ms>(Clock::now() - op->t0);
    release_keys(op);
    if (r) op->done(std::move(op->rep));
    else op->done(Unexpected(std::move(r.error())));
  }


  void start_op(const OpPtr& op) {
    // Read current values under the cgroup's turn, so the plan reflects the kernel.
    std::vector<PlanTarget> targets;
    for (size_t i = 0; i < op->bound.size(); ++i) {
      const Bound& b = op->bound[i];
      PlanTarget pt;
      pt.id = b.id;
      pt.is_pod = b.is_pod;
      const ConvertContext cc{b.is_pod ? opts.pod_formula : container_formula(),
                              b.loc.driver == DriverKind::Systemd};
      // Every attribute the table converts and the spec sets, with what the kernel holds now.
      for (const Controller& row : controllers()) {
        if (!row.want) continue;
        auto want = row.want(op->desired[i], cc);
        if (!want) continue;
        // Kept open for writing too: the plan's writes to it, and the
        // read-back after them, go through this fd (CgroupDir::Keep).
        auto cur = b.dir.read_trimmed(row.file, CgroupDir::Keep::ReadWrite);
        if (!cur) return finish(op, wrap(cur, fmt::format("'{}'", b.id)));
        pt.attrs.push_back(PlanAttr{&row, std::move(*cur), std::move(*want)});
      }
      targets.push_back(std::move(pt));
      if (auto ev = read_memory_events(b.dir)) op->ev_before[b.id] = *ev;
    }
    op->plan = plan_resize(targets);
    op->targets = std::move(targets);
    if (op->plan.empty()) return finish(op, {});  // already applied: re-running is harmless

    // No plan journal: every step leaves the cgroups in a state the kubelet's
    // order makes safe (pod limits raised before container limits, lowered
    // after), so a podshimd crash between steps leaves a consistent, partly
    // applied resize that the retried request (the kubelet retries, the API
    // client sees its connection drop) completes. Only a memory.high clamp
    // is worth journaling: it is the one value no one else would undo.
    if (op->req.mode == WriteMode::ReclaimOnly) return reclaim_only(op, 0, 0);
    run_step(op, 0);
  }

  void run_step(const OpPtr& op, size_t i) {
    if (i == op->plan.size()) return finish(op, {});
    const PlanStep& s = op->plan[i];
    const Bound& t = op->bound[s.target];
    auto landed = std::make_shared<size_t>(0);
    apply_changes(op, t, s.changes, &op->rep, landed, [this, op, i, landed](Result<void> r) {
      if (!r) return rollback(op, i, *landed, std::move(r.error()), "");
      const PlanStep& s = op->plan[i];
      std::vector<StepReport> step_rep;
      for (const auto& c : s.changes) step_rep.push_back({op->bound[s.target].id, c.file, c.before, c.after});
      op->rep.steps.insert(op->rep.steps.end(), step_rep.begin(), step_rep.end());
      if (opts.after_step) opts.after_step(step_rep);
      if (i == 0 && op->plan.size() > 1 && opts.test_pause_after_step.count() > 0)
        return op->sched(opts.test_pause_after_step, [this, op, i] { run_step(op, i + 1); });  // test seam
      run_step(op, i + 1);
    });
  }

  // Rolls back in reverse: what landed of the failed step first (a batch of
  // writes counts as landed only when all of it did), then every applied step.
  void rollback(const OpPtr& op, size_t j, size_t landed_of_failed, Error err, std::string errors) {
    std::vector<AttrChange> undo = op->plan[j].changes;
    if (landed_of_failed != SIZE_MAX) undo.resize(landed_of_failed);
    auto next = [this, op, j](Error err, std::string errors) {
      if (j == 0) {
        err.message += errors;
        return finish(op, Unexpected(std::move(err)));
      }
      rollback(op, j - 1, SIZE_MAX, std::move(err), std::move(errors));
    };
    if (undo.empty()) return next(std::move(err), std::move(errors));
    const Bound& u = op->bound[op->plan[j].target];
    auto landed = std::make_shared<size_t>(0);
    apply_changes(op, u, reversed(undo), nullptr, landed,
                  [op, j, next, err = std::move(err), errors = std::move(errors)](Result<void> rb) mutable {
                    if (!rb)
                      errors += fmt::format("; rollback of '{}' failed: {}", op->bound[op->plan[j].target].id,
                                            rb.error().message);
                    next(std::move(err), std::move(errors));
                  });
  }

  // Applies one set of changes (before → after), counting in *landed the
  // changes whose write completed. An attribute whose row lowers it with
  // Lowering::Shrink (memory.max) takes the safe shrink path when it goes
  // down, also when rolling back an increase.
  static bool lowers_memory(const AttrChange& c) {
    const Controller* row = controller_for(c.file);
    if (!row || row->lowering != Lowering::Shrink) return false;
    auto a = parse_memory_max(c.after), b = parse_memory_max(c.before);
    return a && b && a->has_value() && (!b->has_value() || **a < **b);
  }
  void apply_changes(const OpPtr& op, const Bound& t, std::vector<AttrChange> changes, ResizeReport* rep,
                     std::shared_ptr<size_t> landed, Cb cb, size_t from = 0) {
    std::vector<std::pair<std::string, std::string>> kv;
    size_t i = from;
    for (; i < changes.size() && !lowers_memory(changes[i]); ++i) kv.emplace_back(changes[i].file, changes[i].after);
    if (!kv.empty()) {
      const size_t n = kv.size();
      return set_attrs(op, t, std::move(kv),
                       [this, op, &t, changes = std::move(changes), rep, landed, cb, i, n](Result<void> r) mutable {
                         if (!r) return cb(std::move(r));
                         *landed += n;
                         if (i == changes.size()) return cb({});
                         shrink_at(op, t, std::move(changes), rep, landed, std::move(cb), i);
                       });
    }
    if (i == changes.size()) return cb({});
    shrink_at(op, t, std::move(changes), rep, landed, std::move(cb), i);
  }
  // changes[i] lowers memory.max: the shrink, then the rest of `changes`.
  void shrink_at(const OpPtr& op, const Bound& t, std::vector<AttrChange> changes, ResizeReport* rep,
                 std::shared_ptr<size_t> landed, Cb cb, size_t i) {
    std::string after = changes[i].after;
    shrink(op, t, after, rep, /*reclaim_only=*/false,
           [this, op, &t, changes = std::move(changes), rep, landed, cb, i](Result<void> r) mutable {
             if (!r) return cb(std::move(r));
             ++*landed;
             apply_changes(op, t, std::move(changes), rep, landed, std::move(cb), i + 1);
           });
  }

  static std::vector<AttrChange> reversed(const std::vector<AttrChange>& changes) {
    std::vector<AttrChange> out;
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) out.push_back({it->file, it->after, it->before});
    return out;
  }

  // ReclaimOnly: make room for each memory.max the plan lowers, in the
  // plan's order, and write nothing else.
  void reclaim_only(const OpPtr& op, size_t step, size_t change) {
    for (; step < op->plan.size(); ++step, change = 0) {
      const PlanStep& s = op->plan[step];
      for (; change < s.changes.size(); ++change) {
        if (!lowers_memory(s.changes[change])) continue;
        const Bound& t = op->bound[s.target];
        return shrink(op, t, s.changes[change].after, &op->rep, /*reclaim_only=*/true,
                      [this, op, step, change](Result<void> r) {
                        if (!r) {
                          // Undo the clamps this op put on before it failed.
                          std::string errors;
                          for (const auto& rel : op->clamped)
                            if (auto u = unclamp(rel); !u) errors += "; " + u.error().message;
                          Error e = r.error();
                          e.message += errors;
                          return finish(op, Unexpected(std::move(e)));
                        }
                        reclaim_only(op, step, change + 1);
                      });
      }
    }
    finish(op, {});
  }

  // A lowered memory.max: the shrink (cgroup/shrink.cc) on this op's sched.
  HeldClamps held;
  void shrink(const OpPtr& op, const Bound& t, const std::string& new_max, ResizeReport* rep, bool reclaim_only,
              Cb cb) {
    ShrinkContext ctx;
    ctx.opts = &opts;
    ctx.sched = op->sched;
    ctx.write = [this, &t](const std::string& file, const std::string& value) { return write_attr(t, file, value); };
    ctx.write_max = [this, op, &t](const std::string& value, Cb cb) {
      set_attrs(op, t, {{"memory.max", value}}, std::move(cb));
    };
    ctx.journal = journal();
    ctx.held = &held;
    ctx.root_fd = root_fd.get();
    ctx.rep = rep;
    ctx.reclaim_only = reclaim_only;
    ctx.clamped = &op->clamped;
    ctx.keepalive = op;
    shrink_memory(std::move(ctx), ShrinkCgroup{t.id, t.loc.relpath, &t.dir}, new_max, std::move(cb));
  }

  // Restores the memory.high a ReclaimOnly resize clamped on `relpath`.
  Result<void> unclamp(const std::string& relpath) {
    auto h = held.get(relpath);
    if (!h) return {};
    if (h->dir) {
      if (opts.before_write) {
        // The seam sees the restore as it sees every write (ids are not kept
        // with the clamp: the relpath stands in).
        auto b = opts.before_write(relpath, "memory.high", h->prev_high);
        if (!b) return wrap(b, fmt::format("'{}' memory.high", relpath));
      }
      auto w = h->dir->write("memory.high", h->prev_high);
      if (!w) return wrap(w, fmt::format("restoring memory.high of '{}'", relpath));
    }
    journal().drop(relpath);
    held.erase(relpath);
    return {};
  }

  Result<void> release(const std::vector<std::string>& paths) {
    std::string errors;
    for (const auto& p : paths) {
      auto loc = resolve_cgroup_path(p, opts.driver);
      if (!loc) {
        errors += fmt::format("; '{}': {}", p, loc.error().message);
        continue;
      }
      if (auto u = unclamp(loc->relpath); !u) errors += "; " + u.error().message;
    }
    if (!errors.empty()) return fail(EIO, "releasing memory.high clamps{}", errors);
    return {};
  }

  // The in-place waiter of a blocking resize: runs the op's callbacks on
  // the calling thread, sleeping until each one is due.
  struct InPlace {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::pair<Clock::time_point, std::function<void()>>> q;
    bool finished = false;
    void after(ms d, std::function<void()> fn) {
      std::lock_guard<std::mutex> l(mu);
      q.emplace_back(Clock::now() + d, std::move(fn));
      cv.notify_one();
    }
    // False when `deadline` passed first: the callbacks still queued are
    // dropped (they hold the op, which holds this waiter).
    bool run(Clock::time_point deadline) {
      std::unique_lock<std::mutex> l(mu);
      while (!finished) {
        if (Clock::now() >= deadline) {
          auto dropped = std::move(q);
          q.clear();
          l.unlock();
          return false;  // `dropped` goes here, outside the lock
        }
        if (q.empty()) {
          cv.wait_until(l, deadline);
          continue;
        }
        auto it = std::min_element(q.begin(), q.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        if (it->first > Clock::now()) {
          cv.wait_until(l, std::min(it->first, deadline));
          continue;
        }
        auto fn = std::move(it->second);
        q.erase(it);
        l.unlock();
        fn();
        l.lock();
      }
      return true;
    }
  };

  // How long a blocking resize may take before it gives up waiting: each
  // target's whole shrink budget and a few systemd calls, and 10 s of slack
  // for a loaded node. An op that passes it has a bug or a hung dependency;
  // a caller such as podshimctl must get an error, not hang.
  ms blocking_deadline(const PodResizeRequest& req) const {
    if (opts.blocking_deadline.count() > 0) return opts.blocking_deadline;
    const auto targets = static_cast<int64_t>(req.containers.size() + (req.pod ? 1 : 0));
    return (targets + 1) * (opts.shrink_timeout + 4 * opts.unit_call_timeout) + std::chrono::seconds(10);
  }

  Result<ResizeReport> resize_blocking(const PodResizeRequest& req) {
    auto w = std::make_shared<InPlace>();
    auto op = std::make_shared<Op>();
    op->sched = [w](ms d, std::function<void()> fn) { w->after(d, std::move(fn)); };
    op->req = req;
    auto out = std::make_shared<std::optional<Result<ResizeReport>>>();
    op->done = [w, out](Result<ResizeReport> r) {
      *out = std::move(r);
      std::lock_guard<std::mutex> l(w->mu);
      w->finished = true;
    };
    const ms limit = blocking_deadline(req);
    submit(op);
    if (!w->run(Clock::now() + limit))
      return Unexpected(Error(ETIMEDOUT,
                              fmt::format("the resize did not finish within {} ms (a memory.high clamp it left stays in "
                                          "the clamp journal, which podshimd restores when it starts)",
                                          limit.count()),
                              ErrorKind::Timeout));
    return std::move(**out);
  }

  // Guards the loop's callbacks against an engine destroyed before they run.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

  void resize_async(const PodResizeRequest& req, Done done) {
    auto op = std::make_shared<Op>();
    std::weak_ptr<bool> a = alive;
    auto sched = opts.schedule;
    op->sched = [a, sched](ms d, std::function<void()> fn) {
      sched(d, [a, fn = std::move(fn)] {
        if (a.lock()) fn();
      });
    };
    op->async = true;
    op->req = req;
    op->done = std::move(done);
    submit(op);
  }

  WeightFormula container_formula() const { return opts.formulas ? opts.formulas->formula() : opts.formula; }

  Result<Actual> read_actual(const std::string& path, WeightFormula f, bool with_stat = true) {
    auto b = bind(path, path, false);
    if (!b) return Unexpected(b.error());
    return read_back(b->dir, f, with_stat);
  }

  Result<MemoryMax> read_memory_max(const std::string& path) {
    auto loc = resolve_cgroup_path(path, opts.driver);
    if (!loc) return wrap(loc, fmt::format("'{}'", path));
    const std::string rel = loc->relpath.empty() ? std::string("memory.max") : loc->relpath + "/memory.max";
    const int fd = fs::open_beneath_errno(root_fd.get(), rel, O_RDONLY);
    // Not made yet, or removed (ENODEV: the kernel's answer on a removed
    // cgroup's open files).
    if (fd == -ENOENT || fd == -ENODEV) return MemoryMax{};
    if (fd < 0) {
      errno = -fd;
      return fail_errno("opening '{}'", rel);
    }
    UniqueFd f(fd);
    char buf[64];
    ssize_t n;
    do n = ::read(fd, buf, sizeof buf); while (n < 0 && errno == EINTR);
    if (n < 0 && errno == ENODEV) return MemoryMax{};
    if (n < 0) return fail_errno("reading '{}'", rel);
    auto v = parse_memory_max(str::trim(std::string_view(buf, static_cast<size_t>(n))));
    if (!v) return wrap(v, fmt::format("'{}'", rel));
    return MemoryMax{true, *v};
  }

  Result<void> recover() { return journal().recover(root_fd.get()); }
};


Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(EngineOptions opts) {
  auto impl = std::make_unique<Impl>();
  auto root = fs::open_dir(opts.cgroup_root);
  if (!root) return wrap(root, "cgroup root");
  impl->root_fd = std::move(*root);
  impl->cgroupfs = CgroupDir::is_cgroupfs(impl->root_fd.get());
  std::string journal_dir = opts.state_dir + "/cgroup";
  PODSHIM_TRY(fs::mkdir_p(journal_dir, 0700));
  auto st = fs::open_dir(journal_dir);
  if (!st) return wrap(st, "state directory");
  impl->state_fd = std::move(*st);
  impl->clamps = ClampJournal(impl->state_fd.get());
  if (opts.shrink_timeout.count() <= 0 || opts.shrink_timeout > std::chrono::milliseconds(1900))
    return fail(EINVAL, "shrink timeout {} ms must be in (0, 1900] to stay under NRI's 2 s",
                opts.shrink_timeout.count());
  if (opts.settle.count() < 0 || opts.settle > std::chrono::milliseconds(1900))
    return fail(EINVAL, "settle {} ms must be in [0, 1900]", opts.settle.count());
  if (opts.shrink_tick.count() <= 0) return fail(EINVAL, "shrink tick {} ms must be positive", opts.shrink_tick.count());
  if (!(opts.shrink_pressure_threshold >= 0 && opts.shrink_pressure_threshold <= 100))
    return fail(EINVAL, "shrink pressure threshold {} must be a percentage in [0, 100]",
                opts.shrink_pressure_threshold);
  if (opts.shrink_growth_window.count() < 0)
    return fail(EINVAL, "shrink growth window {} ms must not be negative", opts.shrink_growth_window.count());
  // A node fact read once: only CPU hotplug changes it, by one CPU's pages.
  if (!opts.memory_stat_lag_bytes) opts.memory_stat_lag_bytes = memory_stat_lag_bytes();
  impl->opts = std::move(opts);
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<ResizeReport> Engine::resize(const PodResizeRequest& req) { return impl_->resize_blocking(req); }
void Engine::resize(const PodResizeRequest& req, Done done) {
  if (!impl_->opts.schedule) return done(impl_->resize_blocking(req));
  impl_->resize_async(req, std::move(done));
}
Result<void> Engine::release(const std::vector<std::string>& cgroup_paths) { return impl_->release(cgroup_paths); }
Result<Actual> Engine::read_actual(const std::string& p) { return impl_->read_actual(p, impl_->container_formula()); }
Result<MemoryMax> Engine::read_memory_max(const std::string& p) { return impl_->read_memory_max(p); }
Result<Actual> Engine::read_limits(const std::string& p) {
  return impl_->read_actual(p, impl_->container_formula(), /*with_stat=*/false);
}
Result<void> Engine::recover() { return impl_->recover(); }

}  // namespace podshim::cgroup
