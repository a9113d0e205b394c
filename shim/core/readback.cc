#include "shim/core/readback.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "base/fs.h"
#include "base/str.h"
#include "cgroup/path.h"
#include "cgroup/plan.h"
#include "cgroup/read_back.h"
#include "shim/core/oom_kills.h"

namespace podshim::core {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The attribute files one read-back takes; memory.stat is left out on
// purpose (see the header).
enum FileIdx : size_t { kWeight, kCpuMax, kMemMax, kMemCurrent, kMemEvents, kNumFiles };
constexpr std::array<const char*, kNumFiles> kFiles = {"cpu.weight", "cpu.max", "memory.max", "memory.current",
                                                      "memory.events"};

// A periodic read stores the container again only when something podshim
// reports changed; usage alone must move by both of these, so a node of idle
// containers does not turn every pass into thousands of watch events.
constexpr uint64_t kUsageStepBytes = 1 << 20;
constexpr uint64_t kUsageStepDivisor = 10;

struct Fds {
  std::array<UniqueFd, kNumFiles> files;  // invalid: the file does not exist (controller off)
  std::vector<UniqueFd> more;             // cgroup::registered_resources()' files, in table order
};

// The text of each attribute, nullopt where the file does not exist.
struct Raw {
  std::array<std::optional<std::string>, kNumFiles> files;
  std::vector<std::optional<std::string>> more;  // as Fds::more
  std::optional<std::string>& operator[](size_t i) { return files[i]; }
  const std::optional<std::string>& operator[](size_t i) const { return files[i]; }
};

bool gone_errno(int e) { return e == ENOENT || e == ENODEV || e == ESTALE; }

// cgroup v2 attributes are seq_files: a pread at offset 0 regenerates the
// content (fs/seq_file.c seq_read_iter restarts when the position differs
// from the last read's), so a kept fd reads current values.
Result<void> read_file(const UniqueFd& fd, std::string_view name, std::optional<std::string>& out) {
  if (!fd) return {};
  char buf[4096];
  ssize_t n = ::pread(fd.get(), buf, sizeof buf, 0);
  if (n < 0) return fail_errno("reading {}", name);
  if (static_cast<size_t>(n) == sizeof buf) return fail(EFBIG, "{} is larger than {} bytes", name, sizeof buf);
  out = std::string(str::trim(std::string_view(buf, static_cast<size_t>(n))));
  return {};
}

Result<Raw> read_files(const Fds& f) {
  Raw raw;
  for (size_t i = 0; i < kNumFiles; ++i) PODSHIM_TRY(read_file(f.files[i], kFiles[i], raw[i]));
  const auto rows = cgroup::registered_resources();
  raw.more.resize(f.more.size());
  for (size_t i = 0; i < f.more.size(); ++i) PODSHIM_TRY(read_file(f.more[i], rows[i].file, raw.more[i]));
  return raw;
}

// An attribute file beneath `dir`; an invalid fd where it does not exist
// (that controller is not enabled here).
Result<UniqueFd> open_file(int dir, const char* name) {
  int fd = ::openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno != ENOENT) return fail_errno("opening {}", name);
  return UniqueFd(fd < 0 ? -1 : fd);
}

// Opens the attribute files beneath the cgroup directory `dir`.
Result<Fds> open_files(int dir) {
  Fds f;
  for (size_t i = 0; i < kNumFiles; ++i) {
    auto fd = open_file(dir, kFiles[i]);
    if (!fd) return Unexpected(fd.error());
    f.files[i] = std::move(*fd);
  }
  for (const cgroup::Controller& row : cgroup::registered_resources()) {
    auto fd = open_file(dir, std::string(row.file).c_str());
    if (!fd) return Unexpected(fd.error());
    f.more.push_back(std::move(*fd));
  }
  if (!f.files[kWeight] && !f.files[kCpuMax] && !f.files[kMemMax] && !f.files[kMemCurrent])
    return fail(ENOENT, "the cgroup has neither cpu nor memory attributes (removed?)");
  return f;
}

// The texts read_files() took, as cgroup::read_back's source: one parse of
// a cgroup's values, the engine's as well as this loop's.
class RawSource final : public cgroup::AttrSource {
 public:
  explicit RawSource(const Raw& raw) : raw_(raw) {}
  Result<std::optional<std::string_view>> text(std::string_view file) override {
    for (size_t i = 0; i < kNumFiles; ++i)
      if (file == kFiles[i]) return view(raw_[i]);
    const auto rows = cgroup::registered_resources();
    for (size_t i = 0; i < raw_.more.size(); ++i)
      if (rows[i].file == file) return view(raw_.more[i]);
    return std::optional<std::string_view>();  // memory.stat: not taken (see the header)
  }

 private:
  static std::optional<std::string_view> view(const std::optional<std::string>& s) {
    return s ? std::optional<std::string_view>(*s) : std::nullopt;
  }
  const Raw& raw_;
};

// What the kernel holds: the values read back, and each file's text (what
// a drift reports).
struct Kernel {
  cgroup::Actual a;
  Raw raw;
};

Result<Kernel> parse(Raw raw, cgroup::WeightFormula f) {
  RawSource src(raw);
  auto a = cgroup::read_back(src, f, /*with_stat=*/false);
  if (!a) return Unexpected(a.error());
  return Kernel{std::move(*a), std::move(raw)};
}

bool allocated_empty(const K8sResources& r) {
  return !r.cpu_request_milli && !r.cpu_limit_milli && !r.memory_limit_bytes && !r.memory_request_bytes &&
         r.extra.empty();
}

cgroup::WeightFormula other(cgroup::WeightFormula f) {
  return f == cgroup::WeightFormula::Linear ? cgroup::WeightFormula::Quadratic : cgroup::WeightFormula::Linear;
}

// Kernel ≠ `a` (Container::kernel_target(): the allocated values, or after a
// failed or refused actuation the ones the kernel kept), for the values
// podshim manages. `settled` is false
// while weight_formula: auto has no evidence yet: then either formula's
// weight is in step (the fallback may not be the runtime's).
std::vector<Drift> judge(const K8sResources& a, const Kernel& k, cgroup::WeightFormula f, bool settled) {
  std::vector<Drift> out;
  if (allocated_empty(a)) return out;
  // The request the runtime converted: the request, or the limit when only
  // the limit is set (the apiserver defaults requests to limits).
  const auto req = a.cpu_request_milli ? a.cpu_request_milli : a.cpu_limit_milli;
  if (req && k.a.cpu_weight) {
    const uint64_t w = *k.a.cpu_weight;
    const uint64_t want = cgroup::milli_cpu_to_weight(*req, f);
    const bool ok = w == want || (!settled && w == cgroup::milli_cpu_to_weight(*req, other(f)));
    if (!ok) out.push_back({std::string(kDriftCpuRequest), "cpu.weight", std::to_string(want), *k.raw[kWeight], 0});
  }
  if (const auto& m = k.a.cpu_max) {
    bool ok;
    if (!a.cpu_limit_milli) {
      ok = !m->quota_us;
    } else if (!m->quota_us || m->period_us == 0) {
      ok = false;
    } else {
      // Same ratio as the allocated quota over the kubelet's period, or the
      // systemd driver's rounding of it (CPUQuotaPerSecUSec, 10 ms steps).
      const uint64_t want = cgroup::milli_cpu_to_quota_us(*a.cpu_limit_milli);
      const __int128 have = static_cast<__int128>(*m->quota_us) * cgroup::kQuotaPeriodUs;
      ok = have == static_cast<__int128>(want) * m->period_us ||
           have == static_cast<__int128>(cgroup::systemd_round_quota_us(want)) * m->period_us;
    }
    if (!ok)
      out.push_back({std::string(kDriftCpuLimit), "cpu.max", cgroup::cpu_max_value(a.cpu_limit_milli),
                     *k.raw[kCpuMax], 0});
  }
  if (k.raw[kMemMax]) {
    const auto& have = k.a.memory_limit_bytes;  // nullopt: "max"
    bool ok;
    if (!a.memory_limit_bytes) {
      ok = !have;
    } else {
      // The kernel keeps pages (page_counter_memparse rounds down).
      const auto want = static_cast<uint64_t>(*a.memory_limit_bytes);
      ok = have && (static_cast<uint64_t>(*have) == want ||
                    static_cast<uint64_t>(*have) == cgroup::page_round_down(want));
    }
    if (!ok)
      out.push_back({std::string(kDriftMemoryLimit), "memory.max", cgroup::memory_max_value(a.memory_limit_bytes),
                     *k.raw[kMemMax], 0});
  }
  // Registered resources: their row's own value and comparison, under the
  // resource's name.
  const auto rows = cgroup::registered_resources();
  for (size_t i = 0; i < k.raw.more.size(); ++i) {
    if (!k.raw.more[i]) continue;
    const auto want = rows[i].want(a, cgroup::ConvertContext{f, false});
    if (want && cgroup::attr_differs(std::string(rows[i].file), *k.raw.more[i], *want))
      out.push_back({std::string(rows[i].name), std::string(rows[i].file), *want, *k.raw.more[i], 0});
  }
  return out;
}

const Drift* find_drift(const std::vector<Drift>& v, std::string_view resource) {
  for (const auto& d : v)
    if (d.resource == resource) return &d;
  return nullptr;
}

}  // namespace

struct ReadBack::Impl {
  // Kept small: there is one per container (3000 on a big node). The
  // container's id is the map key (`id` points at it), its cgroup path is in
  // the store (only a hash of it is kept here, to notice a change); its
  // drift is also stored on the container, which podshim_drift is rendered
  // from (status::ContainerMetrics).
  // Only hashes of the cgroup path, state and allocation it last saw (to
  // notice a change; the values are the store's), the path resolved again
  // when a directory is opened (most are kept open).
  struct Entry {
    const std::string* id = nullptr;  // the key of this entry in `entries`
    bool read_failing = false;        // the last read-back failed (its first failure was a notice)
    size_t cgroup_path_hash = 0;
    size_t state_hash = 0;
    size_t allocated_hash = 0;
    UniqueFd dir;                // the cgroup directory, kept while dir_cap allows
    std::unique_ptr<Fds> fds;    // its attribute files, kept for fd_cache containers
    Clock::time_point allocated_at{};
    std::vector<Drift> drift;          // as last reported
    std::vector<std::string> repaired;  // "resource=actual" a repair was tried for
    bool queued = false;
    bool force = false;  // queued by touch_soon(): store the reading even if unchanged
    // The shares the runtime was given (a hook registration's, or those of
    // the runtime event touch_soon() queued the read for), for
    // weight_formula: auto to learn from at the next read (0: none).
    uint64_t runtime_shares = 0;
  };

  Store& store;
  cgroup::Engine* engine;
  Metrics* metrics;
  ReadBackOptions opts;
  UniqueFd root_fd;
  uint64_t sub = 0;
  mutable std::recursive_mutex mu;
  std::map<std::string, Entry, std::less<>> entries;
  std::deque<std::string> queue;
  size_t cached = 0, dirs = 0;
  size_t dir_cap = 0;  // directory fds kept at most (set in create())
  bool slice_scheduled = false;
  bool held = false;        // a Synchronize is arriving: queue, read after it
  uint64_t hold_gen = 0;
  bool pass_open = false;
  Clock::time_point pass_start{};
  Stats stats;
  std::shared_ptr<int> alive = std::make_shared<int>(0);

  Impl(Store& s, cgroup::Engine* e, Metrics* m, ReadBackOptions o)
      : store(s), engine(e), metrics(m), opts(std::move(o)) {}

  Clock::time_point now() const { return opts.now ? opts.now() : Clock::now(); }
  void say(log::Level l, const std::string& id, const std::string& msg) const {
    if (opts.log)
      opts.log(l, id, msg);
    else
      log::at(l, {{"CONTAINER_ID", id}}, "{}", msg);
  }
  // Stores what a pass learned about a container. ENOENT: the container
  // was removed since the pass began, so there is nothing to update. Any
  // other failure (the state directory refusing a write) left the store as
  // it was, and the next pass tries again.
  void store_update(const std::string& id, const std::function<void(Container&)>& fn) const {
    if (auto r = store.update_container(id, fn); !r && r.error().code != ENOENT)
      say(log::Level::Warning, id, fmt::format("read-back: storing container {}: {}", id, r.error().message));
  }
  cgroup::WeightFormula formula() const { return opts.formulas ? opts.formulas->formula() : opts.formula; }
  bool formula_settled() const {
    return !opts.formulas || opts.formulas->setting() != cgroup::WeightFormulaSetting::Auto ||
           opts.formulas->learned().has_value();
  }

  void drop_fds(Entry& e) {
    if (e.fds) {
      e.fds.reset();
      --cached;
    }
    if (e.dir) {
      e.dir.reset();
      --dirs;
    }
  }

  void enqueue(const std::string& id, Entry& e, bool first = false) {
    if (e.queued) return;
    e.queued = true;
    if (first) queue.push_front(id);
    else queue.push_back(id);
  }

  Entry& add(const Container& c) {
    auto [it, fresh] = entries.try_emplace(c.id);
    Entry& e = it->second;
    e.id = &it->first;
    e.cgroup_path_hash = hash_of(c.cgroup_path);
    e.state_hash = hash_of(c.state);
    e.allocated_hash = resources_hash(c.kernel_target());
    // What is allocated when podshim first sees a container is what the
    // runtime already wrote (Synchronize, CreateContainer): settled.
    e.allocated_at = now() - opts.settle;
    e.drift = c.drift;
    return e;
  }

  static size_t hash_of(std::string_view p) { return std::hash<std::string_view>{}(p); }
  static size_t resources_hash(const K8sResources& r) {
    size_t h = 0;
    for (const auto& v : {r.cpu_request_milli, r.cpu_limit_milli, r.memory_request_bytes, r.memory_limit_bytes})
      h = h * 1000003u ^ (v ? std::hash<int64_t>{}(*v) + 0x9e3779b97f4a7c15ull : 0);
    for (const auto& [name, v] : r.extra)
      h = h * 1000003u ^ (std::hash<std::string_view>{}(name) + std::hash<int64_t>{}(v));
    return h;
  }

  void forget(const std::string& id) {
    auto it = entries.find(id);
    if (it == entries.end()) return;
    drop_fds(it->second);
    entries.erase(it);
    if (opts.usage_history) opts.usage_history->forget(id);
  }

  void on_event(const Event& ev) {
    std::lock_guard lk(mu);
    if (ev.type == EventType::ContainerRemoved && ev.container) {
      forget(ev.container->id);
      return;
    }
    if (ev.type != EventType::ContainerUpserted || !ev.container) return;
    const Container& c = *ev.container;
    auto it = entries.find(c.id);
    if (it == entries.end()) {
      Entry& e = add(c);
      // Not started (not_started()): its change to running or
      // PostStartContainer's touch reads it.
      if (not_started(c)) return;
      // The hook registers what the spec's linux.resources held; the
      // kubelet's shares for that request (MilliCPUToShares, which
      // shares_to_milli_cpu inverts exactly) are what the runtime turned
      // into the cpu.weight this first read finds. Without it a hooks.d
      // node never learns its runtime's formula: NRI is the only other
      // source of shares.
      if (c.source == Source::Hook && c.allocated.cpu_request_milli)
        e.runtime_shares = cgroup::milli_cpu_to_shares(*c.allocated.cpu_request_milli);
      enqueue(c.id, e);
      kick();
      return;
    }
    Entry& e = it->second;
    bool read = false;
    if (hash_of(c.cgroup_path) != e.cgroup_path_hash) {
      drop_fds(e);
      e.cgroup_path_hash = hash_of(c.cgroup_path);
      read = true;
    }
    if (hash_of(c.state) != e.state_hash) {
      e.state_hash = hash_of(c.state);
      read = true;
    }
    if (resources_hash(c.kernel_target()) != e.allocated_hash) {
      e.allocated_hash = resources_hash(c.kernel_target());
      e.allocated_at = now();
      e.runtime_shares = 0;  // resized before its first read: the weight is no longer the runtime's
    }
    // Someone stored the container without the drift podshim reported
    // (an upsert built afresh from a runtime event): report it again.
    if (c.drift != e.drift) read = true;
    if (read) {
      enqueue(c.id, e);
      kick();
    }
  }

  // Reads the kernel's files for `e`: through kept fds when it has them,
  // else opening them (and keeping them while the cache has room).
  Result<Raw> sample(Entry& e, const std::string& cgroup_path) {
    if (e.fds) {
      auto r = read_files(*e.fds);
      if (r) {
        ++stats.cached_reads;
        return r;
      }
      // The cgroup was removed (and maybe made again) under the kept fds.
      drop_fds(e);
      if (!gone_errno(r.error().code)) return r;
    }
    // The directory fd is cheap for the kernel (no seq_file buffer) and
    // spares the walk from the root on every read; the files are not
    // (a kept cgroup attribute fd holds its seq_file and page buffer).
    UniqueFd tmp_dir;
    int dir = e.dir.get();
    if (!e.dir) {
      auto loc = cgroup::resolve_cgroup_path(cgroup_path, opts.driver);
      if (!loc) return wrap(loc, fmt::format("cgroup path '{}'", cgroup_path));
      // A cgroup not made yet (the read after CreateContainer, which comes
      // before the runtime makes it) is the common answer here: no message
      // is formatted for it, only counted (stats.gone).
      const int fd = fs::open_beneath_errno(root_fd.get(), loc->relpath, O_RDONLY | O_DIRECTORY);
      if (fd == -ENOENT) return Unexpected(Error{ENOENT, std::string()});
      if (fd < 0) return fail_code(-fd, "opening cgroup '{}'", loc->relpath);
      UniqueFd d(fd);
      if (dirs < dir_cap) {
        e.dir = std::move(d);
        ++dirs;
        dir = e.dir.get();
      } else {
        tmp_dir = std::move(d);
        dir = tmp_dir.get();
      }
    }
    auto f = open_files(dir);
    if (!f) {
      if (gone_errno(f.error().code)) drop_fds(e);
      return Unexpected(f.error());
    }
    auto r = read_files(*f);
    if (r && cached < opts.fd_cache) {
      e.fds = std::make_unique<Fds>(std::move(*f));
      ++cached;
    }
    return r;
  }

  // Reports the transitions between the drift last reported and `now_drift`.
  void report(const std::string& id, Entry& e, std::vector<Drift>& now_drift) {
    const int64_t wall = now_unix_ms();
    for (auto& d : now_drift) {
      if (const Drift* old = find_drift(e.drift, d.resource)) {
        d.since_unix_ms = old->since_unix_ms;
        continue;
      }
      d.since_unix_ms = wall;
      say(log::Level::Warning, id,
          fmt::format("Drift: {} of container {} is {} in the kernel, allocated {}{}", d.file, id, d.actual,
                      d.allocated, opts.repair_drift ? "; repairing" : " (readback.repair_drift is off)"));
    }
    for (const auto& d : e.drift) {
      if (find_drift(now_drift, d.resource)) continue;
      std::erase_if(e.repaired, [&](const std::string& r) { return str::starts_with(r, d.resource + "="); });
      say(log::Level::Info, id, fmt::format("Drift ended: {} of container {} is back to {}", d.file, id, d.allocated));
    }
    e.drift = now_drift;
  }

  void repair(const std::string& id, Entry& e, const Container& c) {
    if (!opts.repair_drift || !engine || e.drift.empty()) return;
    bool fresh = false;
    for (const auto& d : e.drift) {
      std::string key = d.resource + "=" + d.actual;
      if (std::find(e.repaired.begin(), e.repaired.end(), key) != e.repaired.end()) continue;
      e.repaired.push_back(std::move(key));
      fresh = true;
    }
    if (!fresh) return;  // one attempt per drift; a failure is logged once
    cgroup::PodResizeRequest req;
    req.containers.push_back({id, c.cgroup_path, c.kernel_target()});
    req.mode = cgroup::WriteMode::All;
    std::weak_ptr<int> w = alive;
    engine->resize(req, [this, w, id](Result<cgroup::ResizeReport> r) {
      if (w.expired()) return;
      std::lock_guard lk(mu);
      if (metrics) metrics->drift_repairs.inc({{"result", r ? "applied" : "failed"}});
      if (r) {
        std::string steps;
        for (const auto& s : r->steps) steps += fmt::format("{}{} {} → {}", steps.empty() ? "" : ", ", s.file, s.before, s.after);
        say(log::Level::Notice, id, fmt::format("Drift repaired: container {} rewritten to its allocated values ({})", id, steps));
      } else {
        say(log::Level::Warning, id,
            fmt::format("Drift repair of container {} failed, not retrying until it changes: {}", id, r.error().message));
      }
      auto it = entries.find(id);
      if (it != entries.end()) {
        enqueue(id, it->second);
        kick();
      }
    });
  }


  // Only what the read-back uses (not the annotations, devices or
  // conditions a full copy would bring along); nullopt when it is gone.
  std::optional<Container> copy_of(const std::string& id) const {
    std::optional<Container> c;
    store.with_container(id, [&](const Container& k) {
      Container x;
      x.id = k.id;
      x.pod_uid = k.pod_uid;
      x.cgroup_path = k.cgroup_path;
      x.state = k.state;
      x.source = k.source;
      x.allocated = k.allocated;
      x.actuated = k.actuated;
      x.actual = k.actual;
      x.drift = k.drift;
      c = std::move(x);
    });
    return c;
  }

  // An NRI container that has not started yet. NRI's CreateContainer comes
  // before the runtime makes the cgroup; containerd's CRI StartContainer
  // creates the task (`runc create`: mkdir of the cgroup, then its limits)
  // and only then sends StartContainer and, once running,
  // PostStartContainer (containerd internal/cri/server/container_start.go).
  // Between the mkdir and the write a read sees the kernel's defaults, a
  // false drift: containerd 1.7.27 + runc 1.1.5 showed one under TCG.
  // Hook registrations come from a createRuntime hook, after the runtime
  // wrote the cgroup, so they are read at once.
  static bool not_started(const Container& c) {
    return c.source == Source::Nri && c.state != "running" && c.state != "paused";
  }

  // A read that failed: a cgroup not there (not created yet, as
  // CreateContainer comes before the runtime makes it, or already removed)
  // is not an error; the first other failure of a container is a notice
  // (its actual values stay "-" until a read works), repeats go to debug.
  void read_failed(const std::string& id, Entry& e, const Error& err) {
    if (gone_errno(err.code)) {
      ++stats.gone;
      return;
    }
    ++stats.errors;
    const bool first = !e.read_failing;
    e.read_failing = true;
    say(first ? log::Level::Notice : log::Level::Debug, id,
        fmt::format("Read-back of container {} failed{}: {}", id, first ? " (repeats are logged at debug)" : "",
                    err.message));
  }

  // Stores the reading when it tells something new (or `force`): other
  // resources or kills, usage moved by a step, or drift changed.
  void store_reading(const std::string& id, const Entry& e, const Container& c, const ActualResources& act,
                     bool force) {
    const auto& old = c.actual;
    const bool usage_moved =
        old && (old->memory_current > act.memory_current ? old->memory_current - act.memory_current
                                                         : act.memory_current - old->memory_current) >=
                   std::max(kUsageStepBytes, old->memory_current / kUsageStepDivisor);
    const bool changed = force || !old || old->resources != act.resources || old->oom_kill != act.oom_kill ||
                         usage_moved || c.drift != e.drift;
    if (!changed) return;
    uint64_t kills = 0;
    store_update(id, [&](Container& ct) {
      kills = set_actual(ct, act);
      ct.drift = e.drift;
    });
    count_oom_kills(store, metrics, c.pod_uid, kills);
  }

  void read_one(const std::string& id, uint64_t shares, bool force) {
    std::optional<Container> c = copy_of(id);
    if (!c) {
      forget(id);
      return;
    }
    auto it = entries.find(id);
    Entry& e = it != entries.end() ? it->second : add(*c);
    e.queued = false;
    if (c->cgroup_path.empty()) return;
    if (resources_hash(c->kernel_target()) != e.allocated_hash) {
      e.allocated_hash = resources_hash(c->kernel_target());
      e.allocated_at = now();
    }
    if (c->state == "stopped") {
      // Exited: the runtime removes its cgroup; nothing to judge, nothing
      // to log.
      drop_fds(e);
      e.drift.clear();
      e.repaired.clear();
      if (!c->drift.empty()) store_update(id, [&](Container& ct) { ct.drift.clear(); });
      return;
    }
    // Not started: its cgroup may exist with the kernel's defaults
    // (cpu.weight 100, max, max) while the runtime is still making it, so
    // neither an actual value nor drift can be read from it yet. A touch()
    // (`force`) reads anyway: it comes when the runtime says it has
    // written (PostStartContainer, whatever state that event carries).
    if (!force && not_started(*c)) return;
    ++stats.reads;
    auto raw = sample(e, c->cgroup_path);
    Result<Kernel> k = raw ? parse(std::move(*raw), formula()) : Result<Kernel>(Unexpected(raw.error()));
    if (!k) return read_failed(id, e, k.error());
    e.read_failing = false;
    if (opts.usage_history && k->raw[kMemCurrent]) opts.usage_history->record(id, now(), k->a.memory_current);
    if (const uint64_t sh = shares ? shares : e.runtime_shares; opts.formulas && sh && k->a.cpu_weight)
      if (auto n = opts.formulas->learn(sh, *k->a.cpu_weight, id).notice) say(log::Level::Notice, id, *n);
    e.runtime_shares = 0;
    // What was just learned is the formula this weight is read with.
    const cgroup::WeightFormula f = k->a.formula = formula();
    const ActualResources act = to_actual(k->a, c->kernel_target().cpu_request_milli);
    // An allocation the runtime may still be writing is not judged yet.
    std::vector<Drift> now_drift =
        now() - e.allocated_at >= opts.settle ? judge(c->kernel_target(), *k, f, formula_settled()) : e.drift;
    report(id, e, now_drift);
    store_reading(id, e, *c, act, force);
    repair(id, e, *c);
  }


  void kick() {
    if (!opts.schedule || slice_scheduled || held || queue.empty()) return;
    slice_scheduled = true;
    std::weak_ptr<int> w = alive;
    opts.schedule(0ms, [this, w] {
      if (w.expired()) return;
      {
        std::lock_guard lk(mu);
        slice_scheduled = false;
      }
      run_slice(opts.slice_budget);
      std::lock_guard lk(mu);
      kick();
    });
  }

  void arm() {
    if (!opts.schedule || opts.interval.count() == 0) return;
    std::weak_ptr<int> w = alive;
    opts.schedule(opts.interval, [this, w] {
      if (w.expired()) return;
      std::lock_guard lk(mu);
      tick();
      kick();
      arm();
    });
  }

  void tick() {
    if (queue.empty() && !pass_open) {
      pass_open = true;
      pass_start = now();
    }
    for (auto& [id, e] : entries) enqueue(id, e);
  }

  // budget zero: no limit.
  size_t run_slice(std::chrono::microseconds budget) {
    std::lock_guard lk(mu);
    const auto start = now();
    size_t n = 0;
    while (!queue.empty()) {
      std::string id = std::move(queue.front());
      queue.pop_front();
      auto it = entries.find(id);
      if (it == entries.end() || !it->second.queued) continue;
      const bool force = std::exchange(it->second.force, false);
      read_one(id, 0, force);
      ++n;
      if (budget.count() > 0 && now() - start >= budget) break;
    }
    const auto end = now();
    ++stats.slices;
    stats.longest_slice = std::max(stats.longest_slice, std::chrono::duration_cast<std::chrono::microseconds>(end - start));
    if (queue.empty() && pass_open) {
      pass_open = false;
      ++stats.passes;
      stats.last_pass = std::chrono::duration_cast<std::chrono::microseconds>(end - pass_start);
      if (metrics) {
        metrics->readback_pass.set({}, std::chrono::duration<double>(end - pass_start).count());
        metrics->readback_passes.inc();
      }
    }
    return n;
  }
};

ReadBackOptions readback_options(const Config& cfg) {
  ReadBackOptions o;
  o.cgroup_root = cfg.cgroup_root;
  o.driver = cfg.cgroup_driver;
  o.formula = cfg.weight_formula == cgroup::WeightFormulaSetting::Linear ? cgroup::WeightFormula::Linear
                                                                         : cgroup::WeightFormula::Quadratic;
  o.interval = cfg.readback_interval;
  o.slice_budget = cfg.readback_slice_budget;
  o.fd_cache = cfg.readback_fd_cache;
  o.repair_drift = cfg.repair_drift;
  return o;
}

ReadBack::ReadBack(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<ReadBack>> ReadBack::create(Store& store, cgroup::Engine* engine, Metrics* metrics,
                                                   ReadBackOptions opts) {
  auto impl = std::make_unique<Impl>(store, engine, metrics, std::move(opts));
  auto root = fs::open_dir(impl->opts.cgroup_root);
  if (!root) return wrap(root, fmt::format("read-back: cgroup root '{}'", impl->opts.cgroup_root));
  impl->root_fd = std::move(*root);
  // Kept fds must leave room for everything else (sockets, the CDI watch,
  // the engine's own opens): at most half the soft RLIMIT_NOFILE.
  // Of that half, the kept files come first; directories take the rest.
  size_t budget = 1 << 20;
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    budget = static_cast<size_t>(rl.rlim_cur / 2);
  const size_t cap = budget / (kNumFiles + 1);
  if (impl->opts.fd_cache > cap) {
    log::notice("read-back: keeping attribute fds for {} containers, not {} (RLIMIT_NOFILE {})", cap,
                impl->opts.fd_cache, budget * 2);
    impl->opts.fd_cache = cap;
  }
  impl->dir_cap = impl->opts.keep_dirs ? budget - impl->opts.fd_cache * kNumFiles : 0;
  Impl* self = impl.get();
  {
    std::lock_guard lk(self->mu);
    store.for_each_container([self](const Container& c) { self->enqueue(c.id, self->add(c)); });
    self->sub = store.subscribe([self](const Event& ev) { self->on_event(ev); });
  }
  return std::unique_ptr<ReadBack>(new ReadBack(std::move(impl)));
}

ReadBack::~ReadBack() {
  impl_->store.unsubscribe(impl_->sub);
  impl_->alive.reset();
}

void ReadBack::start() {
  std::lock_guard lk(impl_->mu);
  impl_->kick();
  impl_->arm();
}

void ReadBack::touch(const std::string& id, uint64_t shares) {
  std::lock_guard lk(impl_->mu);
  impl_->read_one(id, shares, true);
}

void ReadBack::touch_soon(const std::string& id, uint64_t shares) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->entries.find(id);
  if (!impl_->opts.schedule || it == impl_->entries.end()) {
    impl_->read_one(id, shares, true);
    return;
  }
  Impl::Entry& e = it->second;
  if (shares) e.runtime_shares = shares;
  e.force = true;
  impl_->enqueue(id, e, /*first=*/true);
  impl_->kick();
}

void ReadBack::touch_all() {
  std::lock_guard lk(impl_->mu);
  impl_->held = false;
  impl_->tick();
  impl_->kick();
}

void ReadBack::hold() {
  std::lock_guard lk(impl_->mu);
  impl_->held = true;
  const uint64_t gen = ++impl_->hold_gen;
  if (!impl_->opts.schedule) return;
  // A Synchronize that never ends (the runtime went away mid-sync) must not
  // stop the read-back: the hold lapses after kMaxHold.
  std::weak_ptr<int> w = impl_->alive;
  impl_->opts.schedule(kMaxHold, [this, w, gen] {
    if (w.expired()) return;
    std::lock_guard lk(impl_->mu);
    if (!impl_->held || impl_->hold_gen != gen) return;
    impl_->held = false;
    impl_->kick();
  });
}

size_t ReadBack::run_slice() { return impl_->run_slice(impl_->opts.slice_budget); }

void ReadBack::tick() {
  std::lock_guard lk(impl_->mu);
  impl_->tick();
}

void ReadBack::read_all() {
  std::lock_guard lk(impl_->mu);
  impl_->tick();
  while (!impl_->queue.empty()) impl_->run_slice(std::chrono::microseconds(0));
}

ReadBack::Stats ReadBack::stats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}
size_t ReadBack::cached_containers() const {
  std::lock_guard lk(impl_->mu);
  return impl_->cached;
}
size_t ReadBack::cached_dirs() const {
  std::lock_guard lk(impl_->mu);
  return impl_->dirs;
}
size_t ReadBack::pending() const {
  std::lock_guard lk(impl_->mu);
  return impl_->queue.size();
}

}  // namespace podshim::core
