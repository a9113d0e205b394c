#include "shim/core/resize.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "base/fs.h"
#include "base/str.h"
#include "shim/core/admission.h"
#include "shim/core/metrics.h"

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

Result<void> validate(std::string_view what, const K8sResources& r) {
  for (auto v : {r.cpu_request_milli, r.cpu_limit_milli, r.memory_request_bytes, r.memory_limit_bytes}) {
    if (v && *v < 0) return fail(EINVAL, "{}: negative resource value {}", what, *v);
  }
  if (r.cpu_request_milli && r.cpu_limit_milli && *r.cpu_request_milli > *r.cpu_limit_milli) {
    return fail(EINVAL, "{}: cpu request ({}m) must be less than or equal to cpu limit ({}m)", what,
                *r.cpu_request_milli, *r.cpu_limit_milli);
  }
  if (r.memory_request_bytes && r.memory_limit_bytes && *r.memory_request_bytes > *r.memory_limit_bytes) {
    return fail(EINVAL, "{}: memory request ({}) must be less than or equal to memory limit ({})", what,
                *r.memory_request_bytes, *r.memory_limit_bytes);
  }
  return {};
}

ActualResources to_actual(const cgroup::Actual& a) {
  ActualResources out;
  out.resources.cpu_request_milli = a.cpu_request_milli;
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

ResizeManager::ResizeManager(Store& store, Actuator& actuator, NodeAllocatable allocatable,
                             Metrics* metrics)
    : store_(store), actuator_(actuator), allocatable_(allocatable), metrics_(metrics) {}

void ResizeManager::set_allocatable(NodeAllocatable a) { allocatable_ = a; }

Result<ResizeResult> ResizeManager::resize_container(const ContainerResize& req) {
  auto start = std::chrono::steady_clock::now();
  auto c = store_.container(req.container_id);
  Result<ResizeResult> r = c ? run(c->pod_uid, std::nullopt, {req}, true)
                             : Result<ResizeResult>(fail(ENOENT, "no container '{}'", req.container_id));
  if (metrics_) {
    metrics_->resize_requests.inc({{"result", r ? std::string(to_string(r->outcome)) : "invalid"}});
    metrics_->resize_latency.observe(
        {}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return r;
}

Result<ResizeResult> ResizeManager::resize_pod(const PodResize& req) {
  auto start = std::chrono::steady_clock::now();
  Result<ResizeResult> r = [&]() -> Result<ResizeResult> {
    PODSHIM_TRY(validate_id("pod uid", req.pod_uid));
    if (!store_.pod(req.pod_uid) && store_.containers_of(req.pod_uid).empty()) {
      return fail(ENOENT, "no pod '{}'", req.pod_uid);
    }
    for (const auto& cr : req.containers) {
      auto c = store_.container(cr.container_id);
      if (!c) return fail(ENOENT, "no container '{}'", cr.container_id);
      if (c->pod_uid != req.pod_uid) {
        return fail(EINVAL, "container '{}' belongs to pod '{}', not '{}'", cr.container_id, c->pod_uid,
                    req.pod_uid);
      }
    }
    return run(req.pod_uid, req.pod_resources, req.containers, true);
  }();
  if (metrics_) {
    metrics_->resize_requests.inc({{"result", r ? std::string(to_string(r->outcome)) : "invalid"}});
    metrics_->resize_latency.observe(
        {}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return r;
}

Result<ResizeResult> ResizeManager::run(const std::string& pod_uid, optional<K8sResources> pod_resources,
                                        const std::vector<ContainerResize>& reqs, bool bump_generation) {
  // 1. Plan: the new spec of every container in the request, validated.
  struct Item {
    Container c;        // current state
    K8sResources next;  // new desired
    ResizePolicy cpu_policy, memory_policy;
    bool removes = false;
  };
  std::vector<Item> items;
  std::set<std::string> seen;
  for (const auto& r : reqs) {
    if (!seen.insert(r.container_id).second) {
      return fail(EINVAL, "container '{}' appears twice in one resize", r.container_id);
    }
    auto c = store_.container(r.container_id);
    if (!c) return fail(ENOENT, "no container '{}'", r.container_id);
    Item it{*c, merge(c->desired, r.resources, r.remove), r.cpu_policy.value_or(c->cpu_policy),
            r.memory_policy.value_or(c->memory_policy), false};
    PODSHIM_TRY(validate(fmt::format("container '{}'", c->id), it.next));
    // Values the kernel would refuse are refused before anything is recorded (issue 17.5).
    PODSHIM_TRY(cgroup::check_kernel_limits(it.next, {}, fmt::format("container '{}'", c->id)));
    // Removing a request or limit that is allocated can never be honoured.
    const auto& a = c->allocated;
    it.removes = (a.cpu_request_milli && !it.next.cpu_request_milli) ||
                 (a.cpu_limit_milli && !it.next.cpu_limit_milli) ||
                 (a.memory_request_bytes && !it.next.memory_request_bytes) ||
                 (a.memory_limit_bytes && !it.next.memory_limit_bytes);
    items.push_back(std::move(it));
  }
  optional<Pod> pod = pod_uid.empty() ? std::nullopt : store_.pod(pod_uid);
  if (pod_resources) {
    PODSHIM_TRY(validate(fmt::format("pod '{}'", pod_uid), *pod_resources));
    if (!pod) return fail(ENOENT, "no pod '{}' known with a cgroup to resize", pod_uid);
    if (pod->cgroup_path.empty()) return fail(EINVAL, "pod '{}' has no cgroup path to resize", pod_uid);
    PODSHIM_TRY(cgroup::check_kernel_limits(*pod_resources, {}, fmt::format("pod '{}'", pod_uid)));
  }
  // The pod-level resources after this request; values not given keep theirs.
  K8sResources pod_level = pod ? pod->resources : K8sResources{};
  if (pod_resources) pod_level = merge(pod_level, *pod_resources, {});

  ResizeResult result;
  const int64_t now = now_unix_ms();

  // 2. Generation: every request is a new generation of each container's spec,
  // recorded with the new desired values whatever the outcome.
  for (auto& it : items) {
    if (bump_generation) it.c.generation++;
    it.c.desired = it.next;
    it.c.cpu_policy = it.cpu_policy;
    it.c.memory_policy = it.memory_policy;
    result.generations[it.c.id] = it.c.generation;
  }

  auto set_pending = [&](std::string_view reason, const std::string& msg) -> Result<void> {
    for (auto& it : items) {
      auto& p = it.c.conditions.pending;
      if (!p || p->reason != reason) p = Condition{std::string(reason), msg, it.c.generation, now};
      p->message = msg;
      p->observed_generation = it.c.generation;
      PODSHIM_TRY(store_.upsert_container(it.c));
    }
    return {};
  };

  // 3. The pod as it would be: siblings keep their allocated resources.
  auto siblings = pod_uid.empty() ? std::vector<Container>{} : store_.containers_of(pod_uid);
  std::vector<K8sResources> old_pod, new_pod;
  std::vector<NamedResources> new_named;
  for (const auto& s : siblings) {
    old_pod.push_back(s.allocated);
    auto f = std::find_if(items.begin(), items.end(), [&](const Item& i) { return i.c.id == s.id; });
    new_pod.push_back(f != items.end() ? f->next : s.allocated);
    new_named.push_back({s.name.empty() ? s.id : s.name, new_pod.back()});
  }
  if (siblings.empty()) {
    for (const auto& it : items) {
      old_pod.push_back(it.c.allocated);
      new_pod.push_back(it.next);
      new_named.push_back({it.c.name.empty() ? it.c.id : it.c.name, it.next});
    }
  }
  // What the apiserver refuses for pod-level resources (a container limit
  // above the pod's, requests adding up to more than the pod's) is an invalid
  // request, refused before anything is recorded (issue 17.4).
  // A pod learned over NRI carries the runtime's sandbox totals (CRI
  // LinuxPodSandboxConfig.resources, "the sum of container resources"), not
  // necessarily a pod-level spec: only pod-level values podshim was given are
  // validated as such.
  if (pod && (pod->source != Source::Nri || pod_resources)) PODSHIM_TRY(validate_pod_level(pod_level, new_named));

  // 4. Infeasible: removals, QoS change, more than the node has.
  for (const auto& it : items) {
    if (it.removes) {
      result.outcome = ResizeOutcome::Infeasible;
      result.message = fmt::format("container '{}': resource requests and limits cannot be removed", it.c.id);
      PODSHIM_TRY(set_pending(kReasonInfeasible, result.message));
      return result;
    }
  }
  // The QoS class follows from what is allocated now; the runtime's label on
  // the pod (if any) is not consulted because hook-registered pods lack one.
  QosClass old_qos = compute_qos(old_pod);
  QosClass new_qos = compute_qos(new_pod);
  bool any_allocated = std::any_of(old_pod.begin(), old_pod.end(), [](const K8sResources& r) {
    return r.cpu_request_milli || r.cpu_limit_milli || r.memory_request_bytes || r.memory_limit_bytes;
  });
  if ((pod || any_allocated) && new_qos != old_qos) {
    result.outcome = ResizeOutcome::Infeasible;
    result.message = fmt::format("Pod QOS Class may not change as a result of resizing ({} -> {})",
                                 to_string(old_qos), to_string(new_qos));
    PODSHIM_TRY(set_pending(kReasonInfeasible, result.message));
    return result;
  }
  // The pod cgroup as the kubelet derives it: the pod-level values where set,
  // the containers' aggregate otherwise (admission.h pod_cgroup_target), so a
  // container resize never rewrites pod-level limits (issue 17.4).
  Pod old_pod_spec = pod ? *pod : Pod{}, new_pod_spec = old_pod_spec;
  new_pod_spec.resources = pod_level;
  K8sResources new_total = pod_cgroup_target(new_pod_spec, new_pod);
  K8sResources old_total = pod_cgroup_target(old_pod_spec, old_pod);
  if (pod) PODSHIM_TRY(cgroup::check_kernel_limits(new_total, {}, fmt::format("pod '{}' cgroup", pod_uid)));
  const int64_t cpu_need = eff_cpu_req(new_total), mem_need = eff_mem_req(new_total);
  if (mem_need > allocatable_.memory_bytes || cpu_need > allocatable_.cpu_milli) {
    bool mem = mem_need > allocatable_.memory_bytes;
    result.outcome = ResizeOutcome::Infeasible;
    // The kubelet's wording (pkg/kubelet/kubelet.go canResizePod).
    result.message = fmt::format("Node didn't have enough capacity: {}, requested: {}, capacity: {}",
                                 mem ? "memory" : "cpu", mem ? mem_need : cpu_need,
                                 mem ? allocatable_.memory_bytes : allocatable_.cpu_milli);
    PODSHIM_TRY(set_pending(kReasonInfeasible, result.message));
    return result;
  }

  // 5. Deferred: an increase that does not fit next to what the other pods
  // hold (their allocated requests). Decreases are always admitted.
  if (cpu_need > eff_cpu_req(old_total) || mem_need > eff_mem_req(old_total)) {
    int64_t cpu_used = 0, mem_used = 0;
    for (const auto& c : store_.containers()) {
      if (c.pod_uid == pod_uid && !pod_uid.empty()) continue;
      if (pod_uid.empty() && seen.count(c.id)) continue;
      cpu_used += eff_cpu_req(c.allocated);
      mem_used += eff_mem_req(c.allocated);
    }
    bool mem = mem_need > eff_mem_req(old_total) && mem_used + mem_need > allocatable_.memory_bytes;
    bool cpu = cpu_need > eff_cpu_req(old_total) && cpu_used + cpu_need > allocatable_.cpu_milli;
    if (mem || cpu) {
      result.outcome = ResizeOutcome::Deferred;
      result.message = fmt::format("Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
                                   mem ? "memory" : "cpu", mem ? mem_need : cpu_need, mem ? mem_used : cpu_used,
                                   mem ? allocatable_.memory_bytes : allocatable_.cpu_milli);
      PODSHIM_TRY(set_pending(kReasonDeferred, result.message));
      return result;
    }
  }

  // 6. Admitted: allocate. A changed resource whose policy is
  // RestartContainer makes the container restart-required; RestartContainer
  // wins when cpu and memory disagree (KEP-1287 §Container Resize Policy).
  cgroup::PodResizeRequest plan;
  bool any_restart = false, any_change = false;
  std::vector<Item*> actuated;
  for (auto& it : items) {
    it.c.conditions.pending.reset();
    bool cpu_changed = cpu_differs(it.c.allocated, it.next);
    bool mem_changed = mem_differs(it.c.allocated, it.next);
    if (!cpu_changed && !mem_changed) {
      if (!it.c.restart_required) it.c.conditions.in_progress.reset();
      continue;
    }
    any_change = true;
    it.c.allocated = it.next;
    if ((cpu_changed && it.cpu_policy == ResizePolicy::RestartContainer) ||
        (mem_changed && it.memory_policy == ResizePolicy::RestartContainer)) {
      any_restart = true;
      it.c.restart_required = true;
      std::string msg = fmt::format("Container {} resize requires restart", it.c.name.empty() ? it.c.id : it.c.name);
      it.c.conditions.in_progress = Condition{"", msg, it.c.generation, now};
      continue;
    }
    plan.containers.push_back(cgroup::ResizeTarget{it.c.id, it.c.cgroup_path, it.next});
    actuated.push_back(&it);
  }
  bool pod_changes = pod && !pod->cgroup_path.empty() &&
                     (pod_resources ? (cpu_differs(pod->resources, pod_level) ||
                                       mem_differs(pod->resources, pod_level))
                                    : !plan.containers.empty());
  if (pod_changes) {
    plan.pod = cgroup::ResizeTarget{pod->uid, pod->cgroup_path, new_total};
    any_change = true;
  }
  for (auto* it : actuated) {
    if (it->c.cgroup_path.empty()) {
      return fail(EINVAL, "container '{}' has no cgroup path to resize", it->c.id);
    }
  }

  if (!plan.containers.empty() || plan.pod) {
    auto rep = actuator_.apply(plan);
    if (!rep) {
      const Error& e = rep.error();
      if (metrics_ && e.kind == ErrorKind::ShrinkRefused) metrics_->shrinks_refused.inc();
      for (auto* it : actuated) {
        // Allocated stays at the new values: the kubelet allocates before it
        // actuates and retries actuation (KEP-1287 §Resource States).
        it->c.conditions.in_progress = Condition{std::string(kReasonError), e.message, it->c.generation, now};
        it->c.last_error = e.message;
      }
      for (auto& it : items) PODSHIM_TRY(store_.upsert_container(it.c));
      result.outcome = ResizeOutcome::Error;
      result.message = e.message;
      return result;
    }
    result.report = *rep;
    if (metrics_ && rep->bytes_reclaimed) metrics_->bytes_reclaimed.inc({}, static_cast<double>(rep->bytes_reclaimed));
    for (auto* it : actuated) {
      it->c.conditions.in_progress.reset();
      it->c.restart_required = false;
      it->c.last_error.clear();
      auto a = actuator_.read_actual(it->c.cgroup_path);
      if (a) {
        if (metrics_ && it->c.actual && a->oom_kill > it->c.actual->oom_kill) {
          metrics_->oom_kills.inc({}, static_cast<double>(a->oom_kill - it->c.actual->oom_kill));
        }
        it->c.actual = to_actual(*a);
      }
    }
    if (plan.pod) {
      auto p = *pod;
      if (pod_resources) p.resources = pod_level;
      if (auto a = actuator_.read_actual(p.cgroup_path)) p.actual = to_actual(*a);
      PODSHIM_TRY(store_.upsert_pod(p));
    }
  }
  for (auto& it : items) PODSHIM_TRY(store_.upsert_container(it.c));
  if (any_restart) {
    result.outcome = ResizeOutcome::RestartRequired;
    result.message = "resize requires a container restart; podshim does not restart containers";
  } else {
    result.outcome = any_change ? ResizeOutcome::Applied : ResizeOutcome::Unchanged;
  }
  return result;
}

void ResizeManager::retry_deferred() {
  std::map<std::string, std::vector<ContainerResize>> by_pod;
  for (const auto& c : store_.containers()) {
    if (c.conditions.pending && c.conditions.pending->reason == kReasonDeferred) {
      ContainerResize r;
      r.container_id = c.id;
      r.resources = c.desired;
      by_pod[c.pod_uid].push_back(std::move(r));
    }
  }
  for (const auto& [uid, reqs] : by_pod) {
    auto r = run(uid, std::nullopt, reqs, false);
    if (metrics_ && r) metrics_->resize_requests.inc({{"result", std::string(to_string(r->outcome))}});
  }
}

}  // namespace podshim::core
