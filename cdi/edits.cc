#include "cdi/edits.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <map>
#include <set>

namespace podshim::cdi {

using json = nlohmann::json;

Result<HostDevice> lstat_host_device(const std::string& host_path) {
  struct stat st {};
  if (::lstat(host_path.c_str(), &st) < 0) return fail_errno("stat of host device \"{}\"", host_path);
  HostDevice d;
  if (S_ISBLK(st.st_mode)) d.type = "b";
  else if (S_ISCHR(st.st_mode)) d.type = "c";
  else if (S_ISFIFO(st.st_mode)) d.type = "p";
  else return fail(ENODEV, "host path \"{}\" is not a device node", host_path);
  if (d.type != "p") {
    d.major = major(st.st_rdev);
    d.minor = minor(st.st_rdev);
  }
  d.mode = st.st_mode & 0777;
  return d;
}

bool OciHooks::empty() const {
  return prestart.empty() && create_runtime.empty() && create_container.empty() &&
         start_container.empty() && poststart.empty() && poststop.empty();
}

std::string clean_path(std::string_view p) {
  if (p.empty()) return ".";
  bool rooted = p.front() == '/';
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view c = p.substr(i, j - i);
    i = j + 1;
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (!out.empty() && out.back() != "..") out.pop_back();
      else if (!rooted) out.push_back(c);
      continue;
    }
    out.push_back(c);
  }
  std::string r = rooted ? "/" : "";
  for (size_t k = 0; k < out.size(); k++) {
    if (k) r += '/';
    r += out[k];
  }
  return r.empty() ? "." : r;
}

namespace {

size_t mount_depth(std::string_view destination) {
  std::string c = clean_path(destination);
  return static_cast<size_t>(std::count(c.begin(), c.end(), '/'));
}

std::string_view env_key(std::string_view e) { return e.substr(0, e.find('=')); }

Result<LinuxDevice> complete_node(const DeviceNode& in, const ProcessIds& ids, const HostLookup& lookup) {
  DeviceNode d = in;
  if (d.host_path.empty()) d.host_path = d.path;
  bool fully_specified = !d.type.empty() && (d.major != 0 || d.type == "p");
  bool on_host = false;
  if (fully_specified) {
    // The host node may not exist (NVIDIA's MIG nvidia-caps nodes are made
    // inside the container); the lookup only supplies a missing fileMode.
    if (auto h = lookup(d.host_path)) {
      on_host = h->type == d.type;
      if (!d.file_mode) d.file_mode = h->mode;
    }
  } else {
    on_host = true;
    auto h = lookup(d.host_path);
    if (!h) return Unexpected(h.error().wrap(fmt::format("CDI device \"{}\"", d.path)));
    if (d.type.empty()) {
      d.type = h->type;
    } else if (d.type != h->type) {
      return fail(EINVAL, "CDI device (\"{}\", \"{}\"): host type mismatch (declared {}, host {})", d.path,
                  d.host_path, d.type, h->type);
    }
    if (d.major == 0 && d.type != "p") {
      d.major = h->major;
      d.minor = h->minor;
    }
    if (!d.file_mode) d.file_mode = h->mode;
  }
  LinuxDevice out{d.path, d.type, d.major, d.minor, d.file_mode, d.uid, d.gid, d.host_path, on_host};
  if (!out.uid && ids.uid > 0) out.uid = ids.uid;
  if (!out.gid && ids.gid > 0) out.gid = ids.gid;
  return out;
}

OciHook to_oci(const Hook& h) { return OciHook{h.path, h.args, h.env, h.timeout}; }

}  // namespace

Result<ResolvedEdits> resolve_edits(const ContainerEdits& merged, const ProcessIds& ids,
                                    const HostLookup& lookup) {
  ResolvedEdits r;
  for (const auto& e : merged.env) {
    auto it = std::find_if(r.env.begin(), r.env.end(),
                           [&](const std::string& x) { return env_key(x) == env_key(e); });
    if (it != r.env.end()) *it = e;
    else r.env.push_back(e);
  }
  for (const auto& n : merged.device_nodes) {
    auto dev = complete_node(n, ids, lookup);
    if (!dev) return Unexpected(dev.error());
    if (dev->type == "b" || dev->type == "c") {
      std::string access = n.permissions.empty() ? "rwm" : n.permissions == "none" ? "" : n.permissions;
      r.device_rules.push_back(DeviceCgroupRule{dev->type, dev->major, dev->minor, access});
    }
    std::erase_if(r.devices, [&](const LinuxDevice& x) { return x.path == dev->path; });
    r.devices.push_back(std::move(*dev));
  }
  r.net_devices = merged.net_devices;
  for (const auto& m : merged.mounts) {
    auto it = std::find_if(r.mounts.begin(), r.mounts.end(),
                           [&](const OciMount& x) { return x.destination == m.container_path; });
    if (it != r.mounts.end()) r.mounts.erase(it);
    r.mounts.push_back(OciMount{m.container_path, m.host_path, m.type, m.options});
  }
  std::stable_sort(r.mounts.begin(), r.mounts.end(), [](const OciMount& a, const OciMount& b) {
    return mount_depth(a.destination) < mount_depth(b.destination);
  });
  for (const auto& h : merged.hooks) {
    auto& hooks = r.hooks;
    if (h.hook_name == "prestart") hooks.prestart.push_back(to_oci(h));
    else if (h.hook_name == "createRuntime") hooks.create_runtime.push_back(to_oci(h));
    else if (h.hook_name == "createContainer") hooks.create_container.push_back(to_oci(h));
    else if (h.hook_name == "startContainer") hooks.start_container.push_back(to_oci(h));
    else if (h.hook_name == "poststart") hooks.poststart.push_back(to_oci(h));
    else if (h.hook_name == "poststop") hooks.poststop.push_back(to_oci(h));
    else return fail(EINVAL, "unknown hook name \"{}\"", h.hook_name);
  }
  r.intel_rdt = merged.intel_rdt;
  for (uint32_t g : merged.additional_gids) {
    if (g == 0 || std::find(r.additional_gids.begin(), r.additional_gids.end(), g) != r.additional_gids.end())
      continue;
    r.additional_gids.push_back(g);
  }
  return r;
}

ProcessIds process_ids_from_oci(const json& config) {
  ProcessIds ids;
  auto get = [&](const char* key) -> uint32_t {
    if (!config.is_object()) return 0;
    auto p = config.find("process");
    if (p == config.end() || !p->is_object()) return 0;
    auto u = p->find("user");
    if (u == p->end() || !u->is_object()) return 0;
    auto v = u->find(key);
    if (v == u->end() || !v->is_number_unsigned()) return 0;
    return v->get<uint32_t>();
  };
  ids.uid = get("uid");
  ids.gid = get("gid");
  return ids;
}

namespace {

// Returns obj[key], creating an object there if absent; errors if the
// existing value has another type (a malformed config.json).
Result<json*> child(json& obj, const char* key, json::value_t type, std::string_view where) {
  if (!obj.is_object()) return fail(EINVAL, "OCI config: \"{}\" is not an object", where);
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    obj[key] = json(type);
    return &obj[key];
  }
  if (it->type() != type)
    return fail(EINVAL, "OCI config: \"{}.{}\" has type {}", where, key, it->type_name());
  return &*it;
}

json hook_json(const OciHook& h) {
  json j = {{"path", h.path}};
  if (!h.args.empty()) j["args"] = h.args;
  if (!h.env.empty()) j["env"] = h.env;
  if (h.timeout) j["timeout"] = *h.timeout;
  return j;
}

}  // namespace

Result<void> apply_to_oci(const ResolvedEdits& e, json& config) {
  if (!config.is_object()) return fail(EINVAL, "OCI config is not a JSON object");
  using vt = json::value_t;
  if (!e.env.empty()) {
    auto process = child(config, "process", vt::object, "");
    if (!process) return Unexpected(process.error());
    auto env = child(**process, "env", vt::array, "process");
    if (!env) return Unexpected(env.error());
    // A CDI value replaces a pre-existing entry with the same key (HEAD's
    // native editor, 951fcb4; released v1.x and v0.5.2 append instead, which
    // runc's last-wins de-duplication turns into the same result).
    for (const auto& v : e.env) {
      json& arr = **env;
      std::optional<size_t> found;
      for (size_t i = 0; i < arr.size(); i++)
        if (arr[i].is_string() && env_key(arr[i].get_ref<const std::string&>()) == env_key(v)) found = i;
      if (found) arr[*found] = v;
      else arr.push_back(v);
    }
  }
  if (!e.devices.empty() || !e.device_rules.empty()) {
    auto lnx = child(config, "linux", vt::object, "");
    if (!lnx) return Unexpected(lnx.error());
    auto devices = child(**lnx, "devices", vt::array, "linux");
    if (!devices) return Unexpected(devices.error());
    for (const auto& d : e.devices) {
      json& arr = **devices;
      for (size_t i = 0; i < arr.size(); i++) {
        if (arr[i].is_object() && arr[i].value("path", "") == d.path) {
          arr.erase(arr.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
      json j = {{"path", d.path}, {"type", d.type}, {"major", d.major}, {"minor", d.minor}};
      if (d.file_mode) j["fileMode"] = *d.file_mode;
      if (d.uid) j["uid"] = *d.uid;
      if (d.gid) j["gid"] = *d.gid;
      arr.push_back(std::move(j));
    }
    if (!e.device_rules.empty()) {
      auto resources = child(**lnx, "resources", vt::object, "linux");
      if (!resources) return Unexpected(resources.error());
      auto rules = child(**resources, "devices", vt::array, "linux.resources");
      if (!rules) return Unexpected(rules.error());
      // Appended after any deny-all rule: later rules win in the device cgroup.
      for (const auto& r : e.device_rules) {
        json j = {{"allow", true}, {"type", r.type}, {"major", r.major}, {"minor", r.minor}};
        if (!r.access.empty()) j["access"] = r.access;
        (*rules)->push_back(std::move(j));
      }
    }
  }
  if (!e.net_devices.empty()) {
    auto lnx = child(config, "linux", vt::object, "");
    if (!lnx) return Unexpected(lnx.error());
    auto net = child(**lnx, "netDevices", vt::object, "linux");
    if (!net) return Unexpected(net.error());
    for (const auto& n : e.net_devices) (**net)[n.host_interface_name] = json{{"name", n.name}};
  }
  if (!e.mounts.empty()) {
    auto mounts = child(config, "mounts", vt::array, "");
    if (!mounts) return Unexpected(mounts.error());
    json& arr = **mounts;
    for (const auto& m : e.mounts) {
      for (size_t i = 0; i < arr.size(); i++) {
        if (arr[i].is_object() && arr[i].value("destination", "") == m.destination) {
          arr.erase(arr.begin() + static_cast<std::ptrdiff_t>(i));  // first match only, as upstream
          break;
        }
      }
      json j = {{"destination", m.destination}};
      if (!m.type.empty()) j["type"] = m.type;
      if (!m.source.empty()) j["source"] = m.source;
      if (!m.options.empty()) j["options"] = m.options;
      arr.push_back(std::move(j));
    }
    // All mounts, pre-existing ones included, by depth only and stably
    // (v1.0.0+, 7d4fb44; v0.5.2 also sorted by name, unstably).
    std::vector<json> v(arr.begin(), arr.end());
    std::stable_sort(v.begin(), v.end(), [](const json& a, const json& b) {
      auto dest = [](const json& m) { return m.is_object() ? m.value("destination", "") : std::string(); };
      return mount_depth(dest(a)) < mount_depth(dest(b));
    });
    arr = json(v);
  }
  if (!e.hooks.empty()) {
    auto hooks = child(config, "hooks", vt::object, "");
    if (!hooks) return Unexpected(hooks.error());
    const std::pair<const char*, const std::vector<OciHook>*> stages[] = {
        {"prestart", &e.hooks.prestart},         {"createRuntime", &e.hooks.create_runtime},
        {"createContainer", &e.hooks.create_container}, {"startContainer", &e.hooks.start_container},
        {"poststart", &e.hooks.poststart},       {"poststop", &e.hooks.poststop}};
    for (const auto& [name, list] : stages) {
      if (list->empty()) continue;
      auto stage = child(**hooks, name, vt::array, "hooks");
      if (!stage) return Unexpected(stage.error());
      for (const auto& h : *list) (*stage)->push_back(hook_json(h));
    }
  }
  if (e.intel_rdt) {
    auto lnx = child(config, "linux", vt::object, "");
    if (!lnx) return Unexpected(lnx.error());
    json r = json::object();
    const IntelRdt& i = *e.intel_rdt;
    if (!i.clos_id.empty()) r["closID"] = i.clos_id;
    if (!i.l3_cache_schema.empty()) r["l3CacheSchema"] = i.l3_cache_schema;
    if (!i.mem_bw_schema.empty()) r["memBwSchema"] = i.mem_bw_schema;
    if (i.schemata) r["schemata"] = *i.schemata;
    if (i.enable_monitoring) r["enableMonitoring"] = true;
    (**lnx)["intelRdt"] = std::move(r);
  }
  if (!e.additional_gids.empty()) {
    auto process = child(config, "process", vt::object, "");
    if (!process) return Unexpected(process.error());
    auto user = child(**process, "user", vt::object, "process");
    if (!user) return Unexpected(user.error());
    auto gids = child(**user, "additionalGids", vt::array, "process.user");
    if (!gids) return Unexpected(gids.error());
    for (uint32_t g : e.additional_gids) {
      bool present = std::any_of((*gids)->begin(), (*gids)->end(),
                                 [&](const json& x) { return x.is_number() && x.get<int64_t>() == g; });
      if (!present) (*gids)->push_back(g);
    }
  }
  return {};
}

}  // namespace podshim::cdi
