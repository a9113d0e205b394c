#include "cdi/edits.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/str.h"
#include "cdi/flat_index.h"
#include "cdi/json_writer.h"

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
  str::each_component(p, [&](std::string_view c) {
    if (c == "..") {
      if (!out.empty() && out.back() != "..") out.pop_back();
      else if (!rooted) out.push_back(c);
    } else if (!c.empty() && c != ".") {
      out.push_back(c);
    }
    return true;
  });
  std::string r = rooted ? "/" : "";
  for (size_t k = 0; k < out.size(); k++) {
    if (k) r += '/';
    r += out[k];
  }
  return r.empty() ? "." : r;
}

namespace {

// The depth of a mount destination: the number of '/' in clean_path(d),
// counted without building the cleaned string (sorting mounts called
// clean_path twice per mount, two allocations each).
size_t mount_depth(std::string_view d) {
  if (d.empty()) return 0;
  const bool rooted = d.front() == '/';
  size_t names = 0, dotdots = 0;  // what clean_path keeps: leading ".." (unrooted only), then names
  str::each_component(d, [&](std::string_view c) {
    if (c == "..") {
      if (names > 0) names--;
      else if (!rooted) dotdots++;
    } else if (!c.empty() && c != ".") {
      names++;
    }
    return true;
  });
  size_t parts = names + dotdots;
  if (rooted) return parts == 0 ? 1 : parts;  // "/" has one slash, "/a/b" two
  return parts == 0 ? 0 : parts - 1;          // "." none, "a/b" one
}

std::string_view env_key(std::string_view e) { return e.substr(0, e.find('=')); }

// OCI hook stages, in the order apply_to_oci writes them.
constexpr std::array<const char*, 6> kStages = {"prestart",       "createRuntime", "createContainer",
                                                "startContainer", "poststart",     "poststop"};

// "Minimally specified" in fillMissingInfo's words: the host is not consulted.
bool fully_specified(const DeviceNode& n) { return !n.type.empty() && (n.major != 0 || n.type == "p"); }

// Host lookups of one resolution: each host path is looked up once, however
// many nodes (of however many specs) name it. Results stay at fixed
// addresses (reserved up front), so views may point into them.
class HostCache {
 public:
  HostCache(const HostLookup& lookup, size_t max_paths) : lookup_(lookup), index_(max_paths) {
    results_.reserve(max_paths);
  }
  const Result<HostDevice>& get(const std::string& path) {
    bool fresh;
    size_t at = index_.find_or_add(path, results_.size(), &fresh);
    if (fresh) results_.push_back(lookup_(path));
    return results_[at];
  }

 private:
  const HostLookup& lookup_;
  FlatIndex<std::string_view> index_;
  std::vector<Result<HostDevice>> results_;
};

// A completed device node; its strings are the spec's (or the cache's).
struct NodePart {
  const DeviceNode* node;
  const std::string* host_path;  // hostPath, or path when unset
  std::string_view type;
  int64_t major, minor;
  std::optional<uint32_t> file_mode, uid, gid;
  bool on_host;
};

struct RulePart {
  std::string_view type;
  int64_t major, minor;
  std::string_view access;
};

// resolve_edits' result before any string is copied: pointers into the
// edits it was built from (and into its HostCache), valid while they live.
// resolve_edits copies it into a ResolvedEdits; the OCI back end applies it
// directly.
struct EditsView {
  std::vector<const std::string*> env;
  std::vector<NodePart> devices;
  std::vector<RulePart> device_rules;
  std::vector<const NetDevice*> net_devices;
  std::vector<const Mount*> mounts;
  std::array<std::vector<const Hook*>, kStages.size()> hooks;
  const IntelRdt* intel_rdt = nullptr;
  std::vector<uint32_t> additional_gids;
};

// pkg/cdi container-edits_unix.go fillMissingInfo (v1.0.x, as v0.5.2): a
// node with a type and a major (or type "p") is taken as given and the host
// is not consulted; otherwise the host node is looked up (missing → error,
// type different from the declared one → error), major/minor copied when
// major is 0. podshim also fills a missing fileMode from that lookup
// (v1.1.0, 457489d). Later upstream (PR #275) lstat()s minimally specified
// nodes too, only to fill their fileMode and ignoring failures; podshim does
// not, which keeps the host out of CreateContainer for them (NVIDIA's
// nvidia-caps nodes may exist only inside the container anyway).
Result<NodePart> complete_node(const DeviceNode& n, const ProcessIds& ids, HostCache& host) {
  NodePart d{&n, n.host_path.empty() ? &n.path : &n.host_path, n.type, n.major, n.minor, n.file_mode, n.uid,
             n.gid, false};
  if (!fully_specified(n)) {
    const Result<HostDevice>& h = host.get(*d.host_path);
    if (!h) return Unexpected(h.error().wrap(fmt::format("CDI device \"{}\"", n.path)));
    d.on_host = true;
    if (d.type.empty()) {
      d.type = h->type;
    } else if (d.type != h->type) {
      return fail(EINVAL, "CDI device (\"{}\", \"{}\"): host type mismatch (declared {}, host {})", n.path,
                  *d.host_path, d.type, h->type);
    }
    if (d.major == 0 && d.type != "p") {
      d.major = h->major;
      d.minor = h->minor;
    }
    if (!d.file_mode) d.file_mode = h->mode;
  }
  if (!d.uid && ids.uid > 0) d.uid = ids.uid;
  if (!d.gid && ids.gid > 0) d.gid = ids.gid;
  return d;
}

// env: unique by key, a later value replacing an earlier one in place.
void view_env(std::span<const ContainerEdits* const> parts, size_t n_env, EditsView& r) {
  r.env.reserve(n_env);
  FlatIndex<std::string_view> env_at(n_env);  // key → index in r.env
  for (const ContainerEdits* p : parts) {
    for (const auto& e : p->env) {
      bool fresh;
      size_t& at = env_at.find_or_add(env_key(e), r.env.size(), &fresh);
      if (fresh) r.env.push_back(&e);
      else r.env[at] = &e;  // a later value replaces in place
    }
  }
}

// Which entries a later one with the same key replaces (1), in one pass.
template <typename T, typename Key>
std::vector<char> replaced_by_later(const std::vector<const T*>& xs, Key key) {
  std::vector<char> replaced(xs.size(), 0);
  FlatIndex<std::string_view> last(xs.size());
  for (size_t i = 0; i < xs.size(); i++) {
    bool fresh;
    size_t& at = last.find_or_add(key(*xs[i]), i, &fresh);
    if (!fresh) replaced[at] = 1;
    at = i;
  }
  return replaced;
}

// Device nodes: unique by container path, the later one wins and takes the
// later position. Every node is completed (and may fail) in order, and each
// c/b node brings its allow rule.
Result<void> view_devices(const std::vector<const DeviceNode*>& nodes, const ProcessIds& ids, HostCache& host,
                          EditsView& r) {
  const std::vector<char> replaced = replaced_by_later(nodes, [](const DeviceNode& n) { return std::string_view(n.path); });
  r.devices.reserve(nodes.size());
  r.device_rules.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); i++) {
    const DeviceNode& n = *nodes[i];
    auto dev = complete_node(n, ids, host);
    if (!dev) return Unexpected(dev.error());
    if (dev->type == "b" || dev->type == "c") {
      std::string_view access = n.permissions;  // a view: the conditional form would copy into a temporary
      if (access.empty()) access = "rwm";
      else if (access == "none") access = "";
      r.device_rules.push_back(RulePart{dev->type, dev->major, dev->minor, access});
    }
    if (!replaced[i]) r.devices.push_back(*dev);
  }
  return {};
}

// Mounts: unique by destination (later wins, at its position), then
// stable-sorted by depth, each depth computed once.
void view_mounts(const std::vector<const Mount*>& mounts, EditsView& r) {
  const std::vector<char> replaced =
      replaced_by_later(mounts, [](const Mount& m) { return std::string_view(m.container_path); });
  std::vector<std::pair<size_t, const Mount*>> by_depth;
  by_depth.reserve(mounts.size());
  for (size_t i = 0; i < mounts.size(); i++)
    if (!replaced[i]) by_depth.emplace_back(mount_depth(mounts[i]->container_path), mounts[i]);
  std::stable_sort(by_depth.begin(), by_depth.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  r.mounts.reserve(by_depth.size());
  for (const auto& [_, m] : by_depth) r.mounts.push_back(m);
}

// Hooks by stage, the last intelRdt, the additional gids each once.
Result<void> view_hooks_rdt_gids(std::span<const ContainerEdits* const> parts, size_t n_gids, EditsView& r) {
  FlatIndex<uint32_t, char> gids(n_gids);
  for (const ContainerEdits* p : parts) {
    for (const auto& h : p->hooks) {
      auto stage = std::find_if(kStages.begin(), kStages.end(), [&](const char* s) { return h.hook_name == s; });
      if (stage == kStages.end()) return fail(EINVAL, "unknown hook name \"{}\"", h.hook_name);
      r.hooks[static_cast<size_t>(stage - kStages.begin())].push_back(&h);
    }
    if (p->intel_rdt) r.intel_rdt = &*p->intel_rdt;  // a later one replaces (ContainerEdits::append)
    for (uint32_t g : p->additional_gids)
      if (g != 0 && gids.insert(g)) r.additional_gids.push_back(g);
  }
  return {};
}

Result<void> build_view(std::span<const ContainerEdits* const> parts, const ProcessIds& ids, HostCache& host,
                        EditsView& r) {
  // Every list below is made unique by its key in one pass with a hash
  // index. Scanning the result once per entry, as before, made injection
  // quadratic in the number of requested devices.
  std::vector<const DeviceNode*> nodes;
  std::vector<const Mount*> mounts;
  size_t n_env = 0, n_nodes = 0, n_mounts = 0, n_gids = 0;
  // The lists' storage of every part is asked for here, before any is
  // read: right after a registry load the edits are out of the cache, and
  // read one part after another each miss waited for the previous one.
  for (const ContainerEdits* p : parts) {
    n_env += p->env.size();
    n_nodes += p->device_nodes.size();
    n_mounts += p->mounts.size();
    n_gids += p->additional_gids.size();
    __builtin_prefetch(p->env.data());
    __builtin_prefetch(p->device_nodes.data());
    __builtin_prefetch(p->mounts.data());
    __builtin_prefetch(p->hooks.data());
  }
  nodes.reserve(n_nodes);
  mounts.reserve(n_mounts);
  // And then the strings those lists point to (a string short enough to
  // be stored inline is prefetched with its list, at no cost).
  for (const ContainerEdits* p : parts) {
    for (const auto& e : p->env) __builtin_prefetch(e.data());
    for (const auto& n : p->device_nodes) {
      nodes.push_back(&n);
      __builtin_prefetch(n.path.data());
      __builtin_prefetch(n.host_path.data());
    }
    for (const auto& m : p->mounts) {
      mounts.push_back(&m);
      __builtin_prefetch(m.host_path.data());
      __builtin_prefetch(m.container_path.data());
      __builtin_prefetch(m.options.data());
    }
    for (const auto& h : p->hooks) __builtin_prefetch(h.args.data());
  }
  view_env(parts, n_env, r);
  PODSHIM_TRY(view_devices(nodes, ids, host, r));
  for (const ContainerEdits* p : parts)
    for (const auto& d : p->net_devices) r.net_devices.push_back(&d);
  view_mounts(mounts, r);
  return view_hooks_rdt_gids(parts, n_gids, r);
}

OciHook to_oci(const Hook& h) { return OciHook{h.path, h.args, h.env, h.timeout}; }

ResolvedEdits materialise(const EditsView& v) {
  ResolvedEdits r;
  r.env.reserve(v.env.size());
  for (const std::string* e : v.env) r.env.push_back(*e);
  r.devices.reserve(v.devices.size());
  for (const NodePart& d : v.devices)
    r.devices.push_back(LinuxDevice{d.node->path, std::string(d.type), d.major, d.minor, d.file_mode, d.uid, d.gid,
                                    *d.host_path, d.on_host});
  r.device_rules.reserve(v.device_rules.size());
  for (const RulePart& x : v.device_rules)
    r.device_rules.push_back(DeviceCgroupRule{std::string(x.type), x.major, x.minor, std::string(x.access)});
  for (const NetDevice* n : v.net_devices) r.net_devices.push_back(*n);
  r.mounts.reserve(v.mounts.size());
  for (const Mount* m : v.mounts) r.mounts.push_back(OciMount{m->container_path, m->host_path, m->type, m->options});
  std::vector<OciHook>* stages[] = {&r.hooks.prestart,        &r.hooks.create_runtime, &r.hooks.create_container,
                                    &r.hooks.start_container, &r.hooks.poststart,      &r.hooks.poststop};
  for (size_t s = 0; s < kStages.size(); s++)
    for (const Hook* h : v.hooks[s]) stages[s]->push_back(to_oci(*h));
  if (v.intel_rdt) r.intel_rdt = *v.intel_rdt;
  r.additional_gids = v.additional_gids;
  return r;
}

}  // namespace

Result<ResolvedEdits> resolve_edits(const ContainerEdits& merged, const ProcessIds& ids,
                                    const HostLookup& lookup) {
  const ContainerEdits* one = &merged;
  return resolve_edits(std::span<const ContainerEdits* const>(&one, 1), ids, lookup);
}

namespace {

// At most this many host paths get looked up: the HostCache's size. Kept
// exact, not one per node: a cache sized for every node crossed malloc's
// large-request size, and each such request consolidates the free lists.
size_t count_lookups(std::span<const ContainerEdits* const> parts) {
  size_t n = 0;
  for (const ContainerEdits* p : parts)
    for (const auto& d : p->device_nodes) n += !fully_specified(d);
  return n;
}

}  // namespace

Result<ResolvedEdits> resolve_edits(std::span<const ContainerEdits* const> parts, const ProcessIds& ids,
                                    const HostLookup& lookup) {
  HostCache host(lookup, count_lookups(parts));
  EditsView v;
  PODSHIM_TRY(build_view(parts, ids, host, v));
  return materialise(v);
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

// The two sources apply_impl reads, a ResolvedEdits and an EditsView, seen
// through the same accessors.
const std::string& env_of(const std::string& e) { return e; }
const std::string& env_of(const std::string* e) { return *e; }

struct DeviceFields {
  std::string_view path, type;
  int64_t major, minor;
  std::optional<uint32_t> file_mode, uid, gid;
};
DeviceFields fields(const LinuxDevice& d) { return {d.path, d.type, d.major, d.minor, d.file_mode, d.uid, d.gid}; }
DeviceFields fields(const NodePart& d) {
  return {d.node->path, d.type, d.major, d.minor, d.file_mode, d.uid, d.gid};
}

struct RuleFields {
  std::string_view type;
  int64_t major, minor;
  std::string_view access;
};
RuleFields fields(const DeviceCgroupRule& r) { return {r.type, r.major, r.minor, r.access}; }
RuleFields fields(const RulePart& r) { return {r.type, r.major, r.minor, r.access}; }

const NetDevice& net_of(const NetDevice& n) { return n; }
const NetDevice& net_of(const NetDevice* n) { return *n; }

struct MountFields {
  std::string_view destination, source, type;
  const std::vector<std::string>& options;
};
MountFields fields(const OciMount& m) { return {m.destination, m.source, m.type, m.options}; }
MountFields fields(const Mount* m) { return {m->container_path, m->host_path, m->type, m->options}; }

const OciHook& hook_of(const OciHook& h) { return h; }
const Hook& hook_of(const Hook* h) { return *h; }

std::array<const std::vector<OciHook>*, kStages.size()> stages_of(const ResolvedEdits& e) {
  return {&e.hooks.prestart,        &e.hooks.create_runtime, &e.hooks.create_container,
          &e.hooks.start_container, &e.hooks.poststart,      &e.hooks.poststop};
}
std::array<const std::vector<const Hook*>*, kStages.size()> stages_of(const EditsView& e) {
  std::array<const std::vector<const Hook*>*, kStages.size()> out;
  for (size_t s = 0; s < kStages.size(); s++) out[s] = &e.hooks[s];
  return out;
}

const IntelRdt* rdt_of(const ResolvedEdits& e) { return e.intel_rdt ? &*e.intel_rdt : nullptr; }
const IntelRdt* rdt_of(const EditsView& e) { return e.intel_rdt; }

// config.<keys…>, each made where absent (or null): objects on the way,
// `last` at the end; an error (a malformed config.json) names the member
// that has another type. The dotted name is built only then: this runs
// for every edit of every injection.
Result<json*> descend(json& config, std::initializer_list<const char*> keys, json::value_t last) {
  auto name = [&](size_t n) {
    std::string where;
    for (const char* k : keys) {
      if (n-- == 0) break;
      if (!where.empty()) where += '.';
      where += k;
    }
    return where;
  };
  json* at = &config;
  size_t depth = 0;
  for (const char* k : keys) {
    if (!at->is_object()) return fail(EINVAL, "OCI config: \"{}\" is not an object", name(depth));
    const json::value_t type = ++depth == keys.size() ? last : json::value_t::object;
    auto it = at->find(k);
    if (it == at->end() || it->is_null()) {
      at = &((*at)[k] = json(type));
      continue;
    }
    if (it->type() != type) return fail(EINVAL, "OCI config: \"{}\" has type {}", name(depth), it->type_name());
    at = &*it;
  }
  return at;
}

template <typename H>
json hook_json(const H& h) {
  json j = json::object();
  auto& o = j.get_ref<json::object_t&>();
  if (!h.args.empty()) o.emplace("args", h.args);
  if (!h.env.empty()) o.emplace("env", h.env);
  o.emplace("path", h.path);
  if (h.timeout) o.emplace("timeout", *h.timeout);
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

// The upstream editors' remove-then-append: `n_added` entries appended to
// `n_existing`, each first removing the first entry (in array order, earlier
// additions included) whose key equals its own; existing_key(i) is nullopt
// for an entry that matches nothing. Returns the surviving positions in
// order (existing i as i, added j as n_existing + j). One pass with a hash
// index instead of a scan of the array for every addition.
//
// When the added keys are known to be distinct (build_view de-duplicated
// them), an addition can only remove a config entry, the first with its
// key, and never one of the other additions: only the config's keys are
// indexed then, and with an empty config nothing is hashed at all.
template <typename ExistingKey, typename AddedKey>
std::vector<size_t> replace_or_append_order(size_t n_existing, ExistingKey existing_key, size_t n_added,
                                            AddedKey added_key, bool added_distinct = false) {
  const size_t total = n_existing + n_added;
  constexpr size_t kNone = SIZE_MAX;
  if (added_distinct) {
    std::vector<size_t> order;
    order.reserve(total);
    std::vector<bool> live(n_existing, true);
    if (n_existing > 0) {
      FlatIndex<std::string_view> first(n_existing);  // key → its first config entry
      for (size_t i = 0; i < n_existing; i++) {
        bool fresh;
        if (std::optional<std::string_view> k = existing_key(i)) first.find_or_add(*k, i, &fresh);
      }
      for (size_t j = 0; j < n_added; j++)
        if (const size_t* at = first.find(added_key(j))) live[*at] = false;
    }
    for (size_t i = 0; i < n_existing; i++)
      if (live[i]) order.push_back(i);
    for (size_t j = 0; j < n_added; j++) order.push_back(n_existing + j);
    return order;
  }
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
  for (size_t i = 0; i < n_existing; i++)
    if (std::optional<std::string_view> k = existing_key(i)) link(*k, i);
  for (size_t j = 0; j < n_added; j++) {
    std::string_view k = added_key(j);
    bool fresh;
    auto& fl = at.find_or_add(k, {kNone, kNone}, &fresh);
    if (fl.first != kNone) {  // remove the first live entry with this key
      live[fl.first] = false;
      fl.first = next[fl.first];
      if (fl.first == kNone) fl.second = kNone;
    }
    link(k, n_existing + j);
  }
  std::vector<size_t> order;
  order.reserve(total);
  for (size_t i = 0; i < total; i++)
    if (live[i]) order.push_back(i);
  return order;
}

// replace_or_append_order applied to a JSON array.
void replace_or_append(json& arr, const char* key, std::vector<std::pair<std::string_view, json>> added) {
  auto& v = arr.get_ref<json::array_t&>();
  std::vector<size_t> order = replace_or_append_order(
      v.size(), [&](size_t i) { return member(v[i], key); }, added.size(),
      [&](size_t j) { return added[j].first; });
  json::array_t out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(i < v.size() ? std::move(v[i]) : std::move(added[i - v.size()].second));
  v = std::move(out);
}

// process.env: a CDI value replaces the entry with its key, else is appended.
template <typename E>
Result<void> apply_env(const E& e, json& config) {
  using vt = json::value_t;
  if (!e.env.empty()) {
    auto env = descend(config, {"process", "env"}, vt::array);
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
      size_t& at = last.find_or_add(env_key(env_of(v)), end, &fresh);
      if (fresh) end++;
      value[at] = &env_of(v);
    }
    for (size_t i = 0; i < existing; i++)
      if (value[i]) arr[i] = *value[i];
    for (size_t i = existing; i < end; i++) arr.push_back(*value[i]);
  }
  return {};
}

// linux.devices (replaced by path, else appended) and their allow rules.
template <typename E>
Result<void> apply_devices(const E& e, json& config) {
  using vt = json::value_t;
  if (!e.devices.empty() || !e.device_rules.empty()) {
    auto devices = descend(config, {"linux", "devices"}, vt::array);
    if (!devices) return Unexpected(devices.error());
    std::vector<std::pair<std::string_view, json>> added;
    added.reserve(e.devices.size());
    for (const auto& x : e.devices) {
      DeviceFields d = fields(x);
      // Keys inserted in their sorted order, each at the end of the map.
      json j = json::object();
      auto& o = j.get_ref<json::object_t&>();
      if (d.file_mode) o.emplace_hint(o.end(), "fileMode", *d.file_mode);
      if (d.gid) o.emplace_hint(o.end(), "gid", *d.gid);
      o.emplace_hint(o.end(), "major", d.major);
      o.emplace_hint(o.end(), "minor", d.minor);
      o.emplace_hint(o.end(), "path", d.path);
      o.emplace_hint(o.end(), "type", d.type);
      if (d.uid) o.emplace_hint(o.end(), "uid", *d.uid);
      added.emplace_back(d.path, std::move(j));
    }
    replace_or_append(**devices, "path", std::move(added));
    if (!e.device_rules.empty()) {
      auto rules = descend(config, {"linux", "resources", "devices"}, vt::array);
      if (!rules) return Unexpected(rules.error());
      // Appended after any deny-all rule: later rules win in the device cgroup.
      auto& list = (*rules)->get_ref<json::array_t&>();
      list.reserve(list.size() + e.device_rules.size());
      for (const auto& x : e.device_rules) {
        RuleFields r = fields(x);
        json j = json::object();
        auto& o = j.get_ref<json::object_t&>();
        if (!r.access.empty()) o.emplace_hint(o.end(), "access", r.access);
        o.emplace_hint(o.end(), "allow", true);
        o.emplace_hint(o.end(), "major", r.major);
        o.emplace_hint(o.end(), "minor", r.minor);
        o.emplace_hint(o.end(), "type", r.type);
        list.push_back(std::move(j));
      }
    }
  }
  return {};
}

// linux.netDevices.
template <typename E>
Result<void> apply_net_devices(const E& e, json& config) {
  using vt = json::value_t;
  if (!e.net_devices.empty()) {
    auto net = descend(config, {"linux", "netDevices"}, vt::object);
    if (!net) return Unexpected(net.error());
    for (const auto& x : e.net_devices) {
      const NetDevice& n = net_of(x);
      (**net)[n.host_interface_name] = json{{"name", n.name}};
    }
  }
  return {};
}

// mounts: replaced by destination, else appended; then all sorted by depth.
template <typename E>
Result<void> apply_mounts(const E& e, json& config) {
  using vt = json::value_t;
  if (!e.mounts.empty()) {
    auto mounts = descend(config, {"mounts"}, vt::array);
    if (!mounts) return Unexpected(mounts.error());
    json& arr = **mounts;
    std::vector<std::pair<std::string_view, json>> added;  // first match only is replaced, as upstream
    added.reserve(e.mounts.size());
    for (const auto& x : e.mounts) {
      MountFields m = fields(x);
      json j = json::object();
      auto& o = j.get_ref<json::object_t&>();
      o.emplace_hint(o.end(), "destination", m.destination);
      if (!m.options.empty()) o.emplace_hint(o.end(), "options", m.options);
      if (!m.source.empty()) o.emplace_hint(o.end(), "source", m.source);
      if (!m.type.empty()) o.emplace_hint(o.end(), "type", m.type);
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
  return {};
}

// hooks, appended to their stage.
template <typename E>
Result<void> apply_hooks(const E& e, json& config) {
  using vt = json::value_t;
  const auto stages = stages_of(e);
  if (std::any_of(stages.begin(), stages.end(), [](const auto* l) { return !l->empty(); })) {
    for (size_t s = 0; s < kStages.size(); s++) {
      if (stages[s]->empty()) continue;
      auto stage = descend(config, {"hooks", kStages[s]}, vt::array);
      if (!stage) return Unexpected(stage.error());
      for (const auto& h : *stages[s]) (*stage)->push_back(hook_json(hook_of(h)));
    }
  }
  return {};
}

// linux.intelRdt.
template <typename E>
Result<void> apply_intel_rdt(const E& e, json& config) {
  using vt = json::value_t;
  if (const IntelRdt* rdt = rdt_of(e)) {
    auto lnx = descend(config, {"linux"}, vt::object);
    if (!lnx) return Unexpected(lnx.error());
    json r = json::object();
    const IntelRdt& i = *rdt;
    if (!i.clos_id.empty()) r["closID"] = i.clos_id;
    if (!i.l3_cache_schema.empty()) r["l3CacheSchema"] = i.l3_cache_schema;
    if (!i.mem_bw_schema.empty()) r["memBwSchema"] = i.mem_bw_schema;
    if (i.schemata) r["schemata"] = *i.schemata;
    if (i.enable_monitoring) r["enableMonitoring"] = true;
    (**lnx)["intelRdt"] = std::move(r);
  }
  return {};
}

// process.user.additionalGids, each once.
template <typename E>
Result<void> apply_additional_gids(const E& e, json& config) {
  using vt = json::value_t;
  if (!e.additional_gids.empty()) {
    auto gids = descend(config, {"process", "user", "additionalGids"}, vt::array);
    if (!gids) return Unexpected(gids.error());
    for (uint32_t g : e.additional_gids) {
      bool present = std::any_of((*gids)->begin(), (*gids)->end(),
                                 [&](const json& x) { return x.is_number() && x.get<int64_t>() == g; });
      if (!present) (*gids)->push_back(g);
    }
  }
  return {};
}

template <typename E>
Result<void> apply_impl(const E& e, json& config) {
  if (!config.is_object()) return fail(EINVAL, "OCI config is not a JSON object");
  PODSHIM_TRY(apply_env(e, config));
  PODSHIM_TRY(apply_devices(e, config));
  PODSHIM_TRY(apply_net_devices(e, config));
  PODSHIM_TRY(apply_mounts(e, config));
  PODSHIM_TRY(apply_hooks(e, config));
  PODSHIM_TRY(apply_intel_rdt(e, config));
  PODSHIM_TRY(apply_additional_gids(e, config));
  return {};
}

// The text back end: the edits go straight from the EditsView into the
// output, written as nlohmann's dump() would write the tree apply_impl
// builds; the config itself stays an nlohmann tree and is only given the
// containers apply_impl would create (by the same descend() calls, so with the
// same errors) and the rarely-used edits (netDevices, intelRdt, gids) that
// apply_impl would make.
//
// An entry of one of the config's lists: a config entry kept as is, or one
// from the edits.
template <typename T>
struct Entry {
  const json* existing;
  const T* added;
};

template <typename T>
using Entries = std::vector<Entry<T>>;

void write_node(JsonWriter& w, const NodePart& d) {
  w.begin_object();
  if (d.file_mode) w.plain_key("fileMode"), w.unsigned_integer(*d.file_mode);
  if (d.gid) w.plain_key("gid"), w.unsigned_integer(*d.gid);
  w.plain_key("major"), w.integer(d.major);
  w.plain_key("minor"), w.integer(d.minor);
  w.plain_key("path"), w.string(d.node->path);
  w.plain_key("type"), w.string(d.type);
  if (d.uid) w.plain_key("uid"), w.unsigned_integer(*d.uid);
  w.end_object();
}

void write_node(JsonWriter& w, const RulePart& r) {
  w.begin_object();
  if (!r.access.empty()) w.plain_key("access"), w.string(r.access);
  w.plain_key("allow"), w.boolean(true);
  w.plain_key("major"), w.integer(r.major);
  w.plain_key("minor"), w.integer(r.minor);
  w.plain_key("type"), w.string(r.type);
  w.end_object();
}

void write_strings(JsonWriter& w, const std::vector<std::string>& v) {
  w.begin_array();
  for (const auto& s : v) w.element(), w.string(s);
  w.end_array();
}

void write_node(JsonWriter& w, const Mount& m) {
  w.begin_object();
  w.plain_key("destination"), w.string(m.container_path);
  if (!m.options.empty()) w.plain_key("options"), write_strings(w, m.options);
  if (!m.host_path.empty()) w.plain_key("source"), w.string(m.host_path);
  if (!m.type.empty()) w.plain_key("type"), w.string(m.type);
  w.end_object();
}

void write_node(JsonWriter& w, const Hook& h) {
  w.begin_object();
  if (!h.args.empty()) w.plain_key("args"), write_strings(w, h.args);
  if (!h.env.empty()) w.plain_key("env"), write_strings(w, h.env);
  w.plain_key("path"), w.string(h.path);
  if (h.timeout) w.plain_key("timeout"), w.integer(*h.timeout);
  w.end_object();
}

void write_node(JsonWriter& w, const std::string& env) { w.string(env); }

template <typename T>
void write_entries(JsonWriter& w, const Entries<T>& list) {
  w.begin_array();
  for (const auto& x : list) {
    w.element();
    if (x.existing) w.value(*x.existing);
    else write_node(w, *x.added);
  }
  w.end_array();
}

// The lists the text back end writes in place of the config's arrays.
struct Spliced {
  const json* env_at = nullptr;
  Entries<std::string> env;
  const json* devices_at = nullptr;
  Entries<NodePart> devices;
  const json* rules_at = nullptr;
  Entries<RulePart> rules;
  const json* mounts_at = nullptr;
  Entries<Mount> mounts;
  std::array<const json*, kStages.size()> hooks_at{};
  std::array<Entries<Hook>, kStages.size()> hooks;

  bool write(const json& j, JsonWriter& w) const {
    if (!j.is_array()) return false;
    if (&j == env_at) return write_entries(w, env), true;
    if (&j == devices_at) return write_entries(w, devices), true;
    if (&j == rules_at) return write_entries(w, rules), true;
    if (&j == mounts_at) return write_entries(w, mounts), true;
    for (size_t s = 0; s < kStages.size(); s++)
      if (&j == hooks_at[s]) return write_entries(w, hooks[s]), true;
    return false;
  }
};

// About the bytes an entry takes in the output: its strings, the fixed text
// around them (keys, quotes, numbers) and, when indented, `line` bytes of
// newline and indentation per line. An estimate close to the real size
// keeps the writer from touching (and faulting in) memory it never fills.
size_t strings_size(const std::vector<std::string>& v, size_t line) {
  size_t n = 2 + line;
  for (const auto& s : v) n += s.size() + 3 + line;
  return n;
}
size_t entry_size(const std::string& env, size_t line) { return env.size() + 3 + line; }
size_t entry_size(const NodePart& d, size_t line) { return d.node->path.size() + 90 + 9 * line; }
size_t entry_size(const RulePart&, size_t line) { return 64 + 7 * line; }
size_t entry_size(const Mount& m, size_t line) {
  return m.container_path.size() + m.host_path.size() + m.type.size() + 56 + 6 * line + strings_size(m.options, line);
}
size_t entry_size(const Hook& h, size_t line) {
  return h.path.size() + 48 + 6 * line + strings_size(h.args, line) + strings_size(h.env, line);
}

template <typename T>
size_t entries_size(const Entries<T>& list, size_t line) {
  size_t n = 2 + line;
  for (const auto& x : list) n += x.existing ? 256 : entry_size(*x.added, line);
  return n;
}

template <typename T>
Entries<T> existing_entries(const json& arr, size_t extra) {
  Entries<T> out;
  out.reserve(arr.size() + extra);
  for (const auto& x : arr) out.push_back({&x, nullptr});
  return out;
}

// apply_impl's edits, in its order and with its checks, into `sp` (the big
// lists) and `config` (the containers they go into, and the small edits).
// process.env, as apply_env would leave it.
Result<void> splice_env(const EditsView& e, json& config, Spliced& sp) {
  using vt = json::value_t;
  if (!e.env.empty()) {
    auto env = descend(config, {"process", "env"}, vt::array);
    if (!env) return Unexpected(env.error());
    const json& arr = **env;
    // As apply_impl: a CDI value replaces the last config entry with its
    // key, in place; new keys are appended in first-seen order.
    // build_view made the CDI keys distinct, so only the config's are
    // indexed.
    const size_t existing = arr.size();
    std::vector<const std::string*> value(existing + e.env.size(), nullptr);
    size_t end = existing;
    if (existing == 0) {
      for (const std::string* v : e.env) value[end++] = v;
    } else {
      FlatIndex<std::string_view> last(existing);
      for (size_t i = 0; i < existing; i++) {
        bool fresh;
        if (arr[i].is_string()) last.find_or_add(env_key(arr[i].get_ref<const std::string&>()), i, &fresh) = i;
      }
      for (const std::string* v : e.env) {
        const size_t* at = last.find(env_key(*v));
        value[at ? *at : end++] = v;
      }
    }
    sp.env_at = &arr;
    sp.env.reserve(end);
    for (size_t i = 0; i < existing; i++) sp.env.push_back(value[i] ? Entry<std::string>{nullptr, value[i]}
                                                                      : Entry<std::string>{&arr[i], nullptr});
    for (size_t i = existing; i < end; i++) sp.env.push_back({nullptr, value[i]});
  }
  return {};
}

// linux.devices and their rules, as apply_devices would leave them.
Result<void> splice_devices(const EditsView& e, json& config, Spliced& sp) {
  using vt = json::value_t;
  if (!e.devices.empty() || !e.device_rules.empty()) {
    auto devices = descend(config, {"linux", "devices"}, vt::array);
    if (!devices) return Unexpected(devices.error());
    const json& arr = **devices;
    std::vector<size_t> order = replace_or_append_order(
        arr.size(), [&](size_t i) { return member(arr[i], "path"); }, e.devices.size(),
        [&](size_t j) { return std::string_view(e.devices[j].node->path); }, /*added_distinct=*/true);
    sp.devices_at = &arr;
    sp.devices.reserve(order.size());
    for (size_t i : order)
      sp.devices.push_back(i < arr.size() ? Entry<NodePart>{&arr[i], nullptr}
                                          : Entry<NodePart>{nullptr, &e.devices[i - arr.size()]});
    if (!e.device_rules.empty()) {
      auto rules = descend(config, {"linux", "resources", "devices"}, vt::array);
      if (!rules) return Unexpected(rules.error());
      sp.rules_at = *rules;
      sp.rules = existing_entries<RulePart>(**rules, e.device_rules.size());
      for (const auto& r : e.device_rules) sp.rules.push_back({nullptr, &r});
    }
  }
  return {};
}

// mounts, as apply_mounts would leave them.
Result<void> splice_mounts(const EditsView& e, json& config, Spliced& sp) {
  using vt = json::value_t;
  if (!e.mounts.empty()) {
    auto mounts = descend(config, {"mounts"}, vt::array);
    if (!mounts) return Unexpected(mounts.error());
    const json& arr = **mounts;
    std::vector<size_t> order = replace_or_append_order(
        arr.size(), [&](size_t i) { return member(arr[i], "destination"); }, e.mounts.size(),
        [&](size_t j) { return std::string_view(e.mounts[j]->container_path); }, /*added_distinct=*/true);
    // As apply_impl: every mount, the config's included, stably by depth.
    std::vector<std::pair<size_t, size_t>> by_depth;  // (depth, position)
    by_depth.reserve(order.size());
    for (size_t i : order) {
      std::string_view d;
      if (i < arr.size()) d = member(arr[i], "destination").value_or(std::string_view());
      else d = e.mounts[i - arr.size()]->container_path;
      by_depth.emplace_back(mount_depth(d), i);
    }
    std::stable_sort(by_depth.begin(), by_depth.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    sp.mounts_at = &arr;
    sp.mounts.reserve(by_depth.size());
    for (const auto& [_, i] : by_depth)
      sp.mounts.push_back(i < arr.size() ? Entry<Mount>{&arr[i], nullptr}
                                         : Entry<Mount>{nullptr, e.mounts[i - arr.size()]});
  }
  return {};
}

// hooks, as apply_hooks would leave them.
Result<void> splice_hooks(const EditsView& e, json& config, Spliced& sp) {
  using vt = json::value_t;
  if (std::any_of(e.hooks.begin(), e.hooks.end(), [](const auto& l) { return !l.empty(); })) {
    for (size_t s = 0; s < kStages.size(); s++) {
      if (e.hooks[s].empty()) continue;
      auto stage = descend(config, {"hooks", kStages[s]}, vt::array);
      if (!stage) return Unexpected(stage.error());
      sp.hooks_at[s] = *stage;
      sp.hooks[s] = existing_entries<Hook>(**stage, e.hooks[s].size());
      for (const Hook* h : e.hooks[s]) sp.hooks[s].push_back({nullptr, h});
    }
  }
  return {};
}

Result<void> splice_impl(const EditsView& e, json& config, Spliced& sp) {
  if (!config.is_object()) return fail(EINVAL, "OCI config is not a JSON object");
  PODSHIM_TRY(splice_env(e, config, sp));
  PODSHIM_TRY(splice_devices(e, config, sp));
  PODSHIM_TRY(apply_net_devices(e, config));  // rare and small: into the tree
  PODSHIM_TRY(splice_mounts(e, config, sp));
  PODSHIM_TRY(splice_hooks(e, config, sp));
  // intelRdt and additionalGids as apply_impl makes them (both rare, small).
  EditsView rest;
  rest.intel_rdt = e.intel_rdt;
  rest.additional_gids = e.additional_gids;
  return apply_impl(rest, config);
}

}  // namespace

Result<void> apply_to_oci(const ResolvedEdits& e, json& config) { return apply_impl(e, config); }

Result<void> inject_edits_oci(std::span<const ContainerEdits* const> parts, json& config, const HostLookup& lookup) {
  HostCache host(lookup, count_lookups(parts));
  EditsView v;
  if (auto r = build_view(parts, process_ids_from_oci(config), host, v); !r)
    return Unexpected(r.error().wrap("failed to inject CDI devices"));
  json copy = config;
  PODSHIM_TRY(apply_impl(v, copy));
  config = std::move(copy);
  return {};
}

Result<std::string> inject_edits_oci_text(std::span<const ContainerEdits* const> parts, json config, int indent,
                                          const HostLookup& lookup) {
  HostCache host(lookup, count_lookups(parts));
  EditsView v;
  if (auto r = build_view(parts, process_ids_from_oci(config), host, v); !r)
    return Unexpected(r.error().wrap("failed to inject CDI devices"));
  Spliced sp;
  PODSHIM_TRY(splice_impl(v, config, sp));
  // Each line's indentation, as an average depth of 4.
  const size_t line = indent < 0 ? 0 : 1 + 4 * static_cast<size_t>(indent);
  size_t size = 4096 + entries_size(sp.env, line) + entries_size(sp.devices, line) + entries_size(sp.rules, line) +
                entries_size(sp.mounts, line);
  for (const auto& h : sp.hooks) size += entries_size(h, line);
  JsonWriter w(indent, size);
  w.set_override([&sp](const json& j, JsonWriter& jw) { return sp.write(j, jw); });
  w.value(config);
  if (!w.ok())
    return fail(EINVAL, "OCI config: a CDI edit is not valid UTF-8: {}",
                json(w.bad_string()).dump(-1, ' ', false, json::error_handler_t::replace));
  return w.take();
}

}  // namespace podshim::cdi
