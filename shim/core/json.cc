#include "shim/core/json.h"

#include <algorithm>

#include <fmt/format.h>

namespace podshim::core {

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }


using nlohmann::json;

namespace {

// Typed field access that names the field on error; exceptions from
// nlohmann stay inside this file.
template <typename T>
Result<void> get(const json& j, const char* key, T* out, bool required = false) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return fail(EINVAL, "missing field '{}'", key);
    return {};
  }
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    return fail(EINVAL, "field '{}' has the wrong type ({})", key, it->type_name());
  }
  return {};
}

Result<void> get_opt(const json& j, const char* key, std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number_integer()) return fail(EINVAL, "field '{}' must be an integer", key);
  int64_t v = it->get<int64_t>();
  if (v < 0) return fail(EINVAL, "field '{}' must not be negative ({})", key, v);
  *out = v;
  return {};
}

Result<std::optional<ActualResources>> actual_from_json(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<ActualResources>{};
  if (!it->is_object()) return fail(EINVAL, "field '{}' must be an object", key);
  ActualResources a;
  auto r = resources_from_json(*it);
  if (!r) return wrap(r, key);
  a.resources = *r;
  PODSHIM_TRY(get(*it, "memoryCurrentBytes", &a.memory_current));
  PODSHIM_TRY(get(*it, "oomKill", &a.oom_kill));
  PODSHIM_TRY(get(*it, "readUnixMs", &a.read_unix_ms));
  return std::optional<ActualResources>(a);
}

Result<std::optional<Condition>> condition_from_json(const json& list, std::string_view type) {
  for (const auto& c : list) {
    if (!c.is_object() || c.value("type", "") != type) continue;
    Condition out;
    PODSHIM_TRY(get(c, "reason", &out.reason));
    PODSHIM_TRY(get(c, "message", &out.message));
    PODSHIM_TRY(get(c, "observedGeneration", &out.observed_generation));
    PODSHIM_TRY(get(c, "lastTransitionTimeUnixMs", &out.last_transition_unix_ms));
    return std::optional<Condition>(out);
  }
  return std::optional<Condition>{};
}

}  // namespace

void from_json(const json& j, StringMap& m) {
  if (!j.is_object()) throw json::type_error::create(302, "type must be object, but is " + std::string(j.type_name()), &j);
  std::vector<std::pair<std::string_view, std::string_view>> kv;
  kv.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_string()) throw json::type_error::create(302, "type must be string, but is " + std::string(it->type_name()), &*it);
    kv.emplace_back(it.key(), it->get_ref<const std::string&>());
  }
  m.assign(kv.begin(), kv.end());
}

Condition drift_condition(const Container& c) {
  Condition dc;
  dc.reason = "KernelValueDiffers";
  dc.observed_generation = c.generation;
  dc.last_transition_unix_ms = c.drift.front().since_unix_ms;
  for (const auto& d : c.drift) {
    dc.message += fmt::format("{}{}: allocated {}, kernel {}", dc.message.empty() ? "" : "; ", d.file, d.allocated,
                              d.actual);
    dc.last_transition_unix_ms = std::min(dc.last_transition_unix_ms, d.since_unix_ms);
  }
  return dc;
}

Result<K8sResources> resources_from_json(const json& j) {
  if (!j.is_object()) return fail(EINVAL, "resources must be an object");
  K8sResources r;
  PODSHIM_TRY(get_opt(j, "cpuRequestMilli", &r.cpu_request_milli));
  PODSHIM_TRY(get_opt(j, "cpuLimitMilli", &r.cpu_limit_milli));
  PODSHIM_TRY(get_opt(j, "memoryRequestBytes", &r.memory_request_bytes));
  PODSHIM_TRY(get_opt(j, "memoryLimitBytes", &r.memory_limit_bytes));
  // Registered resources by name. A name this build does not register is
  // kept (the state of a build that did): nothing writes it to a cgroup.
  if (auto it = j.find("extra"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return fail(EINVAL, "field 'extra' must be an object");
    for (const auto& item : it->items()) {
      std::optional<int64_t> v;
      if (auto ok = get_opt(*it, item.key().c_str(), &v); !ok) return wrap(ok, "in 'extra'");
      if (v) r.extra.emplace(item.key(), *v);
    }
  }
  return r;
}

Result<Pod> pod_from_json(const json& j) {
  if (!j.is_object()) return fail(EINVAL, "pod must be a JSON object");
  Pod p;
  PODSHIM_TRY(get(j, "uid", &p.uid, true));
  PODSHIM_TRY(get(j, "sandboxId", &p.sandbox_id));
  PODSHIM_TRY(get(j, "name", &p.name));
  PODSHIM_TRY(get(j, "namespace", &p.namespace_));
  PODSHIM_TRY(get(j, "cgroupPath", &p.cgroup_path));
  std::string qos = "BestEffort", source = "api";
  PODSHIM_TRY(get(j, "qosClass", &qos));
  auto q = parse_qos(qos);
  if (!q) return Unexpected(q.error());
  p.qos = *q;
  if (j.contains("resources")) {
    auto r = resources_from_json(j["resources"]);
    if (!r) return wrap(r, "resources");
    p.resources = *r;
  }
  auto a = actual_from_json(j, "actual");
  if (!a) return Unexpected(a.error());
  p.actual = *a;
  PODSHIM_TRY(get(j, "annotations", &p.annotations));
  PODSHIM_TRY(get(j, "labels", &p.labels));
  PODSHIM_TRY(get(j, "source", &source));
  auto s = parse_source(source);
  if (!s) return Unexpected(s.error());
  p.source = *s;
  return p;
}

Result<Container> container_from_json(const json& j) {
  if (!j.is_object()) return fail(EINVAL, "container must be a JSON object");
  Container c;
  PODSHIM_TRY(get(j, "id", &c.id, true));
  PODSHIM_TRY(get(j, "podUid", &c.pod_uid));
  PODSHIM_TRY(get(j, "name", &c.name));
  PODSHIM_TRY(get(j, "cgroupPath", &c.cgroup_path));
  PODSHIM_TRY(get(j, "state", &c.state));
  PODSHIM_TRY(get(j, "pid", &c.pid));
  if (auto it = j.find("resizePolicy"); it != j.end() && it->is_object()) {
    std::string cpu = "NotRequired", mem = "NotRequired";
    PODSHIM_TRY(get(*it, "cpu", &cpu));
    PODSHIM_TRY(get(*it, "memory", &mem));
    auto pc = parse_resize_policy(cpu);
    if (!pc) return Unexpected(pc.error());
    auto pm = parse_resize_policy(mem);
    if (!pm) return Unexpected(pm.error());
    c.cpu_policy = *pc;
    c.memory_policy = *pm;
  }
  for (const char* key : {"desired", "allocated"}) {
    if (!j.contains(key)) continue;
    auto r = resources_from_json(j[key]);
    if (!r) return wrap(r, key);
    (std::string_view(key) == "desired" ? c.desired : c.allocated) = *r;
  }
  if (j.contains("actuated")) {
    auto r = resources_from_json(j["actuated"]);
    if (!r) return wrap(r, "actuated");
    if (*r != c.allocated) c.actuated = *r;  // written as the allocated values when unset
  }
  auto a = actual_from_json(j, "actual");
  if (!a) return Unexpected(a.error());
  c.actual = *a;
  if (auto it = j.find("conditions"); it != j.end() && it->is_array()) {
    auto p = condition_from_json(*it, kPodResizePending);
    if (!p) return Unexpected(p.error());
    auto ip = condition_from_json(*it, kPodResizeInProgress);
    if (!ip) return Unexpected(ip.error());
    c.conditions.pending = *p;
    c.conditions.in_progress = *ip;
  }
  if (auto it = j.find("drift"); it != j.end() && it->is_array()) {
    for (const auto& d : *it) {
      Drift dr;
      PODSHIM_TRY(get(d, "resource", &dr.resource));
      PODSHIM_TRY(get(d, "file", &dr.file));
      PODSHIM_TRY(get(d, "allocated", &dr.allocated));
      PODSHIM_TRY(get(d, "actual", &dr.actual));
      PODSHIM_TRY(get(d, "sinceUnixMs", &dr.since_unix_ms));
      c.drift.push_back(std::move(dr));
    }
  }
  PODSHIM_TRY(get(j, "restartRequired", &c.restart_required));
  PODSHIM_TRY(get(j, "generation", &c.generation));
  if (auto it = j.find("devices"); it != j.end() && it->is_array()) {
    for (const auto& d : *it) {
      InjectedDevice dev;
      PODSHIM_TRY(get(d, "name", &dev.cdi_name, true));
      PODSHIM_TRY(get(d, "nodes", &dev.node_paths));
      c.devices.push_back(std::move(dev));
    }
  }
  PODSHIM_TRY(get(j, "selinuxMountLabel", &c.selinux_mount_label));
  PODSHIM_TRY(get(j, "lastError", &c.last_error));
  PODSHIM_TRY(get(j, "lastResizeOutcome", &c.last_outcome));
  PODSHIM_TRY(get(j, "annotations", &c.annotations));
  std::string source = "api";
  PODSHIM_TRY(get(j, "source", &source));
  auto s = parse_source(source);
  if (!s) return Unexpected(s.error());
  c.source = *s;
  return c;
}

}  // namespace podshim::core
