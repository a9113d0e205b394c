#include "shim/adapter/nri_map.h"

#include <algorithm>
#include <array>
#include <set>

#include "base/str.h"
#include "cdi/requests.h"
#include "shim/core/json.h"

#include <nlohmann/json.hpp>

namespace podshim::adapter {

cgroup::LinuxResourceValues linux_values(const pb::LinuxResourcesView& r) {
  cgroup::LinuxResourceValues v;
  if (r.has_cpu) {
    if (r.cpu_shares.has) v.cpu_shares = r.cpu_shares.value;
    if (r.cpu_quota.has) v.cpu_quota = static_cast<int64_t>(r.cpu_quota.value);
    if (r.cpu_period.has) v.cpu_period = r.cpu_period.value;
  }
  if (r.has_memory && r.memory_limit.has) v.memory_limit = static_cast<int64_t>(r.memory_limit.value);
  return v;
}

cgroup::K8sResources resources_from_nri(const pb::LinuxResourcesView& r,
                                        const cgroup::K8sResources& current) {
  cgroup::K8sResources out = cgroup::from_linux_resources(linux_values(r), current);
  // MemoryQoS (KEP-2570) carries the memory request as unified memory.min.
  if (auto it = r.unified.find("memory.min")) {
    auto v = str::parse_i64(*it);
    if (v && *v > 0) out.memory_request_bytes = *v;
  }
  return out;
}

api::LinuxResources resources_to_nri(const cgroup::K8sResources& r) {
  api::LinuxResources out;
  cgroup::LinuxResourceValues v = cgroup::to_linux_resources(r);
  auto* cpu = out.mutable_cpu();
  if (v.cpu_shares > 0) cpu->mutable_shares()->set_value(v.cpu_shares);
  if (r.cpu_limit_milli) {
    cpu->mutable_quota()->set_value(v.cpu_quota);
    cpu->mutable_period()->set_value(v.cpu_period ? v.cpu_period : cgroup::kQuotaPeriodUs);
  }
  if (r.memory_limit_bytes) out.mutable_memory()->mutable_limit()->set_value(v.memory_limit);
  return out;
}

core::QosClass qos_from_cgroup_parent(const std::string& parent) {
  if (parent.find("besteffort") != std::string::npos) return core::QosClass::BestEffort;
  if (parent.find("burstable") != std::string::npos) return core::QosClass::Burstable;
  return core::QosClass::Guaranteed;
}

namespace {

// A wire map into a model map, sized exactly: one pass to count its bytes,
// one to insert. Map semantics: the last entry with a key wins (protobuf
// encoding spec, Maps).
void fill(core::StringMap& out, const pb::StringMapView& wire) {
  size_t bytes = 0;
  wire.for_each([&](std::string_view k, std::string_view v) { bytes += core::StringMap::bytes_for(k, v); });
  out.reset(bytes);
  wire.for_each([&](std::string_view k, std::string_view v) { out.insert_or_assign(k, v); });
}

}  // namespace

Result<void> assign_pod_from_nri(const pb::PodSandboxView& p, core::Pod* pod) {
  PODSHIM_TRY(core::validate_id("pod uid", p.uid));
  pod->uid = p.uid;
  pod->sandbox_id = p.id;
  pod->name = p.name;
  pod->namespace_ = p.namespace_;
  pod->cgroup_path = p.cgroup_parent;
  pod->qos = qos_from_cgroup_parent(pod->cgroup_path);
  pod->resources = p.has_pod_resources ? resources_from_nri(p.pod_resources) : cgroup::K8sResources{};
  fill(pod->annotations, p.annotations);
  fill(pod->labels, p.labels);
  pod->source = core::Source::Nri;
  return {};
}

namespace {

// A map on the wire equals `known` when it has as many entries and each
// maps to the same value (a key sent twice makes the counts differ, and
// the caller then rebuilds: correct, just not the shortcut).
template <typename Map>
bool same_map(const pb::StringMapView& wire, const Map& known) {
  size_t known_n = 0;  // counted by iteration: the model's map type is the store's choice
  for (auto it = known.begin(); it != known.end(); ++it) ++known_n;
  size_t n = 0;
  bool same = true;
  wire.for_each([&](std::string_view k, std::string_view v) {
    ++n;
    if (!same) return;
    // A linear walk compares string_views without building a key string
    // (a pod's few annotations); a big map is searched.
    if (known_n <= 32) {
      same = false;
      for (const auto& [kk, kv] : known) {
        if (kk == k) {
          same = kv == v;
          break;
        }
      }
    } else {
      auto it = known.find(std::string(k));
      same = it != known.end() && it->second == v;
    }
  });
  return same && n == known_n;
}

}  // namespace

bool pod_unchanged(const pb::PodSandboxView& p, const core::Pod& k) {
  if (k.source != core::Source::Nri || k.uid != p.uid || k.sandbox_id != p.id || k.name != p.name ||
      k.namespace_ != p.namespace_ || k.cgroup_path != p.cgroup_parent)
    return false;
  if (k.qos != qos_from_cgroup_parent(k.cgroup_path)) return false;
  if (k.resources != (p.has_pod_resources ? resources_from_nri(p.pod_resources) : cgroup::K8sResources{}))
    return false;
  return same_map(p.annotations, k.annotations) && same_map(p.labels, k.labels);
}

bool container_unchanged(std::string_view pod_uid, const pb::ContainerView& ctr, bool take_resources,
                         const core::Container& k) {
  if (k.source != core::Source::Nri || k.id != ctr.id || k.pod_uid != pod_uid || k.name != ctr.name ||
      k.cgroup_path != ctr.cgroups_path || k.state != state_name(ctr.state) ||
      k.pid != static_cast<pid_t>(ctr.pid))
    return false;
  if (take_resources) {
    const cgroup::K8sResources d = ctr.has_resources ? resources_from_nri(ctr.resources) : cgroup::K8sResources{};
    if (k.desired != d || k.allocated != d) return false;
  }
  return same_map(ctr.annotations, k.annotations);
}

Result<core::Pod> pod_from_nri(const pb::PodSandboxView& p) {
  core::Pod pod;
  PODSHIM_TRY(assign_pod_from_nri(p, &pod));
  return pod;
}

std::string state_name(int32_t s) {
  switch (s) {
    case api::CONTAINER_CREATED: return "created";
    case api::CONTAINER_PAUSED: return "paused";
    case api::CONTAINER_RUNNING: return "running";
    case api::CONTAINER_STOPPED: return "stopped";
    default: return "unknown";
  }
}

Result<void> assign_container_from_nri(std::string_view pod_uid, const pb::ContainerView& ctr,
                                       bool take_resources, core::Container* c) {
  PODSHIM_TRY(core::validate_id("container id", ctr.id));
  PODSHIM_TRY(core::validate_id("pod uid", pod_uid));
  c->id = ctr.id;
  c->pod_uid = pod_uid;
  c->name = ctr.name;
  c->cgroup_path = ctr.cgroups_path;
  c->state = state_name(ctr.state);
  c->pid = static_cast<pid_t>(ctr.pid);
  if (take_resources) {
    c->desired = ctr.has_resources ? resources_from_nri(ctr.resources) : cgroup::K8sResources{};
    c->allocated = c->desired;
  }
  fill(c->annotations, ctr.annotations);
  c->source = core::Source::Nri;
  return {};
}

Result<core::Container> container_from_nri(std::string_view pod_uid, const pb::ContainerView& ctr) {
  core::Container c;
  PODSHIM_TRY(assign_container_from_nri(pod_uid, ctr, true, &c));
  return c;
}

std::map<std::string, std::string> cdi_annotations(const pb::PodSandboxView& pod,
                                                   const pb::ContainerView& ctr) {
  std::map<std::string, std::string> out;
  auto add = [&](std::string_view k, std::string_view v) {
    if (str::starts_with(k, cdi::kAnnotationPrefix) || k == cdi::kPodshimAnnotation)
      out.insert_or_assign(std::string(k), std::string(v));
  };
  pod.annotations.for_each(add);
  ctr.annotations.for_each(add);
  return out;
}

HookDecision decide_hook(const std::string& host_path, const std::string& check_path,
                         const std::function<bool(const std::string&)>& executable) {
  HookDecision d;
  if (host_path.empty() || host_path.front() != '/') {
    d.warning = fmt::format("podshim-hook path '{}' is not absolute; injecting no hook", host_path);
    return d;
  }
  if (!executable(check_path)) {
    d.warning = check_path == host_path
                    ? fmt::format("podshim-hook not found (or not executable) at {}; injecting no hook, "
                                  "so CDI mounts get no SELinux labels and device nodes no host check",
                                  host_path)
                    : fmt::format("podshim-hook for host path {} not found (or not executable) at {}; "
                                  "injecting no hook, so CDI mounts get no SELinux labels and device "
                                  "nodes no host check",
                                  host_path, check_path);
    return d;
  }
  d.inject = true;
  d.path = host_path;
  return d;
}

namespace {

void fill_hook(api::Hook* h, const std::string& path, const char* stage, int timeout) {
  h->set_path(path);
  h->add_args("podshim-hook");
  h->add_args(stage);
  h->mutable_timeout()->set_value(timeout);
}

// A hook as far as "the same hook" goes: what the runtime would exec (path,
// argv, environment). The timeout is left out: running a command twice is
// the fault, whatever the deadline of each run.
struct HookId {
  std::string_view path;
  std::vector<std::string_view> args, env;
  bool operator==(const HookId&) const = default;
};

// NRI's Hooks message numbers its stages 1..6 (prestart, createRuntime,
// createContainer, startContainer, poststart, poststop: pkg/api/api.proto,
// the same in v0.4 to v0.12); index = field - 1.
constexpr size_t kStages = 6;
using HookSet = std::array<std::vector<HookId>, kStages>;

// The hooks the runtime has already put in the container's spec (containerd
// fills Container.hooks from the OCI spec it built, CDI edits included:
// internal/cri/nri/nri_api_linux.go GetHooks). The view does not decode
// field 10, so it is read here; a malformed Hooks message stops the walk
// (what was read so far is kept), which at worst lets a hook through twice.
HookSet existing_hooks(const pb::ContainerView& ctr) {
  HookSet out;
  auto read_hook = [](std::string_view b, HookId* h) -> bool {
    pb::Cursor c(b, "Hook", 3);
    while (true) {
      auto more = c.next();
      if (!more) return false;
      if (!*more) return true;
      if (c.wire_type() != pb::WireType::Len) continue;
      if (c.field() == 1) h->path = c.bytes();
      else if (c.field() == 2) h->args.push_back(c.bytes());
      else if (c.field() == 3) h->env.push_back(c.bytes());
    }
  };
  pb::Cursor c(ctr.raw, "Container");
  while (true) {
    auto more = c.next();
    if (!more || !*more) break;
    if (c.field() != 10 || c.wire_type() != pb::WireType::Len) continue;
    pb::Cursor hc(c.bytes(), "Hooks", 2);
    while (true) {
      auto m = hc.next();
      if (!m || !*m) break;
      if (hc.field() < 1 || hc.field() > kStages || hc.wire_type() != pb::WireType::Len) continue;
      HookId h;
      if (!read_hook(hc.bytes(), &h)) break;
      out[hc.field() - 1].push_back(std::move(h));
    }
  }
  return out;
}

HookId id_of(const cdi::OciHook& h) {
  HookId id{h.path, {}, {}};
  id.args.assign(h.args.begin(), h.args.end());
  id.env.assign(h.env.begin(), h.env.end());
  return id;
}

// The access of the allow rule a runtime adds for a device node of an NRI
// adjustment: "rw", plus "m" for block devices (containerd/nri
// pkg/api/device.go LinuxDevice.AccessString; applied by
// pkg/runtime-tools/generate/generate.go AdjustDevices, which containerd's
// internal/cri/nri/nri_api_linux.go and CRI-O call).
std::string runtime_access(const std::string& type) { return type == "b" ? "rwm" : "rw"; }

}  // namespace

namespace {

// process.env entries the container does not have yet.
void add_env(const cdi::ResolvedEdits& e, const pb::ContainerView& ctr, api::ContainerAdjustment* adj) {
  std::set<std::string, std::less<>> have_env;
  ctr.env.for_each([&](std::string_view kv) { have_env.emplace(kv); });
  for (const std::string& kv : e.env) {
    if (!have_env.emplace(kv).second) continue;
    size_t eq = kv.find('=');
    auto* out = adj->add_env();
    out->set_key(kv.substr(0, eq));
    out->set_value(eq == std::string::npos ? "" : kv.substr(eq + 1));
  }
}

// Device nodes the container does not have yet; returns their paths. Every
// node the host has goes into `injected`, for the hook's host check,
// whoever adds it (fully specified nodes may exist only inside).
std::vector<std::string> add_devices(const cdi::ResolvedEdits& e, const pb::ContainerView& ctr,
                                     api::ContainerAdjustment* adj, nlohmann::json* injected) {
  std::set<std::string, std::less<>> have_dev;
  ctr.devices.for_each([&](std::string_view d) { have_dev.emplace(pb::device_path(d)); });
  std::vector<std::string> added;
  for (const cdi::LinuxDevice& d : e.devices) {
    if (d.on_host) injected->push_back({{"path", d.path}, {"hostPath", d.host_path}});
    if (have_dev.count(d.path)) continue;
    auto* out = adj->mutable_linux()->add_devices();
    out->set_path(d.path);
    out->set_type(d.type);
    out->set_major(d.major);
    out->set_minor(d.minor);
    if (d.file_mode) out->mutable_file_mode()->set_value(*d.file_mode);
    if (d.uid) out->mutable_uid()->set_value(*d.uid);
    if (d.gid) out->mutable_gid()->set_value(*d.gid);
    added.push_back(d.path);
  }
  return added;
}

// Device-cgroup rules. The runtime already allowed the nodes it injected
// (its own CDI), and it allows every node of an adjustment itself when it
// applies it (AdjustDevices: RemoveDevice + AddDevice + an allow rule of
// AccessString), so an allow rule from us would be a second one: NRI
// v0.10+ passes an adjustment's linux.resources.devices through
// (pkg/adaptation/result.go adjustResources; v0.4-v0.9 drop them). The
// mknod ("m") that CDI's default "rwm" adds for character devices is
// what the runtimes' default rules already allow for every c/b device.
// What the runtime's rule grants beyond the CDI spec's permissions (a
// read-only node, or "none") is denied by a rule after it; generate.go
// applies resources after devices, so the deny wins (NRI v0.10+ only).
void deny_beyond_spec(const cdi::ResolvedEdits& e, const std::vector<std::string>& added,
                      api::ContainerAdjustment* adj) {
  std::set<std::string> added_set(added.begin(), added.end());
  std::set<std::string> denied;  // "type major:minor", one deny per node
  for (const cdi::LinuxDevice& d : e.devices) {
    if (!added_set.count(d.path) || (d.type != "b" && d.type != "c")) continue;
    for (const cdi::DeviceCgroupRule& r : e.device_rules) {
      if (r.type != d.type || r.major != d.major || r.minor != d.minor) continue;
      std::string extra;
      for (char a : runtime_access(d.type))
        if (r.access.find(a) == std::string::npos) extra += a;
      if (!extra.empty() && denied.insert(fmt::format("{} {}:{}", d.type, d.major, d.minor)).second) {
        auto* rule = adj->mutable_linux()->mutable_resources()->add_devices();
        rule->set_allow(false);
        rule->set_type(r.type);
        rule->mutable_major()->set_value(r.major);
        rule->mutable_minor()->set_value(r.minor);
        rule->set_access(extra);
      }
      break;
    }
  }
}

// Mounts the container does not have yet; whether there were any. Every
// destination goes into `injected`, for podshim-hook's SELinux labelling,
// whoever adds the mount: the source is this container's device data.
bool add_mounts(const cdi::ResolvedEdits& e, const pb::ContainerView& ctr, api::ContainerAdjustment* adj,
                nlohmann::json* injected) {
  std::set<std::string, std::less<>> have_mount;
  ctr.mounts.for_each([&](std::string_view m) { have_mount.emplace(pb::mount_destination(m)); });
  bool added = false;
  for (const cdi::OciMount& m : e.mounts) {
    injected->push_back(m.destination);
    if (!have_mount.emplace(m.destination).second) continue;
    auto* out = adj->add_mounts();
    out->set_destination(m.destination);
    out->set_source(m.source);
    out->set_type(m.type.empty() ? "bind" : m.type);
    for (const auto& o : m.options) out->add_options(o);
    added = true;
  }
  return added;
}

// Hooks, each once: NRI appends an adjustment's hooks to those in the spec
// (generate.go AdjustHooks, result.go adjustHooks), so a hook the runtime
// already applied from the same CDI spec would run twice.
class HookAdder {
 public:
  HookAdder(const pb::ContainerView& ctr, api::ContainerAdjustment* adj) : ctr_(ctr), adj_(adj) {}

  // Whether `id` is in `stage` already; if not, it counts as added from now.
  bool have(size_t stage, const HookId& id) {
    if (!read_) {
      have_ = existing_hooks(ctr_);
      read_ = true;
    }
    auto& list = have_[stage];
    if (std::find(list.begin(), list.end(), id) != list.end()) return true;
    list.push_back(id);  // views into the edits or literals, alive for this call
    return false;
  }

  void add(size_t stage, const std::vector<cdi::OciHook>& from,
           google::protobuf::RepeatedPtrField<api::Hook>* (api::Hooks::*to)()) {
    for (const cdi::OciHook& h : from) {
      if (have(stage, id_of(h))) continue;
      auto* out = (adj_->mutable_hooks()->*to)()->Add();
      out->set_path(h.path);
      for (const auto& a : h.args) out->add_args(a);
      for (const auto& v : h.env) out->add_env(v);
      if (h.timeout) out->mutable_timeout()->set_value(*h.timeout);
    }
  }

  void add_all(const cdi::ResolvedEdits& e) {
    if (e.hooks.empty()) return;
    add(0, e.hooks.prestart, &api::Hooks::mutable_prestart);
    add(1, e.hooks.create_runtime, &api::Hooks::mutable_create_runtime);
    add(2, e.hooks.create_container, &api::Hooks::mutable_create_container);
    add(3, e.hooks.start_container, &api::Hooks::mutable_start_container);
    add(4, e.hooks.poststart, &api::Hooks::mutable_poststart);
    add(5, e.hooks.poststop, &api::Hooks::mutable_poststop);
  }

 private:
  const pb::ContainerView& ctr_;
  api::ContainerAdjustment* adj_;
  HookSet have_;
  bool read_ = false;
};

}  // namespace

std::vector<std::string> edits_to_adjustment(const cdi::ResolvedEdits& e, const pb::ContainerView& ctr,
                                             const AdjustmentOptions& opts,
                                             api::ContainerAdjustment* adj) {
  add_env(e, ctr, adj);
  nlohmann::json injected = nlohmann::json::array(), injected_mounts = nlohmann::json::array();
  std::vector<std::string> added = add_devices(e, ctr, adj, &injected);
  deny_beyond_spec(e, added, adj);
  const bool added_mounts = add_mounts(e, ctr, adj, &injected_mounts);
  HookAdder hooks(ctr, adj);
  hooks.add_all(e);

  if (!injected.empty()) (*adj->mutable_annotations())["podshim.io/injected-devices"] = core::dump(injected);
  if (!injected_mounts.empty())
    (*adj->mutable_annotations())["podshim.io/injected-mounts"] = core::dump(injected_mounts);
  if (opts.inject_hook && (!injected.empty() || added_mounts)) {
    // Not twice either: CRI-O's hooks.d may already run podshim-hook for
    // this container (both modes on, packaging's crio-podshim.conf).
    if (!hooks.have(1, HookId{opts.hook_path, {"podshim-hook", "createRuntime"}, {}}))
      fill_hook(adj->mutable_hooks()->add_create_runtime(), opts.hook_path, "createRuntime",
                opts.hook_timeout_s);
    if (!hooks.have(5, HookId{opts.hook_path, {"podshim-hook", "poststop"}, {}}))
      fill_hook(adj->mutable_hooks()->add_poststop(), opts.hook_path, "poststop", opts.hook_timeout_s);
  }
  return added;
}

}  // namespace podshim::adapter
