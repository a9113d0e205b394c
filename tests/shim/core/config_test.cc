#include <gtest/gtest.h>

#include <fstream>

#include "shim/core/config.h"

namespace podshim::core {
namespace {

TEST(Config, EmptyIsDefaults) {
  auto c = parse_config("", "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->socket_path, "/run/podshim/podshim.sock");
  EXPECT_EQ(c->socket_mode, 0660u);
  EXPECT_EQ(c->access.size(), 2u);
  EXPECT_FALSE(c->allocatable_cpu_milli);
  // The runtime's shares→weight formula is learned, not assumed.
  EXPECT_EQ(c->weight_formula, cgroup::WeightFormulaSetting::Auto);
}

TEST(Config, WeightFormulaSettings) {
  for (auto [y, want] : {std::pair{"auto", cgroup::WeightFormulaSetting::Auto},
                         std::pair{"linear", cgroup::WeightFormulaSetting::Linear},
                         std::pair{"quadratic", cgroup::WeightFormulaSetting::Quadratic}}) {
    auto c = parse_config(std::string("cgroup: {weight_formula: ") + y + "}", "t.yaml");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->weight_formula, want);
    EXPECT_EQ(to_string(c->weight_formula), y);
  }
  auto bad = parse_config("cgroup: {weight_formula: cubic}", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'cgroup.weight_formula' must be auto, linear or quadratic, not 'cubic'"),
            std::string::npos)
      << bad.error().message;
}

TEST(Config, FullExample) {
  auto c = parse_config(R"(
log_level: debug
socket: {path: /tmp/x.sock, group: podshim, mode: "0640", admin_group: wheel}
access:
  - {path: "/metrics", methods: [GET], uids: [0, 1000]}
  - {methods: ["*"], groups: ["@admin"]}
http: {timeout_seconds: 5, max_body_bytes: 4096, max_connections: 8, max_watch_backlog_bytes: 131072,
       max_watch_total_bytes: 262144}
state_dir: /tmp/state
cgroup: {root: /tmp/cg, driver: systemd, weight_formula: linear, shrink_timeout_ms: 500, shrink_headroom: 4Mi}
node: {allocatable: {cpu: "1500m", memory: 2Gi}}
nri: {enabled: false, socket: /tmp/nri.sock, plugin_index: "05"}
cdi: {spec_dirs: [/etc/cdi]}
selinux: {file_type: svirt_sandbox_file_t}
hook: {strict: true, timeout_ms: 100}
)", "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->log_level, log::Level::Debug);
  EXPECT_EQ(c->socket_mode, 0640u);
  EXPECT_EQ(c->access.size(), 2u);
  EXPECT_EQ(c->access[0].uids, (std::vector<uid_t>{0, 1000}));
  EXPECT_EQ(c->cgroup_driver, cgroup::DriverKind::Systemd);
  EXPECT_EQ(c->weight_formula, cgroup::WeightFormulaSetting::Linear);
  EXPECT_EQ(c->shrink_headroom_bytes, 4u << 20);
  EXPECT_EQ(c->allocatable_cpu_milli, 1500);
  EXPECT_EQ(c->allocatable_memory_bytes, int64_t{2} << 30);
  EXPECT_FALSE(c->nri_enabled);
  EXPECT_EQ(c->nri_plugin_index, "05");
  EXPECT_TRUE(c->hook_strict);
  EXPECT_EQ(c->max_watch_backlog_bytes, 131072u);
  EXPECT_EQ(c->max_watch_total_bytes, 262144u);
}

TEST(Config, WatchLimitsAreCheckedAndNamed) {
  struct { const char* yaml; const char* says; } cases[] = {
      {"http: {max_watch_backlog_bytes: 1000}", "'http.max_watch_backlog_bytes' must be at least 65536"},
      {"http: {max_watch_total_bytes: 1000}", "'http.max_watch_total_bytes' must be at least 65536"},
      {"http: {max_watch_backlog_bytes: 2147483648}", "'http.max_watch_backlog_bytes' = 2147483648 exceeds"},
      {"http: {max_watch_backlog_bytes: lots}", "'http.max_watch_backlog_bytes'"},
      {"http: {max_watch_backlog_bytes: 16777216}",
       "'http.max_watch_total_bytes' (8388608) must be at least 'http.max_watch_backlog_bytes' (16777216)"},
  };
  for (auto& c : cases) {
    auto r = parse_config(c.yaml, "c.yaml");
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
  auto ok = parse_config("http: {max_watch_backlog_bytes: 16777216, max_watch_total_bytes: 1073741824}", "c");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->max_watch_total_bytes, size_t{1} << 30);
}

TEST(Config, UnknownKeysAreNamed) {
  struct { const char* yaml; const char* key; } cases[] = {
      {"sockt: {}", "'sockt'"},
      {"socket: {grop: x}", "'socket.grop'"},
      {"node: {allocatable: {gpu: 1}}", "'node.allocatable.gpu'"},
      {"access: [{methods: [GET], user: 1}]", "'access[0].user'"},
  };
  for (auto& c : cases) {
    auto r = parse_config(c.yaml, "cfg.yaml");
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_NE(r.error().message.find(c.key), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("cfg.yaml"), std::string::npos) << r.error().message;
  }
}

TEST(Config, BadValues) {
  for (const char* y : {"socket: {mode: \"0666\"}", "socket: {path: relative}", "cgroup: {driver: lxc}",
                        "cgroup: {shrink_timeout_ms: 5000}", "node: {allocatable: {cpu: lots}}",
                        "nri: {plugin_index: 7}", "log_level: loud", "[1, 2", "hook: {strict: maybe}"}) {
    auto r = parse_config(y, "c");
    EXPECT_FALSE(r) << y;
  }
}

TEST(Config, MissingFile) {
  auto d = load_config("/nonexistent/podshim.yaml", false);
  ASSERT_TRUE(d);
  auto e = load_config("/nonexistent/podshim.yaml", true);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("/nonexistent/podshim.yaml"), std::string::npos);
}

}  // namespace
}  // namespace podshim::core

namespace podshim::core {
namespace {

// docs/config.yaml.example claims to list the defaults: it must parse and
// equal them.
TEST(Config, DocumentedExampleIsTheDefaults) {
  const char* src = getenv("PODSHIM_SRC");
  if (!src) GTEST_SKIP() << "run through meson test";
  auto c = load_config(std::string(src) + "/docs/config.yaml.example", true);
  ASSERT_TRUE(c) << c.error().message;
  Config d;
  EXPECT_EQ(c->log_level, d.log_level);
  EXPECT_EQ(c->socket_path, d.socket_path);
  EXPECT_EQ(c->socket_mode, d.socket_mode);
  EXPECT_EQ(c->socket_group, d.socket_group);
  EXPECT_EQ(c->admin_group, d.admin_group);
  ASSERT_EQ(c->access.size(), d.access.size());
  for (size_t i = 0; i < d.access.size(); ++i) {
    EXPECT_EQ(c->access[i].path, d.access[i].path);
    EXPECT_EQ(c->access[i].methods, d.access[i].methods);
    EXPECT_EQ(c->access[i].uids, d.access[i].uids);
    EXPECT_EQ(c->access[i].groups, d.access[i].groups);
  }
  EXPECT_EQ(c->http_timeout, d.http_timeout);
  EXPECT_EQ(c->max_body_bytes, d.max_body_bytes);
  EXPECT_EQ(c->max_connections, d.max_connections);
  EXPECT_EQ(c->max_watch_backlog_bytes, d.max_watch_backlog_bytes);
  EXPECT_EQ(c->max_watch_total_bytes, d.max_watch_total_bytes);
  EXPECT_EQ(c->state_dir, d.state_dir);
  EXPECT_EQ(c->cgroup_root, d.cgroup_root);
  EXPECT_EQ(c->cgroup_driver, d.cgroup_driver);
  EXPECT_EQ(c->weight_formula, d.weight_formula);
  EXPECT_EQ(c->shrink_timeout, d.shrink_timeout);
  EXPECT_EQ(c->shrink_headroom_bytes, d.shrink_headroom_bytes);
  EXPECT_EQ(c->shrink_settle, d.shrink_settle);
  EXPECT_EQ(c->shrink_growth_window, d.shrink_growth_window);
  EXPECT_EQ(c->shrink_pressure_threshold, d.shrink_pressure_threshold);
  EXPECT_EQ(c->systemd_call_timeout, d.systemd_call_timeout);
  EXPECT_EQ(c->test_pause_after_clamp, d.test_pause_after_clamp);
  EXPECT_EQ(c->test_pause_after_step, d.test_pause_after_step);
  EXPECT_EQ(c->allocatable_cpu_milli, d.allocatable_cpu_milli);
  EXPECT_EQ(c->allocatable_memory_bytes, d.allocatable_memory_bytes);
  EXPECT_EQ(c->nri_enabled, d.nri_enabled);
  EXPECT_EQ(c->nri_socket, d.nri_socket);
  EXPECT_EQ(c->nri_plugin_name, d.nri_plugin_name);
  EXPECT_EQ(c->nri_plugin_index, d.nri_plugin_index);
  EXPECT_EQ(c->cdi_spec_dirs, d.cdi_spec_dirs);
  EXPECT_EQ(c->selinux_file_type, d.selinux_file_type);
  EXPECT_EQ(c->hook_strict, d.hook_strict);
  EXPECT_EQ(c->hook_timeout, d.hook_timeout);
}

}  // namespace
}  // namespace podshim::core
