#include "shim/core/config.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "base/fs.h"
#include "base/str.h"
#include "shim/core/quantity.h"

namespace podshim::core {

namespace {

// Context for one parse: the source name for error messages.
struct Ctx {
  std::string_view source;

  template <typename... Args>
  Unexpected err(fmt::format_string<Args...> f, Args&&... args) const {
    return fail(EINVAL, "{}: {}", source, fmt::format(f, std::forward<Args>(args)...));
  }
};

std::string join(std::string_view prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
}

Result<void> check_keys(const Ctx& ctx, const YAML::Node& n, std::string_view prefix,
                        std::initializer_list<std::string_view> known) {
  if (!n.IsMap()) return ctx.err("'{}' must be a mapping", prefix.empty() ? "<top>" : prefix);
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    bool ok = false;
    for (auto w : known) ok = ok || w == k;
    if (!ok) return ctx.err("unknown key '{}'", join(prefix, k));
  }
  return {};
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

Result<uint64_t> number(const Ctx& ctx, const YAML::Node& n, std::string_view key, uint64_t max) {
  auto s = scalar(ctx, n, key);
  if (!s) return Unexpected(s.error());
  auto v = str::parse_u64(*s);
  if (!v) return ctx.err("'{}': {}", key, v.error().message);
  if (*v > max) return ctx.err("'{}' = {} exceeds {}", key, *v, max);
  return *v;
}

Result<std::vector<std::string>> string_list(const Ctx& ctx, const YAML::Node& n,
                                             std::string_view key) {
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

Result<std::vector<AccessRule>> parse_access(const Ctx& ctx, const YAML::Node& n) {
  if (!n.IsSequence()) return ctx.err("'access' must be a list of rules");
  std::vector<AccessRule> out;
  size_t idx = 0;
  for (const auto& r : n) {
    std::string where = fmt::format("access[{}]", idx++);
    PODSHIM_TRY(check_keys(ctx, r, where, {"path", "methods", "uids", "groups"}));
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
        auto v = number(ctx, u, where + ".uids", UINT32_MAX - 1);
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

Result<Config> parse_root(const Ctx& ctx, const YAML::Node& root) {
  Config c;
  if (!root || root.IsNull()) return c;  // an empty file means all defaults
  PODSHIM_TRY(check_keys(ctx, root, "",
                         {"log_level", "socket", "access", "http", "state_dir", "cgroup", "node",
                          "nri", "cdi", "selinux", "hook", "metrics", "readback", "debug"}));
  if (auto n = root["log_level"]) {
    auto s = scalar(ctx, n, "log_level");
    if (!s) return Unexpected(s.error());
    if (!log::parse_level(*s, &c.log_level)) {
      return ctx.err("'log_level': '{}' is not one of err, warning, notice, info, debug", *s);
    }
  }
  if (auto n = root["socket"]) {
    PODSHIM_TRY(check_keys(ctx, n, "socket", {"path", "group", "mode", "admin_group"}));
    if (n["path"]) {
      auto p = abs_path(ctx, n["path"], "socket.path");
      if (!p) return Unexpected(p.error());
      c.socket_path = *p;
    }
    if (n["group"]) {
      auto g = scalar(ctx, n["group"], "socket.group");
      if (!g) return Unexpected(g.error());
      c.socket_group = *g;
    }
    if (n["admin_group"]) {
      auto g = scalar(ctx, n["admin_group"], "socket.admin_group");
      if (!g) return Unexpected(g.error());
      c.admin_group = *g;
    }
    if (n["mode"]) {
      auto m = scalar(ctx, n["mode"], "socket.mode");
      if (!m) return Unexpected(m.error());
      char* end = nullptr;
      unsigned long v = std::strtoul(m->c_str(), &end, 8);
      if (m->empty() || *end != '\0' || v > 0777) {
        return ctx.err("'socket.mode' must be an octal mode like \"0660\", not '{}'", *m);
      }
      if (v & 0007) return ctx.err("'socket.mode' {} must not grant access to others", *m);
      c.socket_mode = static_cast<mode_t>(v);
    }
  }
  if (auto n = root["access"]) {
    auto a = parse_access(ctx, n);
    if (!a) return Unexpected(a.error());
    c.access = *a;
  }
  if (auto n = root["http"]) {
    PODSHIM_TRY(check_keys(ctx, n, "http",
                           {"timeout_seconds", "max_body_bytes", "max_connections", "max_watch_backlog_bytes",
                            "max_watch_total_bytes"}));
    if (n["timeout_seconds"]) {
      auto v = number(ctx, n["timeout_seconds"], "http.timeout_seconds", 3600);
      if (!v) return Unexpected(v.error());
      if (*v == 0) return ctx.err("'http.timeout_seconds' must be at least 1");
      c.http_timeout = std::chrono::seconds(*v);
    }
    if (n["max_body_bytes"]) {
      auto v = number(ctx, n["max_body_bytes"], "http.max_body_bytes", 64 << 20);
      if (!v) return Unexpected(v.error());
      c.max_body_bytes = *v;
    }
    if (n["max_connections"]) {
      auto v = number(ctx, n["max_connections"], "http.max_connections", 65536);
      if (!v) return Unexpected(v.error());
      if (*v == 0) return ctx.err("'http.max_connections' must be at least 1");
      c.max_connections = static_cast<unsigned>(*v);
    }
    // A watcher's queue must hold at least one large event line (a container
    // with many annotations), else every such event would drop every watcher.
    constexpr uint64_t kMinWatchBytes = 64 << 10, kMaxWatchBytes = uint64_t{1} << 30;
    if (n["max_watch_backlog_bytes"]) {
      auto v = number(ctx, n["max_watch_backlog_bytes"], "http.max_watch_backlog_bytes", kMaxWatchBytes);
      if (!v) return Unexpected(v.error());
      if (*v < kMinWatchBytes) return ctx.err("'http.max_watch_backlog_bytes' must be at least {}", kMinWatchBytes);
      c.max_watch_backlog_bytes = *v;
    }
    if (n["max_watch_total_bytes"]) {
      auto v = number(ctx, n["max_watch_total_bytes"], "http.max_watch_total_bytes", kMaxWatchBytes);
      if (!v) return Unexpected(v.error());
      if (*v < kMinWatchBytes) return ctx.err("'http.max_watch_total_bytes' must be at least {}", kMinWatchBytes);
      c.max_watch_total_bytes = *v;
    }
    if (c.max_watch_total_bytes < c.max_watch_backlog_bytes) {
      return ctx.err("'http.max_watch_total_bytes' ({}) must be at least 'http.max_watch_backlog_bytes' ({})",
                     c.max_watch_total_bytes, c.max_watch_backlog_bytes);
    }
  }
  if (auto n = root["state_dir"]) {
    auto p = abs_path(ctx, n, "state_dir");
    if (!p) return Unexpected(p.error());
    c.state_dir = *p;
  }
  if (auto n = root["cgroup"]) {
    PODSHIM_TRY(check_keys(ctx, n, "cgroup",
                           {"root", "driver", "weight_formula", "shrink_timeout_ms", "shrink_headroom",
                            "shrink_settle_ms", "shrink_growth_window_ms", "shrink_pressure_threshold",
                            "systemd_call_timeout_ms"}));
    if (n["root"]) {
      auto p = abs_path(ctx, n["root"], "cgroup.root");
      if (!p) return Unexpected(p.error());
      c.cgroup_root = *p;
    }
    if (n["driver"]) {
      auto s = scalar(ctx, n["driver"], "cgroup.driver");
      if (!s) return Unexpected(s.error());
      if (*s == "auto") c.cgroup_driver = cgroup::DriverKind::Auto;
      else if (*s == "cgroupfs") c.cgroup_driver = cgroup::DriverKind::Cgroupfs;
      else if (*s == "systemd") c.cgroup_driver = cgroup::DriverKind::Systemd;
      else return ctx.err("'cgroup.driver' must be auto, cgroupfs or systemd, not '{}'", *s);
    }
    if (n["weight_formula"]) {
      auto s = scalar(ctx, n["weight_formula"], "cgroup.weight_formula");
      if (!s) return Unexpected(s.error());
      auto f = cgroup::parse_formula_setting(*s);
      if (!f) return ctx.err("'cgroup.weight_formula' must be auto, linear or quadratic, not '{}'", *s);
      c.weight_formula = *f;
    }
    if (n["shrink_timeout_ms"]) {
      // Must stay well under NRI's 2 s request timeout.
      auto v = number(ctx, n["shrink_timeout_ms"], "cgroup.shrink_timeout_ms", 1900);
      if (!v) return Unexpected(v.error());
      c.shrink_timeout = std::chrono::milliseconds(*v);
    }
    if (n["shrink_headroom"]) {
      auto s = scalar(ctx, n["shrink_headroom"], "cgroup.shrink_headroom");
      if (!s) return Unexpected(s.error());
      auto b = parse_memory_bytes(*s);
      if (!b) return ctx.err("'cgroup.shrink_headroom': {}", b.error().message);
      c.shrink_headroom_bytes = static_cast<uint64_t>(*b);
    }
    if (n["shrink_settle_ms"]) {
      auto v = number(ctx, n["shrink_settle_ms"], "cgroup.shrink_settle_ms", 1900);
      if (!v) return Unexpected(v.error());
      c.shrink_settle = std::chrono::milliseconds(*v);
    }
    if (n["shrink_growth_window_ms"]) {
      auto v = number(ctx, n["shrink_growth_window_ms"], "cgroup.shrink_growth_window_ms", 3600000);
      if (!v) return Unexpected(v.error());
      c.shrink_growth_window = std::chrono::milliseconds(*v);
    }
    if (n["shrink_pressure_threshold"]) {
      auto v = number(ctx, n["shrink_pressure_threshold"], "cgroup.shrink_pressure_threshold", 100);
      if (!v) return Unexpected(v.error());
      c.shrink_pressure_threshold = static_cast<double>(*v);
    }
    if (n["systemd_call_timeout_ms"]) {
      auto v = number(ctx, n["systemd_call_timeout_ms"], "cgroup.systemd_call_timeout_ms", 1900);
      if (!v) return Unexpected(v.error());
      if (*v == 0) return ctx.err("'cgroup.systemd_call_timeout_ms' must be at least 1");
      c.systemd_call_timeout = std::chrono::milliseconds(*v);
    }
  }
  if (auto n = root["debug"]) {
    PODSHIM_TRY(check_keys(ctx, n, "debug", {"test_pause_after_clamp_ms", "test_pause_after_step_ms"}));
    if (n["test_pause_after_clamp_ms"]) {
      auto v = number(ctx, n["test_pause_after_clamp_ms"], "debug.test_pause_after_clamp_ms", 600000);
      if (!v) return Unexpected(v.error());
      c.test_pause_after_clamp = std::chrono::milliseconds(*v);
    }
    if (n["test_pause_after_step_ms"]) {
      auto v = number(ctx, n["test_pause_after_step_ms"], "debug.test_pause_after_step_ms", 600000);
      if (!v) return Unexpected(v.error());
      c.test_pause_after_step = std::chrono::milliseconds(*v);
    }
  }
  if (auto n = root["node"]) {
    PODSHIM_TRY(check_keys(ctx, n, "node", {"allocatable"}));
    if (auto a = n["allocatable"]) {
      PODSHIM_TRY(check_keys(ctx, a, "node.allocatable", {"cpu", "memory"}));
      if (a["cpu"]) {
        auto s = scalar(ctx, a["cpu"], "node.allocatable.cpu");
        if (!s) return Unexpected(s.error());
        auto v = parse_cpu_milli(*s);
        if (!v) return ctx.err("'node.allocatable.cpu': {}", v.error().message);
        c.allocatable_cpu_milli = *v;
      }
      if (a["memory"]) {
        auto s = scalar(ctx, a["memory"], "node.allocatable.memory");
        if (!s) return Unexpected(s.error());
        auto v = parse_memory_bytes(*s);
        if (!v) return ctx.err("'node.allocatable.memory': {}", v.error().message);
        c.allocatable_memory_bytes = *v;
      }
    }
  }
  if (auto n = root["nri"]) {
    PODSHIM_TRY(check_keys(ctx, n, "nri", {"enabled", "socket", "plugin_name", "plugin_index"}));
    if (n["enabled"]) {
      auto b = boolean(ctx, n["enabled"], "nri.enabled");
      if (!b) return Unexpected(b.error());
      c.nri_enabled = *b;
    }
    if (n["socket"]) {
      auto p = abs_path(ctx, n["socket"], "nri.socket");
      if (!p) return Unexpected(p.error());
      c.nri_socket = *p;
    }
    if (n["plugin_name"]) {
      auto s = scalar(ctx, n["plugin_name"], "nri.plugin_name");
      if (!s) return Unexpected(s.error());
      if (s->empty()) return ctx.err("'nri.plugin_name' must not be empty");
      c.nri_plugin_name = *s;
    }
    if (n["plugin_index"]) {
      auto s = scalar(ctx, n["plugin_index"], "nri.plugin_index");
      if (!s) return Unexpected(s.error());
      // NRI wants exactly two digits (pkg/adaptation plugin name "NN-name").
      if (s->size() != 2 || !isdigit(static_cast<unsigned char>((*s)[0])) ||
          !isdigit(static_cast<unsigned char>((*s)[1]))) {
        return ctx.err("'nri.plugin_index' must be two digits like \"10\", not '{}'", *s);
      }
      c.nri_plugin_index = *s;
    }
  }
  if (auto n = root["cdi"]) {
    PODSHIM_TRY(check_keys(ctx, n, "cdi", {"spec_dirs"}));
    if (n["spec_dirs"]) {
      auto l = string_list(ctx, n["spec_dirs"], "cdi.spec_dirs");
      if (!l) return Unexpected(l.error());
      for (const auto& d : *l) {
        if (d.empty() || d.front() != '/') return ctx.err("'cdi.spec_dirs': '{}' is not absolute", d);
      }
      c.cdi_spec_dirs = *l;
    }
  }
  if (auto n = root["selinux"]) {
    PODSHIM_TRY(check_keys(ctx, n, "selinux", {"file_type"}));
    if (n["file_type"]) {
      auto s = scalar(ctx, n["file_type"], "selinux.file_type");
      if (!s) return Unexpected(s.error());
      if (s->empty()) return ctx.err("'selinux.file_type' must not be empty");
      c.selinux_file_type = *s;
    }
  }
  if (auto n = root["hook"]) {
    PODSHIM_TRY(check_keys(ctx, n, "hook", {"strict", "timeout_ms"}));
    if (n["strict"]) {
      auto b = boolean(ctx, n["strict"], "hook.strict");
      if (!b) return Unexpected(b.error());
      c.hook_strict = *b;
    }
    if (n["timeout_ms"]) {
      auto v = number(ctx, n["timeout_ms"], "hook.timeout_ms", 60000);
      if (!v) return Unexpected(v.error());
      c.hook_timeout = std::chrono::milliseconds(*v);
    }
  }
  if (auto n = root["metrics"]) {
    PODSHIM_TRY(check_keys(ctx, n, "metrics", {"listen", "max_containers"}));
    if (n["listen"]) {
      // The address itself is checked where it is bound (shim/status
      // parse_listen_address); here only its type.
      auto s = scalar(ctx, n["listen"], "metrics.listen");
      if (!s) return Unexpected(s.error());
      c.metrics_listen = *s;
    }
    if (n["max_containers"]) {
      auto v = number(ctx, n["max_containers"], "metrics.max_containers", 100000);
      if (!v) return Unexpected(v.error());
      c.metrics_max_containers = static_cast<size_t>(*v);
    }
  }
  if (auto n = root["readback"]) {
    PODSHIM_TRY(check_keys(ctx, n, "readback", {"interval_ms", "slice_budget_us", "fd_cache", "repair_drift"}));
    if (n["interval_ms"]) {
      auto v = number(ctx, n["interval_ms"], "readback.interval_ms", 3600 * 1000);
      if (!v) return Unexpected(v.error());
      // Shorter periods cost a whole pass over every container each time.
      if (*v != 0 && *v < 100) return ctx.err("'readback.interval_ms' must be 0 (off) or at least 100, not {}", *v);
      c.readback_interval = std::chrono::milliseconds(*v);
    }
    if (n["slice_budget_us"]) {
      auto v = number(ctx, n["slice_budget_us"], "readback.slice_budget_us", 100000);
      if (!v) return Unexpected(v.error());
      if (*v < 50) return ctx.err("'readback.slice_budget_us' must be at least 50, not {}", *v);
      c.readback_slice_budget = std::chrono::microseconds(*v);
    }
    if (n["fd_cache"]) {
      auto v = number(ctx, n["fd_cache"], "readback.fd_cache", 100000);
      if (!v) return Unexpected(v.error());
      c.readback_fd_cache = static_cast<size_t>(*v);
    }
    if (n["repair_drift"]) {
      auto b = boolean(ctx, n["repair_drift"], "readback.repair_drift");
      if (!b) return Unexpected(b.error());
      c.repair_drift = *b;
    }
  }
  return c;
}

}  // namespace

std::vector<AccessRule> default_access_rules() {
  return {
      AccessRule{"*", {"GET", "HEAD"}, {0}, {"@socket", "@admin"}},
      AccessRule{"*", {"POST", "PUT", "DELETE"}, {0}, {"@admin"}},
  };
}

Result<Config> parse_config(std::string_view yaml, std::string_view source) {
  Ctx ctx{source};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return ctx.err("invalid YAML at line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  try {
    return parse_root(ctx, root);
  } catch (const YAML::Exception& e) {
    return ctx.err("{}", e.what());
  }
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
