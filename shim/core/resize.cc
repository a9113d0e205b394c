#include "shim/core/resize.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "shim/core/admission.h"
#include "shim/core/metrics.h"
#include "shim/core/oom_kills.h"

namespace podshim::core {

namespace {

using std::optional;

// The request the scheduler and the kubelet count: request, or the limit when
// only a limit is set (apiserver defaulting).
int64_t eff_cpu_req(const K8sResources& r) {
  return r.cpu_request_milli ? *r.cpu_request_milli : r.cpu_limit_milli.value_or(0);
}
int64_t eff_mem_req(const K8sResources& r) {
  return r.memory_request_bytes ? *r.memory_request_bytes : r.memory_limit_bytes.value_or(0);
}

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
  return base;
}

// Messages without the subject; the caller names it, on a refusal only, so a
// valid request formats nothing.
Result<void> validate(const K8sResources& r) {
  for (auto v : {r.cpu_request_milli, r.cpu_limit_milli, r.memory_request_bytes, r.memory_limit_bytes}) {
    if (v && *v < 0) return fail(EINVAL, "negative resource value {}", *v);
  }
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

// What the engine read at the end of its write, as the container's (or
// pod's) actual; `target` is what the cgroup was given, for the CPU request
// rule that the periodic read-back applies too (held_cpu_request).
ActualResources to_actual(const cgroup::Actual& a, std::optional<int64_t> target_cpu_request) {
  ActualResources out;
  out.resources.cpu_request_milli = a.cpu_request_milli;
  if (a.cpu_weight) out.resources.cpu_request_milli = cgroup::held_cpu_request(*a.cpu_weight, target_cpu_request, a.formula);
  out.resources.cpu_limit_milli = a.cpu_limit_milli;
  out.resources.memory_limit_bytes = a.memory_limit_bytes;
  out.memory_current = a.memory_current;
  out.oom_kill = a.oom_kill;
  out.read_unix_ms = now_unix_ms();
  return out;
}

}  // namespace

std::string_view to_string(ResizeOutcome o) {
  switch (o) {
    case ResizeOutcome::Applied: return "applied";
    case ResizeOutcome::Unchanged: return "unchanged";
    case ResizeOutcome::Deferred: return "deferred";
    case ResizeOutcome::Infeasible: return "infeasible";
    case ResizeOutcome::RestartRequired: return "restart_required";
    case ResizeOutcome::Error: return "error";
    case ResizeOutcome::AppliedWithOomKill: return "applied_with_oom_kill";
    case ResizeOutcome::InProgress: return "in_progress";
  }
  return "error";
}

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

std::string_view to_string(IntentSource s) {
  switch (s) {
    case IntentSource::Api: return "api";
    case IntentSource::NriUpdateContainer: return "nri-update-container";
    case IntentSource::NriUpdatePodSandbox: return "nri-update-pod-sandbox";
  }
  return "api";
}

namespace {

// One container of a resize as it moves through the service.
struct Item {
  Container c;          // state at admission, with the new generation
  K8sResources before;  // allocated before this resize
  K8sResources next;    // new desired
  ResizePolicy cpu_policy, memory_policy;
  bool removes = false;
  bool actuated = false;
};

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

struct ResizeManager::Flight {
  IntentSource source = IntentSource::Api;
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
  K8sResources pod_target;                    // what the pod cgroup is given
  K8sResources pod_before;
  std::string pod_cgroup_path;
  bool pod_planned = false;
  std::vector<Item> items;
  ResizeResult result;
  bool any_restart = false, any_change = false;
  // An item asked for what an actuation still running will leave: the
  // outcome is that one's (InProgress), not Unchanged.
  bool joins_running = false;
  // Set while the actuator runs inside submit(): a completion then has the
  // items' state in hand and stores each container once.
  bool inline_phase = false, finished = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
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

void ResizeManager::record(const Flight& f, const Result<ResizeResult>& r) {
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
  const std::string reason = r ? r->message : r.error().message;
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
            fmt_res(f.pod_planned ? f.pod_target : f.pod_resources.value_or(K8sResources{})), reclaimed, ms,
            reason.empty() ? "" : ": ", reason);
  }
}

void ResizeManager::submit(ResizeIntent intent, Done done) {
  auto f = std::make_shared<Flight>();
  f->source = intent.source;
  f->pod_uid = intent.pod_uid;
  f->done = std::move(done);
  const bool from_runtime = intent.source != IntentSource::Api;
  auto reject = [&](Error e) {
    Result<ResizeResult> r = Unexpected(std::move(e));
    record(*f, r);
    f->done(std::move(r));
  };
  auto outcome = [&](ResizeOutcome o, std::string msg) {
    f->result.outcome = o;
    f->result.message = std::move(msg);
    Result<ResizeResult> r = f->result;
    record(*f, r);
    f->done(std::move(r));
  };

  // 0. The request itself.
  if (!intent.pod_uid.empty()) {
    if (auto v = validate_id("pod uid", intent.pod_uid); !v) return reject(v.error());
  }
  if (intent.source == IntentSource::Api && !intent.pod_resources && intent.containers.empty())
    return reject(Error{EINVAL, "nothing to resize"});

  // 1. Plan: the new spec of every container in the request, validated.
  std::set<std::string> seen;
  for (const auto& r : intent.containers) {
    if (!seen.insert(r.container_id).second)
      return reject(Error{EINVAL, fmt::format("container '{}' appears twice in one resize", r.container_id)});
    auto c = store_.container(r.container_id);
    if (!c) return reject(Error{ENOENT, fmt::format("no container '{}'", r.container_id)});
    if (!intent.pod_uid.empty() && c->pod_uid != intent.pod_uid)
      return reject(Error{EINVAL, fmt::format("container '{}' belongs to pod '{}', not '{}'", r.container_id,
                                              c->pod_uid, intent.pod_uid)});
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
    if (!v) return reject(std::move(v).error().wrap(fmt::format("container '{}'", it.c.id)));
    // Removing a request or limit that is allocated can never be honoured.
    const auto& a = it.before;
    it.removes = (a.cpu_request_milli && !it.next.cpu_request_milli) ||
                 (a.cpu_limit_milli && !it.next.cpu_limit_milli) ||
                 (a.memory_request_bytes && !it.next.memory_request_bytes) ||
                 (a.memory_limit_bytes && !it.next.memory_limit_bytes);
    f->items.push_back(std::move(it));
  }
  const std::string& pod_uid = intent.pod_uid;
  if (!pod_uid.empty()) {
    store_.with_pod(pod_uid, [&](const Pod& p) { f->pod.emplace(Flight::PodFacts{p.resources, p.cgroup_path, p.source}); });
  }
  if (f->pod) f->pod_before = f->pod->resources;
  f->pod_cgroup_path = !intent.pod_cgroup_path.empty() ? intent.pod_cgroup_path
                       : f->pod                        ? f->pod->cgroup_path
                                                       : std::string();
  if (intent.pod_resources) {
    if (auto v = validate(*intent.pod_resources); !v)
      return reject(std::move(v).error().wrap(fmt::format("pod '{}'", pod_uid)));
    if (!from_runtime) {
      if (!f->pod) return reject(Error{ENOENT, fmt::format("no pod '{}' known with a cgroup to resize", pod_uid)});
      if (f->pod->cgroup_path.empty())
        return reject(Error{EINVAL, fmt::format("pod '{}' has no cgroup path to resize", pod_uid)});
    }
    if (auto v = cgroup::check_kernel_limits(*intent.pod_resources); !v)
      return reject(std::move(v).error().wrap(fmt::format("pod '{}'", pod_uid)));
  }
  // The pod-level resources after an API request; values not given keep
  // theirs. A runtime's UpdatePodSandbox carries the whole sandbox spec.
  K8sResources pod_level = f->pod ? f->pod->resources : K8sResources{};
  if (intent.pod_resources) pod_level = from_runtime ? *intent.pod_resources : merge(pod_level, *intent.pod_resources, {});
  auto& items = f->items;

  // 2. Generation: every request is a new generation of each container's spec,
  // recorded with the new desired values whatever the outcome.
  for (auto& it : items) {
    if (intent.bump_generation) it.c.generation++;
    it.c.desired = it.next;
    it.c.cpu_policy = it.cpu_policy;
    it.c.memory_policy = it.memory_policy;
    f->result.generations[it.c.id] = it.c.generation;
  }

  auto set_pending = [&](std::string_view reason, const std::string& msg) {
    for (auto& it : items) {
      auto& p = it.c.conditions.pending;
      if (!p || p->reason != reason) p = Condition{std::string(reason), msg, it.c.generation, f->now};
      p->message = msg;
      p->observed_generation = it.c.generation;
      it.c.last_outcome = std::string(reason == kReasonDeferred ? "deferred" : "infeasible");
      if (auto r = store_.upsert_container(it.c); !r) log::warn("storing container {}: {}", it.c.id, r.error().message);
    }
  };

  K8sResources new_total;
  if (!from_runtime) {
    // 3. The pod as it would be: siblings keep their allocated resources.
    // Only what admission reads of each sibling, not a copy of every
    // container of the pod (its conditions, annotations, actual values).
    std::vector<K8sResources> old_pod, new_pod;
    std::vector<NamedResources> new_named;
    if (!pod_uid.empty()) {
      store_.for_each_container_of(pod_uid, [&](const Container& s) {
        old_pod.push_back(allocation(s));
        auto fi = std::find_if(items.begin(), items.end(), [&](const Item& i) { return i.c.id == s.id; });
        new_pod.push_back(fi != items.end() ? fi->next : old_pod.back());
        new_named.push_back({s.name.empty() ? s.id : s.name, new_pod.back()});
      });
    }
    if (old_pod.empty()) {
      for (const auto& it : items) {
        old_pod.push_back(it.c.allocated);
        new_pod.push_back(it.next);
        new_named.push_back({it.c.name.empty() ? it.c.id : it.c.name, it.next});
      }
    }
    // What the apiserver refuses for pod-level resources (a container limit
    // above the pod's, requests adding up to more than the pod's) is an
    // invalid request (Kubernetes pkg/apis/core/validation/validation.go),
    // refused before anything is recorded. A pod learned over NRI carries the runtime's sandbox totals (CRI
    // LinuxPodSandboxConfig.resources, "the sum of container resources"), not
    // necessarily a pod-level spec: only pod-level values podshim was given
    // are validated as such.
    if (f->pod && (f->pod->source != Source::Nri || intent.pod_resources))
      if (auto v = validate_pod_level(pod_level, new_named); !v) return reject(v.error());

    // 4. Infeasible: removals, QoS change, more than the node has.
    for (const auto& it : items) {
      if (it.removes) {
        auto msg = fmt::format("container '{}': resource requests and limits cannot be removed", it.c.id);
        set_pending(kReasonInfeasible, msg);
        return outcome(ResizeOutcome::Infeasible, msg);
      }
    }
    // The QoS class follows from what is allocated now; the runtime's label on
    // the pod (if any) is not consulted because hook-registered pods lack one.
    QosClass old_qos = compute_qos(old_pod);
    QosClass new_qos = compute_qos(new_pod);
    bool any_allocated = std::any_of(old_pod.begin(), old_pod.end(), [](const K8sResources& r) {
      return r.cpu_request_milli || r.cpu_limit_milli || r.memory_request_bytes || r.memory_limit_bytes;
    });
    if ((f->pod || any_allocated) && new_qos != old_qos) {
      auto msg = fmt::format("Pod QOS Class may not change as a result of resizing ({} -> {})", to_string(old_qos),
                             to_string(new_qos));
      set_pending(kReasonInfeasible, msg);
      return outcome(ResizeOutcome::Infeasible, msg);
    }
    // The pod cgroup as the kubelet derives it: the pod-level values where
    // set, the containers' aggregate otherwise (admission.h
    // pod_cgroup_target), so a container resize never rewrites pod-level
    // limits.
    new_total = pod_cgroup_target(pod_level, new_pod);
    K8sResources old_total = pod_cgroup_target(f->pod ? f->pod->resources : K8sResources{}, old_pod);
    if (f->pod)
      if (auto v = cgroup::check_kernel_limits(new_total); !v)
        return reject(std::move(v).error().wrap(fmt::format("pod '{}' cgroup", pod_uid)));
    if (!intent.pod_resources) f->pod_before = old_total;
    const int64_t cpu_need = eff_cpu_req(new_total), mem_need = eff_mem_req(new_total);
    if (mem_need > allocatable_.memory_bytes || cpu_need > allocatable_.cpu_milli) {
      bool mem = mem_need > allocatable_.memory_bytes;
      // The kubelet's wording (pkg/kubelet/kubelet.go canResizePod).
      auto msg = fmt::format("Node didn't have enough capacity: {}, requested: {}, capacity: {}",
                             mem ? "memory" : "cpu", mem ? mem_need : cpu_need,
                             mem ? allocatable_.memory_bytes : allocatable_.cpu_milli);
      set_pending(kReasonInfeasible, msg);
      return outcome(ResizeOutcome::Infeasible, msg);
    }

    // 5. Deferred: an increase that does not fit next to what the other pods
    // hold (their allocated requests). Decreases are always admitted.
    if (cpu_need > eff_cpu_req(old_total) || mem_need > eff_mem_req(old_total)) {
      int64_t cpu_used = 0, mem_used = 0;
      store_.for_each_container([&](const Container& c) {
        if (c.pod_uid == pod_uid && !pod_uid.empty()) return;
        if (pod_uid.empty() && seen.count(c.id)) return;
        cpu_used += eff_cpu_req(allocation(c));
        mem_used += eff_mem_req(allocation(c));
      });
      bool mem = mem_need > eff_mem_req(old_total) && mem_used + mem_need > allocatable_.memory_bytes;
      bool cpu = cpu_need > eff_cpu_req(old_total) && cpu_used + cpu_need > allocatable_.cpu_milli;
      if (mem || cpu) {
        auto msg = fmt::format("Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
                               mem ? "memory" : "cpu", mem ? mem_need : cpu_need, mem ? mem_used : cpu_used,
                               mem ? allocatable_.memory_bytes : allocatable_.cpu_milli);
        set_pending(kReasonDeferred, msg);
        return outcome(ResizeOutcome::Deferred, msg);
      }
    }
  } else if (intent.pod_resources) {
    new_total = *intent.pod_resources;
  }

  // 6. Admitted: allocate. A changed resource whose policy is
  // RestartContainer makes the container restart-required; RestartContainer
  // wins when cpu and memory disagree (KEP-1287 §Container Resize Policy).
  // The runtime's updates are already the kubelet's decision: applied as is.
  Actuation act;
  act.source = intent.source;
  for (auto& it : items) {
    it.c.conditions.pending.reset();
    bool cpu_changed = cpu_differs(it.c.allocated, it.next);
    bool mem_changed = mem_differs(it.c.allocated, it.next);
    // The values of an actuation that failed or was refused are allocated
    // but not in the kernel: asked for again, they are actuated again (the
    // kubelet retries while allocated and actuated differ), not "unchanged".
    const bool retry = !from_runtime && !cpu_changed && !mem_changed && it.c.actuated &&
                       !it.c.restart_required && !running_.count(it.c.id);
    if (retry) {
      cpu_changed = cpu_differs(*it.c.actuated, it.next);
      mem_changed = mem_differs(*it.c.actuated, it.next);
    }
    if (!from_runtime && !cpu_changed && !mem_changed) {
      if (running_.count(it.c.id)) {
        // What a running actuation will leave: its outcome is this one's
        // (the container keeps last_outcome "in_progress" until it lands).
        f->joins_running = true;
        continue;
      }
      it.c.conditions.in_progress.reset();
      it.c.last_outcome = "unchanged";
      continue;
    }
    if (cpu_changed || mem_changed) f->any_change = true;
    it.c.allocated = it.next;
    if (!from_runtime && ((cpu_changed && it.cpu_policy == ResizePolicy::RestartContainer) ||
                          (mem_changed && it.memory_policy == ResizePolicy::RestartContainer))) {
      f->any_restart = true;
      it.c.restart_required = true;
      it.c.last_outcome = "restart_required";
      // Nothing is actuated: the kernel keeps the values before until the
      // container's owner restarts it. podshim never restarts a container,
      // so no PodResizeInProgress stands for it (that would count as in
      // progress for ever); restartRequired says what waits.
      if (!it.c.actuated) it.c.actuated = it.before;
      if (*it.c.actuated == it.c.allocated) it.c.actuated.reset();
      it.c.conditions.in_progress.reset();
      continue;
    }
    if (it.c.cgroup_path.empty()) {
      if (from_runtime) continue;  // no cgroup (yet): the runtime's write is all there is
      return reject(Error{EINVAL, fmt::format("container '{}' has no cgroup path to resize", it.c.id)});
    }
    act.plan.containers.push_back(cgroup::ResizeTarget{it.c.id, it.c.cgroup_path, it.next});
    it.actuated = true;
  }
  bool pod_changes = false;
  if (from_runtime) {
    pod_changes = intent.pod_resources && !f->pod_cgroup_path.empty();
  } else {
    pod_changes = f->pod && !f->pod->cgroup_path.empty() &&
                  (intent.pod_resources ? (cpu_differs(f->pod->resources, pod_level) ||
                                           mem_differs(f->pod->resources, pod_level))
                                        : !act.plan.containers.empty());
  }
  if (pod_changes) {
    act.plan.pod = cgroup::ResizeTarget{pod_uid, f->pod_cgroup_path, new_total};
    if (intent.pod_resources) f->pod_resources = pod_level;
    f->pod_target = new_total;
    f->pod_planned = true;
    if (!from_runtime || cpu_differs(f->pod_before, new_total) || mem_differs(f->pod_before, new_total))
      f->any_change = true;
  }
  if (intent.pod_resources && f->pod) {
    // The pod-level values are the new spec whatever the actuation says.
    // ENOENT: the pod was removed meanwhile, and there is nothing to record.
    if (auto r = store_.update_pod(pod_uid, [&](Pod& p) { p.resources = pod_level; }); !r && r.error().code != ENOENT)
      log::warn("storing pod {}: {}", pod_uid, r.error().message);
  }

  const bool actuate = !act.plan.containers.empty() || act.plan.pod;
  auto store_pending = [&] {
    for (auto& it : items) {
      Container stored = it.c;
      if (it.actuated) {
        // Allocated when the actuation has run (it sees the values before).
        stored.allocated = it.before;
        stored.last_outcome = "in_progress";
        // The one time PodResizeInProgress has no reason: while this
        // actuation runs (KEP-1287 §Resize Status). finish() replaces it.
        stored.conditions.in_progress = Condition{"", kInProgressMessage, it.c.generation, f->now};
      }
      if (auto r = store_.upsert_container(stored); !r)
        log::warn("storing container {}: {}", it.c.id, r.error().message);
    }
  };
  if (!actuate) {
    f->inline_phase = true;
    return finish(f, cgroup::ResizeReport{});
  }
  f->inline_phase = true;
  actuator_.apply(act, [this, f](Result<cgroup::ResizeReport> rep) { finish(f, std::move(rep)); });
  if (f->finished) return;
  f->inline_phase = false;
  for (const auto& it : items) {
    if (!it.actuated) continue;
    Running& r = running_[it.c.id];
    r.target = it.next;
    r.count++;
  }
  store_pending();  // completes later, from the loop
}

const K8sResources& ResizeManager::allocation(const Container& c) const {
  auto r = running_.find(c.id);
  return r != running_.end() ? r->second.target : c.allocated;
}

void ResizeManager::finish(std::shared_ptr<Flight> f, Result<cgroup::ResizeReport> rep) {
  f->finished = true;
  if (!f->inline_phase) {  // it was counted as running when submit() returned
    for (const auto& it : f->items) {
      if (!it.actuated) continue;
      auto r = running_.find(it.c.id);
      if (r != running_.end() && --r->second.count <= 0) running_.erase(r);
    }
  }
  // Applies `fn` to the container: to the state in hand when the actuation
  // completed inside submit() (one store write per resize), else to the
  // stored one (it may have changed meanwhile; gone: nothing to record).
  // The state in hand is moved into the store, not copied (a container is
  // a few hundred bytes of strings and maps, once per UpdateContainer):
  // after this only record() reads an item's container, and only its id.
  auto store_moved = [&](Item& it) {
    std::string id = it.c.id;
    if (auto r = store_.upsert_container(std::move(it.c)); !r) log::warn("storing container {}: {}", id, r.error().message);
    it.c.id = std::move(id);
  };
  auto change = [&](Item& it, const std::function<void(Container&)>& fn) {
    if (f->inline_phase) {
      fn(it.c);
      store_moved(it);
    } else if (auto r = store_.update_container(it.c.id, fn); !r && r.error().code != ENOENT) {
      // ENOENT: the container was removed while it resized; nothing to record.
      log::warn("storing container {}: {}", it.c.id, r.error().message);
    }
  };
  if (f->inline_phase) {
    // The containers not actuated are stored as admitted.
    for (auto& it : f->items)
      if (!it.actuated) store_moved(it);
  }
  auto& result = f->result;
  const int64_t now = now_unix_ms();
  const bool from_runtime = f->source != IntentSource::Api;
  if (!rep) {
    const Error& e = rep.error();
    const bool refused = e.kind == ErrorKind::ShrinkRefused;
    if (metrics_ && refused) {
      metrics_->shrinks_refused.inc();
      const auto* why = e.payload_as<cgroup::ShrinkRefusal>();
      metrics_->shrink_refusals.inc({{"why", std::string(why ? shrink_why_name(why->why) : "usage")}});
      if (why && (why->psi_some_avg10 > 0 || why->psi_full_avg10 > 0)) {
        // PSI avg10 is a percent; the metric is a ratio (base unit).
        metrics_->shrink_pressure.observe({{"kind", "some"}}, why->psi_some_avg10 / 100);
        metrics_->shrink_pressure.observe({{"kind", "full"}}, why->psi_full_avg10 / 100);
      }
    }
    for (auto& it : f->items) {
      if (!it.actuated) continue;
      // Allocated stays at the new values: the kubelet allocates before it
      // actuates and retries actuation (KEP-1287 §Resource States). The
      // kernel keeps the values before (the engine rolls a failed write
      // back; the runtime does not write an update podshim refused): those
      // are what read-back judges drift against, so the refusal shows as
      // PodResizeInProgress/Error and not as drift.
      change(it, [&](Container& c) {
        if (!c.actuated) c.actuated = it.before;
        c.allocated = it.next;
        if (*c.actuated == c.allocated) c.actuated.reset();
        c.conditions.in_progress = Condition{std::string(kReasonError), e.message, c.generation, now};
        c.last_error = e.message;
        c.last_outcome = "error";
      });
    }
    result.outcome = ResizeOutcome::Error;
    result.message = e.message;
    Result<ResizeResult> r = result;
    record(*f, r);
    return f->done(std::move(r));
  }
  result.report = *rep;
  if (metrics_ && rep->bytes_reclaimed) metrics_->bytes_reclaimed.inc({}, static_cast<double>(rep->bytes_reclaimed));
  if (metrics_ && (rep->psi_some_avg10 > 0 || rep->psi_full_avg10 > 0 || rep->bytes_reclaimed)) {
    // A staged shrink watched the cgroup under its clamp: what it saw.
    metrics_->shrink_pressure.observe({{"kind", "some"}}, rep->psi_some_avg10 / 100);
    metrics_->shrink_pressure.observe({{"kind", "full"}}, rep->psi_full_avg10 / 100);
  }
  // memory.events over the operation and its settle period: a kill makes
  // the outcome AppliedWithOomKill. They count nothing: kills are counted
  // where a container's oom_kill is read (set_actual, shim/core/oom_kills.h).
  std::string kills;
  for (const auto& [id, ev] : rep->events) {
    if (!ev.oom_kill) continue;
    kills += fmt::format("{}{} in {}", kills.empty() ? "" : ", ", ev.oom_kill, id);
  }
  const std::string kill_msg =
      kills.empty() ? std::string()
                    : fmt::format("resize applied, but the kernel OOM-killed during it (memory.events oom_kill: {})",
                                  kills);
  for (auto& it : f->items) {
    if (!it.actuated) continue;
    std::optional<cgroup::Actual> a;
    // The runtime writes after podshim answers it: read back at its
    // PostUpdateContainer instead (shim/adapter).
    if (!from_runtime) {
      if (auto w = rep->after.find(it.c.id); w != rep->after.end())
        a = w->second;  // read by the engine at the end of its write
      else if (auto ra = actuator_.read_actual(it.c.cgroup_path))
        a = *ra;
    }
    uint64_t oom_kills = 0;
    change(it, [&](Container& c) {
      c.allocated = it.next;
      c.actuated.reset();  // the kernel has the allocated values now
      if (kill_msg.empty()) {
        c.conditions.in_progress.reset();
        c.last_error.clear();
        c.last_outcome = f->any_restart ? "restart_required" : "applied";
      } else {
        c.conditions.in_progress = Condition{std::string(kReasonError), kill_msg, c.generation, now};
        c.last_error = kill_msg;
        c.last_outcome = std::string(to_string(ResizeOutcome::AppliedWithOomKill));
      }
      c.restart_required = false;
      if (a) oom_kills = set_actual(c, to_actual(*a, c.allocated.cpu_request_milli));
    });
    count_oom_kills(store_, metrics_, f->pod_uid, oom_kills);
  }
  if (f->pod_planned && f->pod) {
    auto stored = store_.update_pod(f->pod_uid, [&](Pod& p) {
      if (f->pod_resources) p.resources = *f->pod_resources;
      if (from_runtime) return;
      if (auto w = rep->after.find(f->pod_uid); w != rep->after.end())
        set_pod_actual(p, to_actual(w->second, std::nullopt));
      else if (auto a = actuator_.read_actual(p.cgroup_path))
        set_pod_actual(p, to_actual(*a, std::nullopt));
    });
    // ENOENT: the pod was removed while it resized; nothing to record.
    if (!stored && stored.error().code != ENOENT) log::warn("storing pod {}: {}", f->pod_uid, stored.error().message);
  }
  if (!kill_msg.empty()) {
    result.outcome = ResizeOutcome::AppliedWithOomKill;
    result.message = kill_msg;
  } else if (f->any_restart) {
    result.outcome = ResizeOutcome::RestartRequired;
    result.message = "resize requires a container restart; podshim does not restart containers";
  } else if (f->joins_running && !f->any_change) {
    result.outcome = ResizeOutcome::InProgress;
    result.message = kInProgressMessage;
  } else {
    result.outcome = f->any_change ? ResizeOutcome::Applied : ResizeOutcome::Unchanged;
  }
  Result<ResizeResult> r = result;
  record(*f, r);
  f->done(std::move(r));
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
