#include "shim/core/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <set>

#include "base/fs.h"
#include "base/str.h"
#include "shim/core/quantity.h"

namespace podshim::core {

namespace {

// Where a value came from, for its errors: "config.yaml:12" or "--socket".
struct Ctx {
  std::string where;
  std::string_view key = {};  // the schema key being read

  template <typename... Args>
  Unexpected err(fmt::format_string<Args...> f, Args&&... args) const {
    return fail(EINVAL, "{}: {}", where, fmt::format(f, std::forward<Args>(args)...));
  }
};

std::string join(std::string_view prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
}

std::string at(std::string_view source, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return std::string(source);
  return fmt::format("{}:{}", source, m.line + 1);
}

Result<std::string> scalar(const Ctx& ctx, const YAML::Node& n, std::string_view key) {
  if (!n.IsScalar()) return ctx.err("'{}' must be a scalar", key);
  return n.Scalar();
}

Result<bool> boolean(const Ctx& ctx, const YAML::Node& n, std::string_view key) {
  auto s = scalar(ctx, n, key);
  if (!s) return Unexpected(s.error());
  if (*s == "true" || *s == "on" || *s == "yes") return true;
  if (*s == "false" || *s == "off" || *s == "no") return false;
  return ctx.err("'{}' must be true or false, not '{}'", key, *s);
}

Result<uint64_t> number(const Ctx& ctx, const YAML::Node& n, std::string_view key, uint64_t min, uint64_t max) {
  auto s = scalar(ctx, n, key);
  if (!s) return Unexpected(s.error());
  auto v = str::parse_u64(*s);
  if (!v) return ctx.err("'{}': {}", key, v.error().message);
  if (*v > max) return ctx.err("'{}' = {} exceeds {}", key, *v, max);
  if (*v < min) return ctx.err("'{}' must be at least {}, not {}", key, min, *v);
  return *v;
}

Result<std::vector<std::string>> string_list(const Ctx& ctx, const YAML::Node& n, std::string_view key) {
  if (!n.IsSequence()) return ctx.err("'{}' must be a list", key);
  std::vector<std::string> out;
  for (const auto& e : n) {
    auto s = scalar(ctx, e, key);
    if (!s) return Unexpected(s.error());
    out.push_back(*s);
  }
  return out;
}

Result<std::string> abs_path(const Ctx& ctx, const YAML::Node& n, std::string_view key) {
  auto s = scalar(ctx, n, key);
  if (!s) return Unexpected(s.error());
  if (s->empty() || s->front() != '/') return ctx.err("'{}' must be an absolute path, not '{}'", key, *s);
  return s;
}

// The keys of one mapping: each known, none twice. yaml-cpp keeps a repeated
// key and answers lookups with its first value, so a second `log_level:` would
// be silently ignored; YAML 1.2 §3.2.1.1 requires keys to be unique.
Result<void> check_map(std::string_view source, const YAML::Node& n, std::string_view prefix,
                       const std::function<bool(std::string_view)>& known) {
  if (!n.IsMap()) return Ctx{at(source, n)}.err("'{}' must be a mapping", prefix.empty() ? "<top>" : prefix);
  std::set<std::string> seen;
  for (const auto& kv : n) {
    const Ctx ctx{at(source, kv.first)};
    if (!kv.first.IsScalar()) return ctx.err("a key of '{}' is not a scalar", prefix.empty() ? "<top>" : prefix);
    const std::string k = kv.first.Scalar();
    if (!seen.insert(k).second) return ctx.err("'{}' is given twice", join(prefix, k));
    if (!known(k)) return ctx.err("unknown key '{}'", join(prefix, k));
  }
  return {};
}

std::string show_list(const std::vector<std::string>& l) {
  std::string out = "[";
  for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l[i];
  return out + "]";
}

Result<std::vector<AccessRule>> parse_access(std::string_view source, const YAML::Node& n) {
  if (!n.IsSequence()) return Ctx{at(source, n)}.err("'access' must be a list of rules");
  std::vector<AccessRule> out;
  size_t idx = 0;
  for (const auto& r : n) {
    std::string where = fmt::format("access[{}]", idx++);
    const Ctx ctx{at(source, r)};
    PODSHIM_TRY(check_map(source, r, where, [](std::string_view k) {
      return k == "path" || k == "methods" || k == "uids" || k == "groups";
    }));
    AccessRule rule;
    if (r["path"]) {
      auto p = scalar(ctx, r["path"], where + ".path");
      if (!p) return Unexpected(p.error());
      rule.path = *p;
    }
    if (!r["methods"]) return ctx.err("'{}.methods' is required", where);
    auto m = string_list(ctx, r["methods"], where + ".methods");
    if (!m) return Unexpected(m.error());
    for (const auto& meth : *m) {
      static const std::set<std::string> known{"GET", "HEAD", "POST", "PUT", "DELETE", "*"};
      if (!known.count(meth)) return ctx.err("'{}.methods': unknown method '{}'", where, meth);
    }
    rule.methods = *m;
    if (r["uids"]) {
      if (!r["uids"].IsSequence()) return ctx.err("'{}.uids' must be a list", where);
      for (const auto& u : r["uids"]) {
        auto v = number(ctx, u, where + ".uids", 0, UINT32_MAX - 1);
        if (!v) return Unexpected(v.error());
        rule.uids.push_back(static_cast<uid_t>(*v));
      }
    }
    if (r["groups"]) {
      auto g = string_list(ctx, r["groups"], where + ".groups");
      if (!g) return Unexpected(g.error());
      rule.groups = *g;
    }
    out.push_back(std::move(rule));
  }
  return out;
}

std::string show_access(const std::vector<AccessRule>& rules) {
  std::string out;
  for (const auto& r : rules) {
    std::vector<std::string> uids;
    for (uid_t u : r.uids) uids.push_back(std::to_string(u));
    out += fmt::format("{{path: {}, methods: {}, uids: {}, groups: {}}}", r.path, show_list(r.methods),
                       show_list(uids), show_list(r.groups));
  }
  return out;
}

// ---- the schema ------------------------------------------------------------------------

// How a key is read (the same for the file and a flag) and shown.
using Setter = std::function<Result<void>(const Ctx&, const YAML::Node&, Config&, std::string_view source)>;
using Shower = std::function<std::string(const Config&)>;

struct Entry {
  ConfigKey doc;
  Setter set;
  Shower show;
};

// A key that reads one value with `read` (the same reader for the file and a
// flag) into one member, and shows it with `show`.
template <typename T, typename Read, typename Show>
Entry field_key(ConfigKey doc, T Config::*field, Read read, Show show) {
  return {doc,
          [field, read](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
            auto v = read(ctx, n, ctx.key);
            if (!v) return Unexpected(v.error());
            c.*field = static_cast<T>(*v);
            return {};
          },
          [field, show](const Config& c) { return show(c.*field); }};
}

auto in_range(uint64_t min, uint64_t max) {
  return [min, max](const Ctx& ctx, const YAML::Node& n, std::string_view key) { return number(ctx, n, key, min, max); };
}

// A Kubernetes quantity (parse_cpu_milli, parse_memory_bytes) of at least `min`.
auto quantity(Result<int64_t> (*parse)(std::string_view), int64_t min) {
  return [parse, min](const Ctx& ctx, const YAML::Node& n, std::string_view key) -> Result<int64_t> {
    auto s = scalar(ctx, n, key);
    if (!s) return Unexpected(s.error());
    auto q = parse(*s);
    if (!q) return ctx.err("'{}': {}", key, q.error().message);
    if (*q < min) return ctx.err("'{}' must be at least {}", key, min);
    return *q;
  };
}

template <typename Rep, typename Period>
Entry duration_key(ConfigKey doc, std::chrono::duration<Rep, Period> Config::*field, uint64_t min, uint64_t max) {
  return field_key(doc, field, in_range(min, max),
                   [](std::chrono::duration<Rep, Period> d) { return std::to_string(d.count()); });
}

template <typename T>
Entry number_key(ConfigKey doc, T Config::*field, uint64_t min, uint64_t max) {
  return field_key(doc, field, in_range(min, max), [](T v) { return fmt::format("{}", v); });
}

Entry bool_key(ConfigKey doc, bool Config::*field) {
  return field_key(doc, field, boolean, [](bool b) { return std::string(b ? "true" : "false"); });
}

const auto same = [](const std::string& s) { return s; };

Entry path_key(ConfigKey doc, std::string Config::*field) { return field_key(doc, field, abs_path, same); }

Entry string_key(ConfigKey doc, std::string Config::*field) { return field_key(doc, field, scalar, same); }

// A group name, or empty for root's group: resolved when the socket is made.
Entry group_key(ConfigKey doc, std::string Config::*field) {
  Entry e = string_key(doc, field);
  auto plain = e.set;
  e.set = [plain, field](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view src) -> Result<void> {
    PODSHIM_TRY(plain(ctx, n, c, src));
    const std::string& g = c.*field;
    const bool ok = std::all_of(g.begin(), g.end(), [](char ch) {
      return isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
    });
    if (!ok || g.size() > 32) return ctx.err("'{}' is not a group name: '{}'", ctx.key, g);
    return {};
  };
  return e;
}

std::string_view level_name(log::Level l) {
  switch (l) {
    case log::Level::Err: return "err";
    case log::Level::Warning: return "warning";
    case log::Level::Notice: return "notice";
    case log::Level::Info: return "info";
    case log::Level::Debug: return "debug";
  }
  return "info";
}

// log_level, the status socket, access rules and the state directory.
void add_daemon_keys(std::vector<Entry>& v) {
  v.push_back({{"log_level", "err|warning|notice|info|debug", "--log-level"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto s = scalar(ctx, n, "log_level");
                 if (!s) return Unexpected(s.error());
                 if (!log::parse_level(*s, &c.log_level)) {
                   return ctx.err("'log_level': '{}' is not one of err, warning, notice, info, debug", *s);
                 }
                 return {};
               },
               [](const Config& c) { return std::string(level_name(c.log_level)); }});
  v.push_back(path_key({"socket.path", "absolute path", "--socket"}, &Config::socket_path));
  v.push_back(group_key({"socket.group", "group name or empty", {}, "root's group"}, &Config::socket_group));
  v.push_back({{"socket.mode", "octal mode, nothing for others"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto m = scalar(ctx, n, "socket.mode");
                 if (!m) return Unexpected(m.error());
                 char* end = nullptr;
                 unsigned long mode = std::strtoul(m->c_str(), &end, 8);
                 if (m->empty() || *end != '\0' || mode > 0777) {
                   return ctx.err("'socket.mode' must be an octal mode like \"0660\", not '{}'", *m);
                 }
                 if (mode & 0007) return ctx.err("'socket.mode' {} must not grant access to others", *m);
                 c.socket_mode = static_cast<mode_t>(mode);
                 return {};
               },
               [](const Config& c) { return fmt::format("{:04o}", c.socket_mode); }});
  v.push_back(group_key({"socket.admin_group", "group name or empty", {}, "root only"}, &Config::admin_group));
  v.push_back({{"access", "list of rules"},
               [](const Ctx&, const YAML::Node& n, Config& c, std::string_view source) -> Result<void> {
                 auto a = parse_access(source, n);
                 if (!a) return Unexpected(a.error());
                 c.access = *a;
                 return {};
               },
               [](const Config& c) { return show_access(c.access); }});
  v.push_back(duration_key({"http.timeout_seconds", "integer 1..3600 (s)"}, &Config::http_timeout, 1, 3600));
  v.push_back(number_key({"http.max_body_bytes", "integer 0..67108864"}, &Config::max_body_bytes, 0, 64 << 20));
  // The status server keeps at least one connection for root besides the
  // shared ones (shim/status/server.cc): it refuses to start below 2.
  v.push_back(number_key({"http.max_connections", "integer 2..65536"}, &Config::max_connections, 2, 65536));
  // A watcher's queue must hold at least one large event line (a container
  // with many annotations), else every such event would drop every watcher.
  v.push_back(number_key({"http.max_watch_backlog_bytes", "integer 65536..1073741824"},
                         &Config::max_watch_backlog_bytes, 64 << 10, uint64_t{1} << 30));
  v.push_back(number_key({"http.max_watch_total_bytes", "integer 65536..1073741824"},
                         &Config::max_watch_total_bytes, 64 << 10, uint64_t{1} << 30));
  v.push_back(path_key({"state_dir", "absolute path", "--state-dir"}, &Config::state_dir));
}

// cgroup.* and node.*: how resizes reach the kernel and what the node offers.
void add_cgroup_keys(std::vector<Entry>& v) {
  v.push_back(path_key({"cgroup.root", "absolute path", "--cgroup-root"}, &Config::cgroup_root));
  v.push_back({{"cgroup.driver", "auto|cgroupfs|systemd"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto s = scalar(ctx, n, "cgroup.driver");
                 if (!s) return Unexpected(s.error());
                 if (*s == "auto") c.cgroup_driver = cgroup::DriverKind::Auto;
                 else if (*s == "cgroupfs") c.cgroup_driver = cgroup::DriverKind::Cgroupfs;
                 else if (*s == "systemd") c.cgroup_driver = cgroup::DriverKind::Systemd;
                 else return ctx.err("'cgroup.driver' must be auto, cgroupfs or systemd, not '{}'", *s);
                 return {};
               },
               [](const Config& c) { return std::string(to_string(c.cgroup_driver)); }});
  v.push_back({{"cgroup.weight_formula", "auto|linear|quadratic"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto s = scalar(ctx, n, "cgroup.weight_formula");
                 if (!s) return Unexpected(s.error());
                 auto f = cgroup::parse_formula_setting(*s);
                 if (!f) return ctx.err("'cgroup.weight_formula' must be auto, linear or quadratic, not '{}'", *s);
                 c.weight_formula = *f;
                 return {};
               },
               [](const Config& c) { return std::string(to_string(c.weight_formula)); }});
  // Must stay well under NRI's 2 s request timeout.
  v.push_back(duration_key({"cgroup.shrink_timeout_ms", "integer 1..1900 (ms)"}, &Config::shrink_timeout, 1, 1900));
  v.push_back(field_key({"cgroup.shrink_headroom", "memory quantity"}, &Config::shrink_headroom_bytes,
                        quantity(parse_memory_bytes, 0),
                        [](uint64_t b) { return format_memory_bytes(static_cast<int64_t>(b)); }));
  v.push_back(duration_key({"cgroup.shrink_settle_ms", "integer (ms), <= shrink_timeout_ms/4"},
                           &Config::shrink_settle, 0, 1900));
  v.push_back(duration_key({"cgroup.shrink_growth_window_ms", "integer 0..3600000 (ms)"},
                           &Config::shrink_growth_window, 0, 3600000));
  v.push_back(number_key({"cgroup.shrink_pressure_threshold", "integer 0..100 (percent)"},
                         &Config::shrink_pressure_threshold, 0, 100));
  v.push_back(duration_key({"cgroup.systemd_call_timeout_ms", "integer 1..1900 (ms)"},
                           &Config::systemd_call_timeout, 1, 1900));
  v.push_back(duration_key({"debug.test_pause_after_clamp_ms", "integer 0..600000 (ms), tests only"},
                           &Config::test_pause_after_clamp, 0, 600000));
  v.push_back(duration_key({"debug.test_pause_after_step_ms", "integer 0..600000 (ms), tests only"},
                           &Config::test_pause_after_step, 0, 600000));
  v.push_back(field_key({"node.allocatable.cpu", "cpu quantity", {}, "the machine's online CPUs"},
                        &Config::allocatable_cpu_milli, quantity(parse_cpu_milli, 1),
                        [](std::optional<int64_t> q) { return q ? format_cpu_milli(*q) : std::string(); }));
  v.push_back(field_key({"node.allocatable.memory", "memory quantity", {}, "the machine's MemTotal"},
                        &Config::allocatable_memory_bytes, quantity(parse_memory_bytes, 1),
                        [](std::optional<int64_t> q) { return q ? format_memory_bytes(*q) : std::string(); }));
}

// nri.*, cdi.* and readback.*.
void add_nri_cdi_readback_keys(std::vector<Entry>& v) {
  v.push_back(bool_key({"nri.enabled", "boolean", "--nri"}, &Config::nri_enabled));
  v.push_back(path_key({"nri.socket", "absolute path", "--nri-socket"}, &Config::nri_socket));
  v.push_back({{"nri.plugin_name", "[A-Za-z0-9._-], 1..63 characters"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto s = scalar(ctx, n, "nri.plugin_name");
                 if (!s) return Unexpected(s.error());
                 const bool ok = !s->empty() && s->size() <= 63 && std::all_of(s->begin(), s->end(), [](char ch) {
                   return isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
                 });
                 if (!ok) return ctx.err("'nri.plugin_name' must be 1..63 of [A-Za-z0-9._-], not '{}'", *s);
                 c.nri_plugin_name = *s;
                 return {};
               },
               [](const Config& c) { return c.nri_plugin_name; }});
  v.push_back({{"nri.plugin_index", "two digits", "--nri-index"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto s = scalar(ctx, n, "nri.plugin_index");
                 if (!s) return Unexpected(s.error());
                 // NRI wants exactly two digits (pkg/adaptation plugin name "NN-name").
                 if (s->size() != 2 || !isdigit(static_cast<unsigned char>((*s)[0])) ||
                     !isdigit(static_cast<unsigned char>((*s)[1]))) {
                   return ctx.err("'nri.plugin_index' must be two digits like \"10\", not '{}'", *s);
                 }
                 c.nri_plugin_index = *s;
                 return {};
               },
               [](const Config& c) { return c.nri_plugin_index; }});
  v.push_back({{"cdi.spec_dirs", "list of absolute paths"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto l = string_list(ctx, n, "cdi.spec_dirs");
                 if (!l) return Unexpected(l.error());
                 for (const auto& d : *l) {
                   if (d.empty() || d.front() != '/') return ctx.err("'cdi.spec_dirs': '{}' is not absolute", d);
                 }
                 c.cdi_spec_dirs = *l;
                 return {};
               },
               [](const Config& c) { return show_list(c.cdi_spec_dirs); }});
  // The address itself is checked where it is bound (shim/status
  // parse_listen_address, called by podshimd after the flags); here its type.
  v.push_back(string_key({"metrics.listen", "HOST:PORT or empty", "--metrics-listen", "off"}, &Config::metrics_listen));
  v.push_back(number_key({"metrics.max_containers", "integer 0..100000"}, &Config::metrics_max_containers, 0,
                         100000));
  v.push_back({{"readback.interval_ms", "0, or integer 100..3600000 (ms)"},
               [](const Ctx& ctx, const YAML::Node& n, Config& c, std::string_view) -> Result<void> {
                 auto v = number(ctx, n, "readback.interval_ms", 0, 3600 * 1000);
                 if (!v) return Unexpected(v.error());
                 // Shorter periods cost a whole pass over every container each time.
                 if (*v != 0 && *v < 100) {
                   return ctx.err("'readback.interval_ms' must be 0 (off) or at least 100, not {}", *v);
                 }
                 c.readback_interval = std::chrono::milliseconds(*v);
                 return {};
               },
               [](const Config& c) { return std::to_string(c.readback_interval.count()); }});
  v.push_back(duration_key({"readback.slice_budget_us", "integer 50..100000 (us)"}, &Config::readback_slice_budget,
                           50, 100000));
  v.push_back(number_key({"readback.fd_cache", "integer 0..100000"}, &Config::readback_fd_cache, 0, 100000));
  v.push_back(bool_key({"readback.repair_drift", "boolean"}, &Config::repair_drift));
}

const std::vector<Entry>& schema() {
  static const std::vector<Entry> kSchema = [] {
    std::vector<Entry> v;
    add_daemon_keys(v);
    add_cgroup_keys(v);
    add_nri_cdi_readback_keys(v);
    return v;
  }();
  return kSchema;
}

// Keys of earlier versions that podshimd never read: refused with what to do
// instead, not silently accepted.
constexpr std::pair<std::string_view, std::string_view> kRetired[] = {
    {"hook.strict", "podshimd does not read it; podshim-hook takes --strict in its hooks.d entry (podshim-hook(8))"},
    {"hook.timeout_ms",
     "podshimd does not read it; podshim-hook takes --timeout-ms (default 500) in its hooks.d entry (podshim-hook(8))"},
    {"selinux.file_type",
     "podshimd does not read it; podshim-hook labels CDI mounts container_file_t with the container's MCS level"},
};

const Entry* find_entry(std::string_view key) {
  for (const auto& e : schema())
    if (e.doc.key == key) return &e;
  return nullptr;
}

// Whether `prefix` names a mapping that holds schema (or retired) keys.
bool is_section(std::string_view prefix) {
  auto under = [&](std::string_view key) {
    return key.size() > prefix.size() && key.substr(0, prefix.size()) == prefix && key[prefix.size()] == '.';
  };
  for (const auto& e : schema())
    if (under(e.doc.key)) return true;
  for (const auto& [k, why] : kRetired)
    if (under(k)) return true;
  return false;
}

Result<void> set_key(const Entry& e, const Ctx& at, const YAML::Node& n, Config& c, std::string_view source) {
  return e.set(Ctx{at.where, e.doc.key}, n, c, source);
}

// Walks one mapping: leaves go to their setter, sections recurse.
Result<void> walk(std::string_view source, const YAML::Node& n, std::string_view prefix, Config& c) {
  PODSHIM_TRY(check_map(source, n, prefix, [&](std::string_view k) {
    const std::string key = join(prefix, k);
    if (find_entry(key) || is_section(key)) return true;
    for (const auto& [r, why] : kRetired)
      if (r == key) return true;
    return false;
  }));
  for (const auto& kv : n) {
    const std::string key = join(prefix, kv.first.Scalar());
    const Ctx ctx{at(source, kv.first)};
    for (const auto& [r, why] : kRetired)
      if (r == key) return ctx.err("'{}' is no longer a setting: {}; remove it", key, why);
    if (const Entry* e = find_entry(key)) {
      if (kv.second.IsNull()) return ctx.err("'{}' has no value", key);
      PODSHIM_TRY(set_key(*e, ctx, kv.second, c, source));
      c.origin[key] = ctx.where;
      continue;
    }
    // A section: an empty one (`allocatable: {}` or `node:`) means defaults.
    if (kv.second.IsNull()) continue;
    PODSHIM_TRY(walk(source, kv.second, key, c));
  }
  return {};
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> out;
    for (const auto& e : schema()) out.push_back(e.doc);
    return out;
  }();
  return keys;
}

std::string config_value(const Config& c, std::string_view key) {
  const Entry* e = find_entry(key);
  return e ? e->show(c) : std::string();
}

std::string Config::where(std::string_view key) const {
  auto it = origin.find(key);
  return it == origin.end() ? std::string("default") : it->second;
}

Result<void> apply_flag(Config& c, std::string_view flag, std::string_view value) {
  for (const auto& e : schema()) {
    if (e.doc.flag != flag) continue;
    const Ctx ctx{std::string(flag)};
    YAML::Node n(std::string{value});
    PODSHIM_TRY(set_key(e, ctx, n, c, flag));
    c.origin[std::string(e.doc.key)] = std::string(flag);
    return {};
  }
  return fail(EINVAL, "{}: not a configuration flag", flag);
}

Result<void> check_together(const Config& c) {
  // Where to point an error about two keys: the one that was set (the last
  // given, if both were), else the default's "default".
  auto where = [&](std::string_view a, std::string_view b) {
    return c.origin.count(b) ? c.where(b) : c.where(a);
  };
  if (c.max_watch_total_bytes < c.max_watch_backlog_bytes) {
    return fail(EINVAL, "{}: 'http.max_watch_total_bytes' ({}) must be at least 'http.max_watch_backlog_bytes' ({})",
                where("http.max_watch_total_bytes", "http.max_watch_backlog_bytes"), c.max_watch_total_bytes,
                c.max_watch_backlog_bytes);
  }
  // The shrink watches under the clamp for at most a quarter of its budget
  // (cgroup/shrink.cc). A settle that was set and does not fit is refused
  // rather than cut without a word; the default settle (200 ms) shrinks to a
  // quarter of a shorter budget, as documented.
  if (c.origin.count("cgroup.shrink_settle_ms") && c.shrink_settle > c.shrink_timeout / 4) {
    return fail(EINVAL,
                "{}: 'cgroup.shrink_settle_ms' ({} ms) must be at most a quarter of 'cgroup.shrink_timeout_ms' "
                "({} ms, {}): lower the settle or raise the timeout",
                c.where("cgroup.shrink_settle_ms"), c.shrink_settle.count(), c.shrink_timeout.count(),
                c.where("cgroup.shrink_timeout_ms"));
  }
  return {};
}

std::vector<AccessRule> default_access_rules() {
  return {
      AccessRule{"*", {"GET", "HEAD"}, {0}, {"@socket", "@admin"}},
      AccessRule{"*", {"POST", "PUT", "DELETE"}, {0}, {"@admin"}},
  };
}

Result<Config> parse_config(std::string_view yaml, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return fail(EINVAL, "{}:{}: invalid YAML (column {}): {}", source, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  Config c;
  try {
    if (root && !root.IsNull()) PODSHIM_TRY(walk(source, root, "", c));
  } catch (const YAML::Exception& e) {
    return fail(EINVAL, "{}: {}", source, e.what());
  }
  PODSHIM_TRY(check_together(c));
  return c;
}

Result<Config> load_config(const std::string& path, bool must_exist) {
  auto text = fs::read_file(path, 1 << 20);
  if (!text) {
    if (text.error().code == ENOENT && !must_exist) return Config{};
    return wrap(text, fmt::format("reading config {}", path));
  }
  return parse_config(*text, path);
}

std::string_view to_string(cgroup::DriverKind d) {
  switch (d) {
    case cgroup::DriverKind::Cgroupfs: return "cgroupfs";
    case cgroup::DriverKind::Systemd: return "systemd";
    case cgroup::DriverKind::Auto: return "auto";
  }
  return "auto";
}

std::string_view to_string(cgroup::WeightFormula f) {
  return f == cgroup::WeightFormula::Linear ? "linear" : "quadratic";
}

std::string_view to_string(cgroup::WeightFormulaSetting s) { return cgroup::setting_name(s); }

}  // namespace podshim::core
