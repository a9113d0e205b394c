#include "cdi/edits.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "cdi/flat_index.h"

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
  LinuxDevice out{std::move(d.path), std::move(d.type), d.major, d.minor, d.file_mode, d.uid, d.gid,
                  std::move(d.host_path), on_host};
  if (!out.uid && ids.uid > 0) out.uid = ids.uid;
  if (!out.gid && ids.gid > 0) out.gid = ids.gid;
  return out;
}

OciHook to_oci(const Hook& h) { return OciHook{h.path, h.args, h.env, h.timeout}; }

}  // namespace

Result<ResolvedEdits> resolve_edits(const ContainerEdits& merged, const ProcessIds& ids,
                                    const HostLookup& lookup) {
  const ContainerEdits* one = &merged;
  return resolve_edits(std::span<const ContainerEdits* const>(&one, 1), ids, lookup);
}

Result<ResolvedEdits> resolve_edits(std::span<const ContainerEdits* const> parts, const ProcessIds& ids,
                                    const HostLookup& lookup) {
  // Every list below is made unique by its key in one pass with a hash
  // index. Scanning the result once per entry, as before, made injection
  // quadratic in the number of requested devices.
  std::vector<const DeviceNode*> nodes;
  std::vector<const Mount*> mounts;
  size_t n_env = 0;
  for (const ContainerEdits* p : parts) {
    for (const auto& n : p->device_nodes) nodes.push_back(&n);
    for (const auto& m : p->mounts) mounts.push_back(&m);
    n_env += p->env.size();
  }
  ResolvedEdits r;
  r.env.reserve(n_env);
  FlatIndex<std::string_view> env_at(n_env);  // key → index in r.env
  for (const ContainerEdits* p : parts) {
    for (const auto& e : p->env) {
      bool fresh;
      size_t& at = env_at.find_or_add(env_key(e), r.env.size(), &fresh);
      if (fresh) r.env.push_back(e);
      else r.env[at] = e;  // a later value replaces in place
    }
  }
  // Device nodes: unique by container path, the later one wins and takes
  // the later position. Every node is completed (and may fail) in order.
  FlatIndex<std::string_view> last_node(nodes.size());
  for (size_t i = 0; i < nodes.size(); i++) {
    bool fresh;
    last_node.find_or_add(nodes[i]->path, i, &fresh) = i;
  }
  r.devices.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); i++) {
    const DeviceNode& n = *nodes[i];
    auto dev = complete_node(n, ids, lookup);
    if (!dev) return Unexpected(dev.error());
    if (dev->type == "b" || dev->type == "c") {
      std::string access = n.permissions.empty() ? "rwm" : n.permissions == "none" ? "" : n.permissions;
      r.device_rules.push_back(DeviceCgroupRule{dev->type, dev->major, dev->minor, std::move(access)});
    }
    if (*last_node.find(n.path) == i) r.devices.push_back(std::move(*dev));
  }
  for (const ContainerEdits* p : parts)
    r.net_devices.insert(r.net_devices.end(), p->net_devices.begin(), p->net_devices.end());
  // Mounts: unique by destination (later wins, at its position), then
  // stable-sorted by depth, each depth computed once.
  FlatIndex<std::string_view> last_mount(mounts.size());
  for (size_t i = 0; i < mounts.size(); i++) {
    bool fresh;
    last_mount.find_or_add(mounts[i]->container_path, i, &fresh) = i;
  }
  std::vector<std::pair<size_t, const Mount*>> by_depth;
  by_depth.reserve(mounts.size());
  for (size_t i = 0; i < mounts.size(); i++)
    if (*last_mount.find(mounts[i]->container_path) == i)
      by_depth.emplace_back(mount_depth(mounts[i]->container_path), mounts[i]);
  std::stable_sort(by_depth.begin(), by_depth.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  r.mounts.reserve(by_depth.size());
  for (const auto& [_, m] : by_depth) r.mounts.push_back(OciMount{m->container_path, m->host_path, m->type, m->options});
  std::unordered_set<uint32_t> gids;
  for (const ContainerEdits* p : parts) {
    for (const auto& h : p->hooks) {
      auto& hooks = r.hooks;
      if (h.hook_name == "prestart") hooks.prestart.push_back(to_oci(h));
      else if (h.hook_name == "createRuntime") hooks.create_runtime.push_back(to_oci(h));
      else if (h.hook_name == "createContainer") hooks.create_container.push_back(to_oci(h));
      else if (h.hook_name == "startContainer") hooks.start_container.push_back(to_oci(h));
      else if (h.hook_name == "poststart") hooks.poststart.push_back(to_oci(h));
      else if (h.hook_name == "poststop") hooks.poststop.push_back(to_oci(h));
      else return fail(EINVAL, "unknown hook name \"{}\"", h.hook_name);
    }
    if (p->intel_rdt) r.intel_rdt = *p->intel_rdt;  // a later one replaces (ContainerEdits::append)
    for (uint32_t g : p->additional_gids)
      if (g != 0 && gids.insert(g).second) r.additional_gids.push_back(g);
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
  json j = json::object();
  j["path"] = h.path;
  if (!h.args.empty()) j["args"] = h.args;
  if (!h.env.empty()) j["env"] = h.env;
  if (h.timeout) j["timeout"] = *h.timeout;
  return j;
}

// The string member `key` of an array entry: "" when the entry is not an
// object or has no such member (json::value's default), nullopt when the
// member is not a string (then it matches nothing).
std::optional<std::string_view> member(const json& entry, const char* key) {
  if (!entry.is_object()) return std::string_view();
  auto it = entry.find(key);
  if (it == entry.end()) return std::string_view();
  if (!it->is_string()) return std::nullopt;
  return std::string_view(it->get_ref<const std::string&>());
}

// Appends `added` to `arr`, each first removing the first entry (in array
// order, earlier additions included) whose `key` equals its own; the
// upstream editors' remove-then-append, in one pass with a hash index
// instead of a scan of the array for every addition.
void replace_or_append(json& arr, const char* key, std::vector<std::pair<std::string, json>> added) {
  std::vector<json> all;
  all.reserve(arr.size() + added.size());
  for (auto& e : arr) all.push_back(std::move(e));
  const size_t total = all.size() + added.size();
  constexpr size_t kNone = SIZE_MAX;
  std::vector<bool> live(total, true);
  // Live entries with the same key form a list in array order: the index
  // holds its (first, last), next[] the links.
  std::vector<size_t> next(total, kNone);
  FlatIndex<std::string_view, std::pair<size_t, size_t>> at(total);
  auto link = [&](std::string_view k, size_t pos) {
    bool fresh;
    auto& fl = at.find_or_add(k, {pos, pos}, &fresh);
    if (fresh) return;
    if (fl.first == kNone) fl.first = pos;
    else next[fl.second] = pos;
    fl.second = pos;
  };
  for (size_t i = 0; i < all.size(); i++)
    if (auto k = member(all[i], key)) link(*k, i);
  for (auto& [k, j] : added) {
    bool fresh;
    auto& fl = at.find_or_add(k, {kNone, kNone}, &fresh);
    if (fl.first != kNone) {  // remove the first live entry with this key
      live[fl.first] = false;
      fl.first = next[fl.first];
      if (fl.first == kNone) fl.second = kNone;
    }
    link(k, all.size());
    all.push_back(std::move(j));
  }
  json out = json::array();
  auto& v = out.get_ref<json::array_t&>();
  v.reserve(all.size());
  for (size_t i = 0; i < all.size(); i++)
    if (live[i]) v.push_back(std::move(all[i]));
  arr = std::move(out);
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
    json& arr = **env;
    // key → the last index with it. Values are assigned after the pass,
    // so the keys viewed in the array stay valid during it.
    const size_t existing = arr.size();
    FlatIndex<std::string_view> last(existing + e.env.size());
    for (size_t i = 0; i < existing; i++) {
      bool fresh;
      if (arr[i].is_string()) last.find_or_add(env_key(arr[i].get_ref<const std::string&>()), i, &fresh) = i;
    }
    std::vector<const std::string*> value(existing + e.env.size(), nullptr);
    size_t end = existing;
    for (const auto& v : e.env) {
      bool fresh;
      size_t& at = last.find_or_add(env_key(v), end, &fresh);
      if (fresh) end++;
      value[at] = &v;
    }
    for (size_t i = 0; i < existing; i++)
      if (value[i]) arr[i] = *value[i];
    for (size_t i = existing; i < end; i++) arr.push_back(*value[i]);
  }
  if (!e.devices.empty() || !e.device_rules.empty()) {
    auto lnx = child(config, "linux", vt::object, "");
    if (!lnx) return Unexpected(lnx.error());
    auto devices = child(**lnx, "devices", vt::array, "linux");
    if (!devices) return Unexpected(devices.error());
    std::vector<std::pair<std::string, json>> added;
    added.reserve(e.devices.size());
    for (const auto& d : e.devices) {
      json j = json::object();
      j["path"] = d.path;
      j["type"] = d.type;
      j["major"] = d.major;
      j["minor"] = d.minor;
      if (d.file_mode) j["fileMode"] = *d.file_mode;
      if (d.uid) j["uid"] = *d.uid;
      if (d.gid) j["gid"] = *d.gid;
      added.emplace_back(d.path, std::move(j));
    }
    replace_or_append(**devices, "path", std::move(added));
    if (!e.device_rules.empty()) {
      auto resources = child(**lnx, "resources", vt::object, "linux");
      if (!resources) return Unexpected(resources.error());
      auto rules = child(**resources, "devices", vt::array, "linux.resources");
      if (!rules) return Unexpected(rules.error());
      // Appended after any deny-all rule: later rules win in the device cgroup.
      for (const auto& r : e.device_rules) {
        json j = json::object();
        j["allow"] = true;
        j["type"] = r.type;
        j["major"] = r.major;
        j["minor"] = r.minor;
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
    std::vector<std::pair<std::string, json>> added;  // first match only is replaced, as upstream
    added.reserve(e.mounts.size());
    for (const auto& m : e.mounts) {
      json j = json::object();
      j["destination"] = m.destination;
      if (!m.type.empty()) j["type"] = m.type;
      if (!m.source.empty()) j["source"] = m.source;
      if (!m.options.empty()) j["options"] = m.options;
      added.emplace_back(m.destination, std::move(j));
    }
    replace_or_append(arr, "destination", std::move(added));
    // All mounts, pre-existing ones included, by depth only and stably
    // (v1.0.0+, 7d4fb44; v0.5.2 also sorted by name, unstably). Each depth is
    // computed once, not in every comparison.
    auto& v = arr.get_ref<json::array_t&>();
    std::vector<std::pair<size_t, size_t>> order;  // (depth, index)
    order.reserve(v.size());
    for (size_t i = 0; i < v.size(); i++) {
      auto d = member(v[i], "destination");
      order.emplace_back(mount_depth(d ? *d : std::string_view()), i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    json::array_t sorted;
    sorted.reserve(v.size());
    for (const auto& [_, i] : order) sorted.push_back(std::move(v[i]));
    v = std::move(sorted);
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
