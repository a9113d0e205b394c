// /etc/podshim/config.yaml: podshimd's configuration. One schema (config.cc)
// lists every key with its type and range; docs/config.md and
// docs/config.yaml.example are tested against it. Unknown, repeated and
// retired keys are errors naming file:line and the key, so a typo never
// silently falls back to a default.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/result.h"
#include "shim/core/cgroup_types.h"
#include "shim/core/defaults.h"

namespace podshim::core {

inline constexpr std::string_view kDefaultConfigPath = "/etc/podshim/config.yaml";

// One access rule for the status socket: requests whose method is in
// `methods` and whose path matches `path` (fnmatch glob, "*" spans "/") are
// allowed for peers whose uid is in `uids` or who are members (primary or
// supplementary, from SO_PEERCRED/SO_PEERGROUPS) of a group in `groups`.
// The first rule whose method and path match decides; no match → 403.
// The group names "@socket" and "@admin" stand for socket.group and
// socket.admin_group.
struct AccessRule {
  std::string path = "*";
  std::vector<std::string> methods;
  std::vector<uid_t> uids;
  std::vector<std::string> groups;
};

// The built-in rules: GET/HEAD for root, @socket and @admin; POST/PUT/DELETE
// for root and @admin.
std::vector<AccessRule> default_access_rules();

struct Config {
  log::Level log_level = log::Level::Info;

  // socket:
  std::string socket_path = std::string(kDefaultSocketPath);
  std::string socket_group;  // empty: the socket keeps root's group
  mode_t socket_mode = kDefaultSocketMode;
  std::string admin_group;   // empty: writes are root-only
  std::vector<AccessRule> access = default_access_rules();

  // http:
  std::chrono::seconds http_timeout = kDefaultHttpTimeout;  // idle/slow client cut-off
  size_t max_body_bytes = kDefaultMaxBodyBytes;
  unsigned max_connections = kDefaultMaxConnections;
  // /v1/watch queues: per watcher and across all watchers (ServerOptions).
  size_t max_watch_backlog_bytes = kDefaultMaxWatchBacklogBytes;
  size_t max_watch_total_bytes = kDefaultMaxWatchTotalBytes;

  std::string state_dir = "/var/lib/podshim";

  // cgroup:
  std::string cgroup_root = "/sys/fs/cgroup";
  cgroup::DriverKind cgroup_driver = cgroup::DriverKind::Auto;
  // auto: learn the container runtime's shares→cpu.weight formula from the
  // weights it wrote (cgroup/convert.h WeightFormulaTracker).
  cgroup::WeightFormulaSetting weight_formula = cgroup::WeightFormulaSetting::Auto;
  // Defaults and meaning: cgroup::EngineOptions (one default per setting).
  std::chrono::milliseconds shrink_timeout = cgroup::EngineOptions{}.shrink_timeout;
  uint64_t shrink_headroom_bytes = cgroup::EngineOptions{}.shrink_headroom_bytes;
  std::chrono::milliseconds shrink_settle = cgroup::EngineOptions{}.settle;
  std::chrono::milliseconds shrink_growth_window = cgroup::EngineOptions{}.shrink_growth_window;
  double shrink_pressure_threshold = cgroup::EngineOptions{}.shrink_pressure_threshold;
  std::chrono::milliseconds systemd_call_timeout = cgroup::EngineOptions{}.unit_call_timeout;

  // node: unset → the machine's (online CPUs, MemTotal)
  std::optional<int64_t> allocatable_cpu_milli;
  std::optional<int64_t> allocatable_memory_bytes;

  // nri:
  bool nri_enabled = true;
  std::string nri_socket = std::string(kDefaultNriSocket);
  std::string nri_plugin_name = std::string(kDefaultNriPluginName);
  std::string nri_plugin_index = std::string(kDefaultNriPluginIndex);

  // cdi:
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};

  // metrics: the read-only TCP /metrics listener ("" = off) and the cap on
  // containers in the per-container families.
  std::string metrics_listen;
  size_t metrics_max_containers = 1024;

  // readback: the kernel's values for every container, and drift from the
  // allocated ones (shim/core/readback.h).
  std::chrono::milliseconds readback_interval{5000};  // 0: only at sync and runtime events
  std::chrono::microseconds readback_slice_budget{2000};  // loop time per slice
  size_t readback_fd_cache = 256;  // containers whose attribute fds stay open
  bool repair_drift = false;       // rewrite the allocated values on drift
  // debug: test seams of the cgroup engine (tests/kernel/crash holds a
  // crash window open with them); zero, the default, is off.
  std::chrono::milliseconds test_pause_after_clamp{0}, test_pause_after_step{0};

  // Where each key that is not a default came from: "config.yaml:12" or
  // "--socket" (for errors found after parsing, e.g. binding metrics.listen).
  std::map<std::string, std::string, std::less<>> origin;
  // origin[key], or "default".
  std::string where(std::string_view key) const;
};

// One key of the schema (shim/core/config.cc), the single list the parser,
// `podshimd --help-config`, the docs test and the example test read.
struct ConfigKey {
  std::string_view key;   // dotted: "cgroup.shrink_timeout_ms"
  std::string_view type;  // "integer 1..1900 (ms)"
  std::string_view flag = {};  // the podshimd flag that overrides it, if any
  std::string_view unset = {};  // what an empty (or absent optional) value means, if allowed
};
const std::vector<ConfigKey>& config_keys();

// A key's value in `c` as the file would spell it ("" for an unset optional).
std::string config_value(const Config& c, std::string_view key);

// Applies a podshimd flag ("--socket") through the same checks as its key in
// the file; the error names the flag and the key.
Result<void> apply_flag(Config& c, std::string_view flag, std::string_view value);

// Checks of keys that constrain each other, after the file and the flags;
// errors name where each value came from.
Result<void> check_together(const Config& c);

// Parses YAML text; `source` names it in errors ("config.yaml: unknown key
// 'socket.grop'").
Result<Config> parse_config(std::string_view yaml, std::string_view source);

// Loads a file. A missing file yields the defaults when `must_exist` is false
// (the packaged default path), an error otherwise (an explicit --config).
Result<Config> load_config(const std::string& path, bool must_exist);

std::string_view to_string(cgroup::DriverKind d);
std::string_view to_string(cgroup::WeightFormula f);
std::string_view to_string(cgroup::WeightFormulaSetting s);

}  // namespace podshim::core
