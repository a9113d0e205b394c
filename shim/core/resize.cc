#include "shim/core/resize.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "base/fs.h"
#include "base/log.h"
#include "base/names.h"
#include "base/str.h"
#include "shim/core/admission.h"
#include "shim/core/metrics.h"
#include "shim/core/oom_kills.h"

namespace podshim::core {

namespace {

using std::optional;

using cgroup::effective_cpu_request;
using cgroup::effective_memory_request;

bool cpu_differs(const K8sResources& a, const K8sResources& b) {
  return a.cpu_request_milli != b.cpu_request_milli || a.cpu_limit_milli != b.cpu_limit_milli;
}
bool mem_differs(const K8sResources& a, const K8sResources& b) {
  return a.memory_request_bytes != b.memory_request_bytes || a.memory_limit_bytes != b.memory_limit_bytes;
}

K8sResources merge(K8sResources base, const K8sResources& over, const Removals& rm) {
  if (over.cpu_request_milli) base.cpu_request_milli = over.cpu_request_milli;
  if (over.cpu_limit_milli) base.cpu_limit_milli = over.cpu_limit_milli;
  if (over.memory_request_bytes) base.memory_request_bytes = over.memory_request_bytes;
  if (over.memory_limit_bytes) base.memory_limit_bytes = over.memory_limit_bytes;
  if (rm.cpu_request) base.cpu_request_milli.reset();
  if (rm.cpu_limit) base.cpu_limit_milli.reset();
  if (rm.memory_request) base.memory_request_bytes.reset();
  if (rm.memory_limit) base.memory_limit_bytes.reset();
  for (const auto& [name, v] : over.extra) base.extra.insert_or_assign(name, v);
  return base;
}

// Messages without the subject; the caller names it, on a refusal only, so a
// valid request formats nothing.
Result<void> validate(const K8sResources& r) {
  for (auto v : {r.cpu_request_milli, r.cpu_limit_milli, r.memory_request_bytes, r.memory_limit_bytes}) {
    if (v && *v < 0) return fail(EINVAL, "negative resource value {}", *v);
  }
  for (const auto& [name, v] : r.extra)
    if (v < 0) return fail(EINVAL, "negative {} value {}", name, v);
  if (r.cpu_request_milli && r.cpu_limit_milli && *r.cpu_request_milli > *r.cpu_limit_milli) {
    return fail(EINVAL, "cpu request ({}m) must be less than or equal to cpu limit ({}m)",
                *r.cpu_request_milli, *r.cpu_limit_milli);
  }
  if (r.memory_request_bytes && r.memory_limit_bytes && *r.memory_request_bytes > *r.memory_limit_bytes) {
    return fail(EINVAL, "memory request ({}) must be less than or equal to memory limit ({})",
                *r.memory_request_bytes, *r.memory_limit_bytes);
  }
  return {};
}

}  // namespace

namespace {
constexpr Names<ResizeOutcome, 8> kOutcomeNames{{{{ResizeOutcome::Error, "error"},
                                                  {ResizeOutcome::Applied, "applied"},
                                                  {ResizeOutcome::Unchanged, "unchanged"},
                                                  {ResizeOutcome::Deferred, "deferred"},
                                                  {ResizeOutcome::Infeasible, "infeasible"},
                                                  {ResizeOutcome::RestartRequired, "restart_required"},
                                                  {ResizeOutcome::AppliedWithOomKill, "applied_with_oom_kill"},
                                                  {ResizeOutcome::InProgress, "in_progress"}}}};
constexpr Names<IntentSource, 3> kIntentSourceNames{
    {{{IntentSource::Api, "api"},
      {IntentSource::NriUpdateContainer, "nri-update-container"},
      {IntentSource::NriUpdatePodSandbox, "nri-update-pod-sandbox"}}}};
}  // namespace

std::string_view to_string(ResizeOutcome o) { return kOutcomeNames.name(o); }

Result<NodeAllocatable> machine_allocatable(const std::string& proc_root) {
  NodeAllocatable a;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0) return fail_errno("sysconf(_SC_NPROCESSORS_ONLN)");
  a.cpu_milli = n * 1000;
  auto text = fs::read_file(proc_root + "/meminfo", 1 << 20);
  if (!text) return wrap(text, "reading meminfo");
  for (auto line : str::split(*text, '\n')) {
    if (!str::starts_with(line, "MemTotal:")) continue;
    auto rest = str::trim(line.substr(9));
    if (!str::ends_with(rest, "kB")) return fail(EINVAL, "meminfo: unexpected MemTotal line '{}'", line);
    auto kb = str::parse_u64(rest.substr(0, rest.size() - 2));
    if (!kb) return wrap(kb, "meminfo MemTotal");
    a.memory_bytes = static_cast<int64_t>(*kb * 1024);
    return a;
  }
  return fail(EINVAL, "meminfo has no MemTotal line");
}

Result<cgroup::Actual> Actuator::read_actual(const std::string& cgroup_path) {
  return fail(ENOTSUP, "this actuator cannot read back {}", cgroup_path);
}

std::string_view to_string(IntentSource s) { return kIntentSourceNames.name(s); }

namespace {

std::string fmt_q(const std::optional<int64_t>& v, bool cpu) {
  if (!v) return "-";
  return cpu ? fmt::format("{}m", *v) : std::to_string(*v);
}

// "cpu 250m/1000m mem 134217728/268435456" (request/limit, "-" unset).
std::string fmt_res(const K8sResources& r) {
  return fmt::format("cpu {}/{} mem {}/{}", fmt_q(r.cpu_request_milli, true), fmt_q(r.cpu_limit_milli, true),
                     fmt_q(r.memory_request_bytes, false), fmt_q(r.memory_limit_bytes, false));
}

// The answer to a resize whose outcome lands later.
constexpr const char* kInProgressMessage = "resize in progress; its outcome follows in lastResizeOutcome";

}  // namespace

// One container of a resize as it moves through the service.
struct ResizeManager::Item {
  Container c;          // state at admission, with the new generation
  K8sResources before;  // allocated before this resize
  K8sResources next;    // new desired
  ResizePolicy cpu_policy, memory_policy;
  bool removes = false;
  bool actuated = false;
};

struct ResizeManager::PodView {
  std::vector<K8sResources> before, after;  // each container's allocation
  std::vector<NamedResources> named;        // after, by container name: only when pod-level values are checked
};

struct ResizeManager::Pending {
  std::string_view reason;  // kReasonDeferred or kReasonInfeasible
  std::string message;
};

namespace {

// What differs between the sources of a resize, as data. A runtime's update
// (NRI UpdateContainer, UpdatePodSandbox) is the kubelet's decision, already
// allocated, written by the runtime after podshim answers; a request to the
// API is decided here as the kubelet would, and written by podshim.
struct Origin {
  // Decided here: nothing-to-resize refused, pod-level values merged with
  // the known ones on a known pod with a cgroup, validation, QoS, capacity
  // (Infeasible, Deferred), unchanged items skipped, resize policies
  // honoured, a container without a cgroup refused, the pod cgroup planned
  // from the store. A runtime's update is taken as it is.
  bool admits = true;
  // The engine's read at the end of its write is the container's actual
  // value; a runtime's write comes after podshim answers, and is read at its
  // PostUpdateContainer (shim/adapter).
  bool reads_back = true;
  // The runtime waits on the answer to write the values itself, and needs
  // only the verdict: it is sent as soon as the actuation has answered, and
  // what podshim records of the resize (store, metrics, log) follows it.
  // Nothing can see the state in between: the loop reads no other request
  // until the recording is done. A request to the API is answered after it,
  // so that the answer describes what is stored.
  bool answers_first = false;

  static Origin of(IntentSource s) {
    const bool api = s == IntentSource::Api;
    return Origin{api, api, !api};
  }
};

}  // namespace

struct ResizeManager::Flight {
  IntentSource source = IntentSource::Api;
  Origin origin;
  std::string pod_uid;
  // What the resize reads of the pod, not a copy of it (its labels and
  // annotations are kilobytes on every request).
  struct PodFacts {  // of the pod `pod_uid`
    K8sResources resources;
    std::string cgroup_path;
    Source source{};
  };
  std::optional<PodFacts> pod;
  std::optional<K8sResources> pod_resources;  // new pod-level resources, when the intent sets them
  K8sResources pod_before;
  std::string pod_cgroup_path;
  bool pod_planned = false;
  std::vector<Item> items;
  std::set<std::string> ids;  // of items, to refuse one named twice
  bool pod_resources_given = false;  // the intent sets pod-level resources
  K8sResources pod_level;  // the pod-level resources after the request
  K8sResources new_total;  // the pod cgroup's target (given it when pod_planned)
  ResizeResult result;
  bool any_restart = false, any_change = false;
  // An item asked for what an actuation still running will leave: the
  // outcome is that one's (InProgress), not Unchanged.
  bool joins_running = false;
  // Set while the actuator runs inside submit(): a completion then has the
  // items' state in hand and stores each container once.
  bool inline_phase = false, finished = false;
  bool answered = false;  // answer() has called done(), before the record
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> actuation_start;  // when the actuator was called
  int64_t now = now_unix_ms();
  Done done;
};

ResizeManager::ResizeManager(Store& store, Actuator& actuator, NodeAllocatable allocatable,
                             Metrics* metrics)
    : store_(store), actuator_(actuator), allocatable_(allocatable), metrics_(metrics) {}

void ResizeManager::set_allocatable(NodeAllocatable a) { allocatable_ = a; }

Result<ResizeResult> ResizeManager::sync_submit(ResizeIntent intent) {
  auto got = std::make_shared<std::optional<Result<ResizeResult>>>();
  std::vector<std::string> ids;
  for (const auto& c : intent.containers) ids.push_back(c.container_id);
  submit(std::move(intent), [got](Result<ResizeResult> r) { *got = std::move(r); });
  if (*got) return std::move(**got);
  // Completes later: the caller sees where it stands now.
  ResizeResult r;
  r.outcome = ResizeOutcome::InProgress;
  r.message = kInProgressMessage;
  for (const auto& id : ids)
    store_.with_container(id, [&](const Container& c) { r.generations[id] = c.generation; });
  return r;
}

Result<ResizeResult> ResizeManager::resize_container(const ContainerResize& req) {
  ResizeIntent in;
  in.source = IntentSource::Api;
  store_.with_container(req.container_id, [&](const Container& c) { in.pod_uid = c.pod_uid; });
  in.containers = {req};
  return sync_submit(std::move(in));
}

Result<ResizeResult> ResizeManager::resize_pod(const PodResize& req) {
  PODSHIM_TRY(validate_id("pod uid", req.pod_uid));
  if (!store_.pod(req.pod_uid) && store_.containers_of(req.pod_uid).empty())
    return fail(ENOENT, "no pod '{}'", req.pod_uid);
  ResizeIntent in;
  in.source = IntentSource::Api;
  in.pod_uid = req.pod_uid;
  in.pod_resources = req.pod_resources;
  in.containers = req.containers;
  return sync_submit(std::move(in));
}

// The outcome recorded is the flight's result, or `refused` for a request
// refused before anything was decided.
void ResizeManager::record(const Flight& f, const Error* refused) {
  const ResizeResult* r = refused ? nullptr : &f.result;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - f.start).count();
  if (metrics_) {
    metrics_->resize_requests.inc({{"result", r ? std::string(to_string(r->outcome)) : "invalid"}});
    metrics_->resize_latency.observe({}, secs);
  }
  // The one log line per resize outcome, in every mode.
  const bool ok = r && (r->outcome == ResizeOutcome::Applied || r->outcome == ResizeOutcome::Unchanged ||
                        r->outcome == ResizeOutcome::RestartRequired);
  const auto level = ok ? log::Level::Info : log::Level::Warning;
  // Arguments are built before log::at can drop the line; at the default
  // level (notice) an applied resize logs nothing, so build nothing.
  if (!log::enabled(level)) return;
  const std::string outcome = r ? std::string(to_string(r->outcome)) : "invalid";
  const std::string& reason = r ? r->message : refused->message;
  const uint64_t reclaimed = r ? r->report.bytes_reclaimed : 0;
  const auto ms = static_cast<int64_t>(secs * 1000);
  std::string seen;
  if (r && (r->report.psi_some_avg10 > 0 || r->report.psi_full_avg10 > 0 || r->report.growth_bytes_per_sec))
    seen = fmt::format(" (pressure some {:.1f}% full {:.1f}%, usage trend {:.1f} MiB/s)", r->report.psi_some_avg10,
                       r->report.psi_full_avg10, static_cast<double>(r->report.growth_bytes_per_sec) / (1 << 20));
  for (const auto& it : f.items) {
    log::at(level, {{"CONTAINER_ID", it.c.id}},
            "resize {}: container {} pod {} ({}): {} -> {}, reclaimed {} bytes, {} ms{}{}{}", outcome, it.c.id,
            f.pod_uid.empty() ? "-" : f.pod_uid, to_string(f.source), fmt_res(it.before), fmt_res(it.next),
            reclaimed, ms, seen, reason.empty() ? "" : ": ", reason);
  }
  if (f.pod_planned || (f.items.empty() && f.pod_resources)) {
    log::at(level, {}, "resize {}: pod {} ({}): {} -> {}, reclaimed {} bytes, {} ms{}{}", outcome,
            f.pod_uid.empty() ? "-" : f.pod_uid, to_string(f.source), fmt_res(f.pod_before),
            fmt_res(f.pod_planned ? f.new_total : f.pod_resources.value_or(K8sResources{})), reclaimed, ms,
            reason.empty() ? "" : ": ", reason);
  }
}

void ResizeManager::reject(Flight& f, Error e) {
  record(f, &e);
  f.done(Unexpected(std::move(e)));
}

// Before the record (Origin::answers_first): the result is copied, the
// record reads it after.
void ResizeManager::answer(Flight& f) {
  f.answered = true;
  f.done(f.result);
}

void ResizeManager::conclude(Flight& f) {
  record(f, nullptr);
  if (f.answered) return;  // in finish(), before the record
  f.done(std::move(f.result));  // nothing reads the flight's result after
}

void ResizeManager::set_pending(Flight& f, const Pending& p) {
  for (auto& it : f.items) {
    auto& cond = it.c.conditions.pending;
    if (!cond || cond->reason != p.reason) cond = Condition{std::string(p.reason), p.message, it.c.generation, f.now};
    cond->message = p.message;
    cond->observed_generation = it.c.generation;
    it.c.last_outcome = std::string(p.reason == kReasonDeferred ? "deferred" : "infeasible");
    if (auto r = store_.upsert_container(it.c); !r) log::warn("storing container {}: {}", it.c.id, r.error().message);
  }
}

void ResizeManager::submit(ResizeIntent intent, Done done) {
  auto f = std::make_shared<Flight>();
  f->source = intent.source;
  f->origin = Origin::of(intent.source);
  f->pod_uid = intent.pod_uid;
  f->done = std::move(done);
  if (auto p = plan(intent, *f); !p) return reject(*f, std::move(p).error());
  new_generation(intent, *f);
  if (f->origin.admits) {
    auto verdict = admit(*f);
    if (!verdict) return reject(*f, std::move(verdict).error());
    if (*verdict) {
      set_pending(*f, **verdict);
      f->result.outcome = (*verdict)->reason == kReasonDeferred ? ResizeOutcome::Deferred : ResizeOutcome::Infeasible;
      f->result.message = (*verdict)->message;
      return conclude(*f);
    }
  } else if (intent.pod_resources) {
    f->new_total = *intent.pod_resources;
  }
  auto act = allocate(*f);
  if (!act) return reject(*f, std::move(act).error());
  launch(f, std::move(*act));
}

Result<void> ResizeManager::plan(const ResizeIntent& intent, Flight& f) {
  // 0. The request itself.
  if (!intent.pod_uid.empty()) PODSHIM_TRY(validate_id("pod uid", intent.pod_uid));
  if (f.origin.admits && !intent.pod_resources && intent.containers.empty())
    return fail(EINVAL, "nothing to resize");
  // 1. The new spec of every container in the request, validated.
  for (const auto& r : intent.containers) PODSHIM_TRY(plan_container(intent, r, f));
  // The pod: its facts, and its pod-level resources when the intent sets them.
  const std::string& pod_uid = intent.pod_uid;
  if (!pod_uid.empty())
    store_.with_pod(pod_uid, [&](const Pod& p) { f.pod.emplace(Flight::PodFacts{p.resources, p.cgroup_path, p.source}); });
  if (f.pod) f.pod_before = f.pod->resources;
  f.pod_cgroup_path = !intent.pod_cgroup_path.empty() ? intent.pod_cgroup_path
                      : f.pod                         ? f.pod->cgroup_path
                                                      : std::string();
  if (intent.pod_resources) {
    if (auto v = validate(*intent.pod_resources); !v) return Unexpected(std::move(v).error().wrap(fmt::format("pod '{}'", pod_uid)));
    if (f.origin.admits) {
      if (!f.pod) return fail(ENOENT, "no pod '{}' known with a cgroup to resize", pod_uid);
      if (f.pod->cgroup_path.empty()) return fail(EINVAL, "pod '{}' has no cgroup path to resize", pod_uid);
    }
    if (auto v = cgroup::check_kernel_limits(*intent.pod_resources); !v)
      return Unexpected(std::move(v).error().wrap(fmt::format("pod '{}'", pod_uid)));
  }
  // The pod-level resources after the request: an API request's values not
  // given keep theirs; a runtime's UpdatePodSandbox carries the whole spec.
  f.pod_level = f.pod ? f.pod->resources : K8sResources{};
  if (intent.pod_resources)
    f.pod_level = f.origin.admits ? merge(f.pod_level, *intent.pod_resources, {}) : *intent.pod_resources;
  f.pod_resources_given = intent.pod_resources.has_value();
  return {};
}

Result<void> ResizeManager::plan_container(const ResizeIntent& intent, const ContainerResize& r, Flight& f) {
  if (!f.ids.insert(r.container_id).second)
    return fail(EINVAL, "container '{}' appears twice in one resize", r.container_id);
  auto c = store_.container(r.container_id);
  if (!c) return fail(ENOENT, "no container '{}'", r.container_id);
  if (!intent.pod_uid.empty() && c->pod_uid != intent.pod_uid)
    return fail(EINVAL, "container '{}' belongs to pod '{}', not '{}'", r.container_id, c->pod_uid, intent.pod_uid);
  Item it;
  it.before = allocation(*c);
  it.next = merge(c->desired, r.resources, r.remove);
  it.cpu_policy = r.cpu_policy.value_or(c->cpu_policy);
  it.memory_policy = r.memory_policy.value_or(c->memory_policy);
  it.c = std::move(*c);  // the store's copy is the item's: no second copy
  it.c.allocated = it.before;
  // Values the kernel would refuse are refused before anything is recorded.
  auto v = validate(it.next);
  if (v) v = cgroup::check_kernel_limits(it.next);
  if (!v) return Unexpected(std::move(v).error().wrap(fmt::format("container '{}'", it.c.id)));
  // Removing a request or limit that is allocated can never be honoured.
  const auto& a = it.before;
  it.removes = (a.cpu_request_milli && !it.next.cpu_request_milli) || (a.cpu_limit_milli && !it.next.cpu_limit_milli) ||
               (a.memory_request_bytes && !it.next.memory_request_bytes) ||
               (a.memory_limit_bytes && !it.next.memory_limit_bytes);
  f.items.push_back(std::move(it));
  return {};
}

// 2. Generation: every request is a new generation of each container's spec,
// recorded with the new desired values whatever the outcome.
void ResizeManager::new_generation(const ResizeIntent& intent, Flight& f) {
  for (auto& it : f.items) {
    if (intent.bump_generation) it.c.generation++;
    it.c.desired = it.next;
    it.c.cpu_policy = it.cpu_policy;
    it.c.memory_policy = it.memory_policy;
    f.result.generations[it.c.id] = it.c.generation;
  }
}

// What the apiserver refuses for pod-level resources (a container limit
// above the pod's, requests adding up to more than the pod's) is an invalid
// request (Kubernetes pkg/apis/core/validation/validation.go), refused
// before anything is recorded. A pod learned over NRI carries the runtime's
// sandbox totals (CRI LinuxPodSandboxConfig.resources, "the sum of
// container resources"), not necessarily a pod-level spec: only pod-level
// values podshim was given are validated as such. Nothing to check when no
// pod-level value is set (validate_pod_level).
bool ResizeManager::checks_pod_level(const Flight& f) {
  return f.pod && (f.pod->source != Source::Nri || f.pod_resources_given) && has_pod_level(f.pod_level);
}

// The pod as it is and as it would be: the siblings keep what they are
// allocated. Only what admission reads of each sibling, not a copy of every
// container of the pod (its conditions, annotations, actual values), and
// the names only when pod-level values are checked.
ResizeManager::PodView ResizeManager::pod_view(const Flight& f) const {
  PodView v;
  const bool names = checks_pod_level(f);
  auto add = [&](const K8sResources& before, const K8sResources& after, const std::string& name) {
    v.before.push_back(before);
    v.after.push_back(after);
    if (names) v.named.push_back({name, after});
  };
  if (!f.pod_uid.empty()) {
    store_.for_each_container_of(f.pod_uid, [&](const Container& s) {
      const K8sResources& before = allocation(s);
      auto fi = std::find_if(f.items.begin(), f.items.end(), [&](const Item& i) { return i.c.id == s.id; });
      add(before, fi != f.items.end() ? fi->next : before, s.name.empty() ? s.id : s.name);
    });
  }
  if (v.before.empty())
    for (const auto& it : f.items) add(it.c.allocated, it.next, it.c.name.empty() ? it.c.id : it.c.name);
  return v;
}

// 3-5: what the kubelet decides before it allocates (pkg/kubelet/kubelet.go
// canResizePod): an invalid request is an error, one that can never fit is
// Infeasible, an increase that does not fit next to the other pods now is
// Deferred. Sets f.new_total, the pod cgroup's target.
Result<std::optional<ResizeManager::Pending>> ResizeManager::admit(Flight& f) {
  const PodView v = pod_view(f);
  auto shape = check_shape(f, v);
  if (!shape || *shape) return shape;
  // The pod cgroup as the kubelet derives it: the pod-level values where
  // set, the containers' aggregate otherwise (admission.h
  // pod_cgroup_target), so a container resize never rewrites pod-level
  // limits. Without pod-level values, what it held before is derived too.
  f.new_total = pod_cgroup_target(f.pod_level, v.after);
  const K8sResources old_total = pod_cgroup_target(f.pod ? f.pod->resources : K8sResources{}, v.before);
  if (!f.pod_resources_given) f.pod_before = old_total;
  return check_capacity(f, old_total);
}

Result<std::optional<ResizeManager::Pending>> ResizeManager::check_shape(const Flight& f, const PodView& v) const {
  if (checks_pod_level(f)) PODSHIM_TRY(validate_pod_level(f.pod_level, v.named));
  for (const auto& it : f.items) {
    if (it.removes)
      return Pending{kReasonInfeasible,
                     fmt::format("container '{}': resource requests and limits cannot be removed", it.c.id)};
  }
  // The QoS class follows from what is allocated now; the runtime's label on
  // the pod (if any) is not consulted because hook-registered pods lack one.
  const QosClass old_qos = compute_qos(v.before), new_qos = compute_qos(v.after);
  const bool any_allocated = std::any_of(v.before.begin(), v.before.end(), [](const K8sResources& r) {
    return r.cpu_request_milli || r.cpu_limit_milli || r.memory_request_bytes || r.memory_limit_bytes;
  });
  if ((f.pod || any_allocated) && new_qos != old_qos)
    return Pending{kReasonInfeasible, fmt::format("Pod QOS Class may not change as a result of resizing ({} -> {})",
                                                  to_string(old_qos), to_string(new_qos))};
  return std::optional<Pending>{};
}

// What every container outside this resize holds, summed as check_capacity
// counts it (allocation(): a running actuation's target, else allocated).
// From the store's kept sum of allocated requests, less this resize's own
// containers, with each running actuation's target in place of its
// container's allocated values: the cost is this pod's containers and the
// running actuations, not a pass over every container of the node (1000 map
// lookups per increase while shrinks run).
Store::Requests ResizeManager::others_requests(const Flight& f) const {
  Store::Requests r = store_.allocated_requests();
  auto take = [&r](const K8sResources& res, int sign) {
    r.cpu_milli += sign * effective_cpu_request(res);
    r.memory_bytes += sign * effective_memory_request(res);
  };
  auto own = [&f](const Container& c) { return !f.pod_uid.empty() ? c.pod_uid == f.pod_uid : f.ids.count(c.id) > 0; };
  if (!f.pod_uid.empty())
    store_.for_each_container_of(f.pod_uid, [&](const Container& c) { take(c.allocated, -1); });
  else
    for (const auto& id : f.ids) store_.with_container(id, [&](const Container& c) { take(c.allocated, -1); });
  for (const auto& entry : running_) {
    const K8sResources& target = entry.second.target;  // not a structured binding: clang 14 cannot capture one
    store_.with_container(entry.first, [&](const Container& c) {
      if (own(c)) return;
      take(c.allocated, -1);
      take(target, +1);
    });
  }
  return r;
}

// Whether the pod cgroup's new target (f.new_total, from `old_total`) fits
// the kernel's limits and the node.
Result<std::optional<ResizeManager::Pending>> ResizeManager::check_capacity(const Flight& f,
                                                                            const K8sResources& old_total) const {
  if (f.pod)
    if (auto k = cgroup::check_kernel_limits(f.new_total); !k)
      return Unexpected(std::move(k).error().wrap(fmt::format("pod '{}' cgroup", f.pod_uid)));
  const int64_t cpu_need = effective_cpu_request(f.new_total), mem_need = effective_memory_request(f.new_total);
  if (mem_need > allocatable_.memory_bytes || cpu_need > allocatable_.cpu_milli) {
    const bool mem = mem_need > allocatable_.memory_bytes;
    // The kubelet's wording (pkg/kubelet/kubelet.go canResizePod).
    return Pending{kReasonInfeasible, fmt::format("Node didn't have enough capacity: {}, requested: {}, capacity: {}",
                                                  mem ? "memory" : "cpu", mem ? mem_need : cpu_need,
                                                  mem ? allocatable_.memory_bytes : allocatable_.cpu_milli)};
  }
  // Decreases are always admitted.
  if (cpu_need <= effective_cpu_request(old_total) && mem_need <= effective_memory_request(old_total)) return std::optional<Pending>{};
  // What the others hold is at most every container's allocated requests
  // plus every running actuation's target (both kept as sums): when the
  // increase fits next to that, it fits, at no cost per container or per
  // running actuation (while shrinks settle, hundreds run at once).
  const Store::Requests all = store_.allocated_requests();
  if (all.cpu_milli + running_requests_.cpu_milli + cpu_need <= allocatable_.cpu_milli &&
      all.memory_bytes + running_requests_.memory_bytes + mem_need <= allocatable_.memory_bytes)
    return std::optional<Pending>{};
  // An increase that does not fit next to what the other pods hold (their
  // allocated requests, or a running actuation's target) waits.
  const Store::Requests others = others_requests(f);
  const int64_t cpu_used = others.cpu_milli, mem_used = others.memory_bytes;
  const bool mem = mem_need > effective_memory_request(old_total) && mem_used + mem_need > allocatable_.memory_bytes;
  const bool cpu = cpu_need > effective_cpu_request(old_total) && cpu_used + cpu_need > allocatable_.cpu_milli;
  if (!mem && !cpu) return std::optional<Pending>{};
  return Pending{kReasonDeferred, fmt::format("Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
                                              mem ? "memory" : "cpu", mem ? mem_need : cpu_need,
                                              mem ? mem_used : cpu_used,
                                              mem ? allocatable_.memory_bytes : allocatable_.cpu_milli)};
}

// 6. Admitted: allocate. A changed resource whose policy is RestartContainer
// makes the container restart-required; RestartContainer wins when cpu and
// memory disagree (KEP-1287 §Container Resize Policy). The runtime's updates
// are already the kubelet's decision: applied as is.
Result<Actuation> ResizeManager::allocate(Flight& f) {
  Actuation act;
  act.source = f.source;
  for (auto& it : f.items) {
    it.c.conditions.pending.reset();
    auto target = allocate_container(f, it);
    if (!target) return Unexpected(std::move(target).error());
    if (*target) act.plan.containers.push_back(std::move(**target));
  }
  const bool pod_changes =
      f.origin.admits ? f.pod && !f.pod->cgroup_path.empty() &&
                            (f.pod_resources_given ? (cpu_differs(f.pod->resources, f.pod_level) ||
                                                      mem_differs(f.pod->resources, f.pod_level))
                                                   : !act.plan.containers.empty())
                      : f.pod_resources_given && !f.pod_cgroup_path.empty();
  if (pod_changes) {
    act.plan.pod = cgroup::ResizeTarget{f.pod_uid, f.pod_cgroup_path, f.new_total};
    if (f.pod_resources_given) f.pod_resources = f.pod_level;
    f.pod_planned = true;
    if (f.origin.admits || cpu_differs(f.pod_before, f.new_total) || mem_differs(f.pod_before, f.new_total))
      f.any_change = true;
  }
  if (f.pod_resources_given && f.pod) {
    // The pod-level values are the new spec whatever the actuation says.
    // ENOENT: the pod was removed meanwhile, and there is nothing to record.
    if (auto r = store_.update_pod(f.pod_uid, [&](Pod& p) { p.resources = f.pod_level; });
        !r && r.error().code != ENOENT)
      log::warn("storing pod {}: {}", f.pod_uid, r.error().message);
  }
  return act;
}

// One container of step 6: its target for the engine, or nullopt when
// nothing is written (unchanged, joining a running actuation, restart
// required, or a runtime's container without a cgroup yet).
Result<std::optional<cgroup::ResizeTarget>> ResizeManager::allocate_container(Flight& f, Item& it) {
  const std::optional<cgroup::ResizeTarget> none;
  bool cpu_changed = cpu_differs(it.c.allocated, it.next);
  bool mem_changed = mem_differs(it.c.allocated, it.next);
  // Registered resources have no resizePolicy of their own: NotRequired.
  bool extra_changed = it.c.allocated.extra != it.next.extra;
  if (f.origin.admits && !cpu_changed && !mem_changed && !extra_changed) {
    if (running_.count(it.c.id)) {
      // What a running actuation will leave: its outcome is this one's (the
      // container keeps last_outcome "in_progress" until it lands).
      f.joins_running = true;
      return none;
    }
    // The values of an actuation that failed or was refused are allocated
    // but not in the kernel: asked for again, they are actuated again (the
    // kubelet retries while allocated and actuated differ), not "unchanged".
    if (it.c.actuated && !it.c.restart_required) {
      cpu_changed = cpu_differs(*it.c.actuated, it.next);
      mem_changed = mem_differs(*it.c.actuated, it.next);
      extra_changed = it.c.actuated->extra != it.next.extra;
    }
    if (!cpu_changed && !mem_changed && !extra_changed) {
      it.c.conditions.in_progress.reset();
      it.c.last_outcome = "unchanged";
      return none;
    }
  }
  if (cpu_changed || mem_changed || extra_changed) f.any_change = true;
  it.c.allocated = it.next;
  if (f.origin.admits && ((cpu_changed && it.cpu_policy == ResizePolicy::RestartContainer) ||
                          (mem_changed && it.memory_policy == ResizePolicy::RestartContainer))) {
    f.any_restart = true;
    it.c.restart_required = true;
    it.c.last_outcome = "restart_required";
    // Nothing is actuated: the kernel keeps the values before until the
    // container's owner restarts it. podshim never restarts a container, so
    // no PodResizeInProgress stands for it (that would count as in progress
    // for ever); restartRequired says what waits.
    if (!it.c.actuated) it.c.actuated = it.before;
    if (*it.c.actuated == it.c.allocated) it.c.actuated.reset();
    it.c.conditions.in_progress.reset();
    return none;
  }
  if (it.c.cgroup_path.empty()) {
    // A runtime's container with no cgroup (yet): the runtime's write is all there is.
    if (!f.origin.admits) return none;
    return fail(EINVAL, "container '{}' has no cgroup path to resize", it.c.id);
  }
  it.actuated = true;
  return std::optional(cgroup::ResizeTarget{it.c.id, it.c.cgroup_path, it.next});
}

// Hands the plan to the actuator. Its completion may come at once (then
// finish() has run when apply() returns) or later, from the loop: then the
// containers are stored as in progress meanwhile.
void ResizeManager::launch(const std::shared_ptr<Flight>& f, Actuation act) {
  f->inline_phase = true;
  if (act.plan.containers.empty() && !act.plan.pod) return finish(f, cgroup::ResizeReport{});
  f->actuation_start = std::chrono::steady_clock::now();
  actuator_.apply(act, [this, f](Result<cgroup::ResizeReport> rep) { finish(f, std::move(rep)); });
  if (f->finished) return;
  f->inline_phase = false;
  for (auto& it : f->items) {
    Container stored = it.c;
    if (it.actuated) {
      Running& r = running_[it.c.id];
      set_running_target(r, it.next);
      r.count++;
      // Allocated when the actuation has run (it sees the values before).
      stored.allocated = it.before;
      stored.last_outcome = "in_progress";
      // The one time PodResizeInProgress has no reason: while this actuation
      // runs (KEP-1287 §Resize Status). finish() replaces it.
      stored.conditions.in_progress = Condition{"", kInProgressMessage, it.c.generation, f->now};
    }
    if (auto r = store_.upsert_container(stored); !r) log::warn("storing container {}: {}", it.c.id, r.error().message);
  }
}

void ResizeManager::finish(std::shared_ptr<Flight> f, Result<cgroup::ResizeReport> rep) {
  f->finished = true;
  // The outcome, decided once: the answer and the record both read it.
  if (rep) {
    f->result.report = *rep;
    std::tie(f->result.outcome, f->result.message) = applied_outcome(*f, *rep);
  } else {
    f->result.outcome = ResizeOutcome::Error;
    f->result.message = rep.error().message;
  }
  if (f->origin.answers_first) answer(*f);
  if (on_actuation_ && f->actuation_start) report_actuation(*f, rep);
  if (!f->inline_phase) {  // it was counted as running when submit() returned
    for (const auto& it : f->items) {
      if (!it.actuated) continue;
      auto r = running_.find(it.c.id);
      if (r != running_.end() && --r->second.count <= 0) {
        set_running_target(r->second, {});
        running_.erase(r);
      }
    }
  } else {
    // The containers not actuated are stored as admitted.
    for (auto& it : f->items)
      if (!it.actuated) store_item(it);
  }
  if (!rep) return finish_failed(*f, rep.error());
  finish_applied(*f, *rep);
}

void ResizeManager::report_actuation(const Flight& f, const Result<cgroup::ResizeReport>& rep) const {
  ActuationRecord r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - *f.actuation_start).count();
  const bool refused = !rep && rep.error().kind == ErrorKind::ShrinkRefused;
  for (const auto& it : f.items) {
    if (!it.actuated) continue;
    r.container_id = it.c.id;
    const auto &was = it.before.memory_limit_bytes, &next = it.next.memory_limit_bytes;
    r.shrink_refused = refused && was && next && *next < *was;
    on_actuation_(r);
  }
}

// The state in hand is moved into the store, not copied (a container is a
// few hundred bytes of strings and maps, once per UpdateContainer): after
// this only record() reads an item's container, and only its id.
void ResizeManager::store_item(Item& it) {
  std::string id = it.c.id;
  if (auto r = store_.upsert_container(std::move(it.c)); !r) log::warn("storing container {}: {}", id, r.error().message);
  it.c.id = std::move(id);
}

// Applies `fn` to the container: to the state in hand when the actuation
// completed inside submit() (one store write per resize), else to the stored
// one (it may have changed meanwhile; gone: nothing to record).
void ResizeManager::change_item(Flight& f, Item& it, const std::function<void(Container&)>& fn) {
  if (f.inline_phase) {
    fn(it.c);
    return store_item(it);
  }
  // ENOENT: the container was removed while it resized; nothing to record.
  if (auto r = store_.update_container(it.c.id, fn); !r && r.error().code != ENOENT)
    log::warn("storing container {}: {}", it.c.id, r.error().message);
}

void ResizeManager::finish_failed(Flight& f, const Error& e) {
  if (metrics_ && e.kind == ErrorKind::ShrinkRefused) {
    metrics_->shrinks_refused.inc();
    const auto* why = e.payload_as<cgroup::ShrinkRefusal>();
    metrics_->shrink_refusals.inc({{"why", std::string(why ? shrink_why_name(why->why) : "usage")}});
    if (why && (why->psi_some_avg10 > 0 || why->psi_full_avg10 > 0))
      observe_pressure(why->psi_some_avg10, why->psi_full_avg10);
  }
  const int64_t now = now_unix_ms();
  for (auto& it : f.items) {
    if (!it.actuated) continue;
    // Allocated stays at the new values: the kubelet allocates before it
    // actuates and retries actuation (KEP-1287 §Resource States). The kernel
    // keeps the values before (the engine rolls a failed write back; the
    // runtime does not write an update podshim refused): those are what
    // read-back judges drift against, so the refusal shows as
    // PodResizeInProgress/Error and not as drift.
    change_item(f, it, [&](Container& c) {
      if (!c.actuated) c.actuated = it.before;
      c.allocated = it.next;
      if (*c.actuated == c.allocated) c.actuated.reset();
      c.conditions.in_progress = Condition{std::string(kReasonError), e.message, c.generation, now};
      c.last_error = e.message;
      c.last_outcome = "error";
    });
  }
  conclude(f);
}

// PSI avg10 is a percent; the metric is a ratio (base unit).
void ResizeManager::observe_pressure(double some_avg10, double full_avg10) {
  metrics_->shrink_pressure.observe({{"kind", "some"}}, some_avg10 / 100);
  metrics_->shrink_pressure.observe({{"kind", "full"}}, full_avg10 / 100);
}

void ResizeManager::finish_applied(Flight& f, const cgroup::ResizeReport& rep) {
  if (metrics_ && rep.bytes_reclaimed) metrics_->bytes_reclaimed.inc({}, static_cast<double>(rep.bytes_reclaimed));
  // A staged shrink watched the cgroup under its clamp: what it saw.
  if (metrics_ && (rep.psi_some_avg10 > 0 || rep.psi_full_avg10 > 0 || rep.bytes_reclaimed))
    observe_pressure(rep.psi_some_avg10, rep.psi_full_avg10);
  // memory.events over the operation and its settle period: a kill makes the
  // outcome AppliedWithOomKill. They count nothing: kills are counted where a
  // container's oom_kill is read (set_actual, shim/core/oom_kills.h).
  const bool killed = f.result.outcome == ResizeOutcome::AppliedWithOomKill;
  const std::string& kill_msg = f.result.message;
  const int64_t now = now_unix_ms();
  for (auto& it : f.items) {
    if (!it.actuated) continue;
    const std::optional<cgroup::Actual> a = f.origin.reads_back ? read_after(rep, it.c.id, it.c.cgroup_path) : std::nullopt;
    uint64_t oom_kills = 0;
    change_item(f, it, [&](Container& c) {
      c.allocated = it.next;
      c.actuated.reset();  // the kernel has the allocated values now
      if (!killed) {
        c.conditions.in_progress.reset();
        c.last_error.clear();
        c.last_outcome = f.any_restart ? "restart_required" : "applied";
      } else {
        c.conditions.in_progress = Condition{std::string(kReasonError), kill_msg, c.generation, now};
        c.last_error = kill_msg;
        c.last_outcome = std::string(to_string(ResizeOutcome::AppliedWithOomKill));
      }
      c.restart_required = false;
      if (a) oom_kills = set_actual(c, to_actual(*a, c.allocated.cpu_request_milli));
    });
    count_oom_kills(store_, metrics_, f.pod_uid, oom_kills);
  }
  if (f.pod_planned && f.pod) {
    auto stored = store_.update_pod(f.pod_uid, [&](Pod& p) {
      if (f.pod_resources) p.resources = *f.pod_resources;
      if (!f.origin.reads_back) return;
      if (auto a = read_after(rep, f.pod_uid, p.cgroup_path)) set_pod_actual(p, to_actual(*a, std::nullopt));
    });
    // ENOENT: the pod was removed while it resized; nothing to record.
    if (!stored && stored.error().code != ENOENT) log::warn("storing pod {}: {}", f.pod_uid, stored.error().message);
  }
  conclude(f);
}

std::pair<ResizeOutcome, std::string> ResizeManager::applied_outcome(const Flight& f,
                                                                    const cgroup::ResizeReport& rep) const {
  std::string kills;
  for (const auto& [id, ev] : rep.events)
    if (ev.oom_kill) kills += fmt::format("{}{} in {}", kills.empty() ? "" : ", ", ev.oom_kill, id);
  if (!kills.empty())
    return {ResizeOutcome::AppliedWithOomKill,
            fmt::format("resize applied, but the kernel OOM-killed during it (memory.events oom_kill: {})", kills)};
  if (f.any_restart)
    return {ResizeOutcome::RestartRequired, "resize requires a container restart; podshim does not restart containers"};
  if (f.joins_running && !f.any_change) return {ResizeOutcome::InProgress, kInProgressMessage};
  return {f.any_change ? ResizeOutcome::Applied : ResizeOutcome::Unchanged, {}};
}

// What a cgroup holds after the actuation: the engine's own read at the end
// of its write, else a read now.
std::optional<cgroup::Actual> ResizeManager::read_after(const cgroup::ResizeReport& rep, const std::string& key,
                                                        const std::string& cgroup_path) {
  if (auto w = rep.after.find(key); w != rep.after.end()) return w->second;
  if (auto a = actuator_.read_actual(cgroup_path)) return *a;
  return std::nullopt;
}

void ResizeManager::set_running_target(Running& r, const K8sResources& target) {
  running_requests_.cpu_milli += effective_cpu_request(target) - effective_cpu_request(r.target);
  running_requests_.memory_bytes += effective_memory_request(target) - effective_memory_request(r.target);
  r.target = target;
}

const K8sResources& ResizeManager::allocation(const Container& c) const {
  if (running_.empty()) return c.allocated;
  auto r = running_.find(c.id);
  return r != running_.end() ? r->second.target : c.allocated;
}

void ResizeManager::retry_deferred() {
  std::map<std::string, std::vector<ContainerResize>> by_pod;
  store_.for_each_container([&](const Container& c) {
    if (c.conditions.pending && c.conditions.pending->reason == kReasonDeferred) {
      ContainerResize r;
      r.container_id = c.id;
      r.resources = c.desired;
      by_pod[c.pod_uid].push_back(std::move(r));
    }
  });
  for (auto& [uid, reqs] : by_pod) {
    ResizeIntent in;
    in.pod_uid = uid;
    in.containers = std::move(reqs);
    in.bump_generation = false;
    submit(std::move(in), [](Result<ResizeResult>) {});
  }
}

}  // namespace podshim::core
