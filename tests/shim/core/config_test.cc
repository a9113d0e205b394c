#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

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
readback: {interval_ms: 0, repair_drift: true}
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
  EXPECT_EQ(c->readback_interval, std::chrono::milliseconds(0));
  EXPECT_TRUE(c->repair_drift);
  EXPECT_EQ(c->max_watch_backlog_bytes, 131072u);
  EXPECT_EQ(c->max_watch_total_bytes, 262144u);
}

// parse_config() of `yaml` from `source` fails, its message holding each of
// `says`.
void expect_refused(std::string_view yaml, std::string_view source, std::initializer_list<std::string_view> says) {
  auto r = parse_config(yaml, source);
  ASSERT_FALSE(r) << yaml;
  for (std::string_view s : says) EXPECT_NE(r.error().message.find(s), std::string::npos) << r.error().message;
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
  for (auto& c : cases) expect_refused(c.yaml, "c.yaml", {c.says});
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
  for (auto& c : cases) expect_refused(c.yaml, "cfg.yaml", {c.key, "cfg.yaml"});
}

TEST(Config, BadValues) {
  for (const char* y : {"socket: {mode: \"0666\"}", "socket: {path: relative}", "cgroup: {driver: lxc}",
                        "cgroup: {shrink_timeout_ms: 5000}", "node: {allocatable: {cpu: lots}}",
                        "nri: {plugin_index: 7}", "log_level: loud", "[1, 2", "hook: {strict: maybe}",
                        // the status server needs one connection for root besides the shared ones
                        "http: {max_connections: 1}"}) {
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

// docs/config.yaml.example claims to list the defaults: it must parse, name
// every key of the schema, and give each its default.
TEST(Config, DocumentedExampleIsTheDefaults) {
  const char* src = getenv("PODSHIM_SRC");
  if (!src) GTEST_SKIP() << "run through meson test";
  const std::string path = std::string(src) + "/docs/config.yaml.example";
  auto c = load_config(path, true);
  ASSERT_TRUE(c) << c.error().message;
  const Config d;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& k : config_keys()) {
    EXPECT_EQ(config_value(*c, k.key), config_value(d, k.key)) << k.key;
    // The leaf name appears as a key (commented out for the optional ones).
    const std::string leaf(k.key.substr(k.key.rfind('.') == std::string_view::npos ? 0 : k.key.rfind('.') + 1));
    EXPECT_TRUE(std::regex_search(text, std::regex("(^|\\n)[ #]*" + leaf + ":"))) << k.key << " is not in " << path;
  }
}

// The table in docs/config.md lists exactly the schema's keys, with the
// schema's defaults.
TEST(Config, DocsTableIsTheSchema) {
  const char* src = getenv("PODSHIM_SRC");
  if (!src) GTEST_SKIP() << "run through meson test";
  std::ifstream in(std::string(src) + "/docs/config.md");
  ASSERT_TRUE(in);
  const Config d;
  std::set<std::string> documented;
  std::string line;
  const std::regex row(R"(^\| ((?:`[a-z_.]+`(?:, )?)+) \| ([^|]*) \|)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string cell = m[2];
    std::string keys = m[1];
    static const std::regex quoted("`([a-z_.]+)`");
    for (std::sregex_iterator it(keys.begin(), keys.end(), quoted), end; it != end; ++it) {
      const std::string key = (*it)[1];
      documented.insert(key);
      auto spec = std::find_if(config_keys().begin(), config_keys().end(), [&](auto& k) { return k.key == key; });
      if (spec == config_keys().end()) {
        ADD_FAILURE() << "docs/config.md documents '" << key << "', which the schema does not have";
        continue;
      }
      const std::string value = config_value(d, key);
      if (value.empty()) {
        EXPECT_EQ(cell, "empty (" + std::string(spec->unset) + ")") << key;
      } else if (cell.starts_with("`")) {
        std::string shown = cell.substr(1, cell.find('`', 1) - 1);
        if (shown.size() > 1 && shown.front() == '"' && shown.back() == '"') shown = shown.substr(1, shown.size() - 2);
        EXPECT_EQ(shown, value) << key << ": docs/config.md's default differs from the code's";
      } else {
        EXPECT_EQ(key, "access") << key << ": default cell '" << cell << "' is not a value";
      }
    }
  }
  for (const auto& k : config_keys()) EXPECT_TRUE(documented.count(std::string(k.key))) << k.key << " is not in docs/config.md";
}

// Every key is read by podshimd somewhere besides the parser: a key that is
// accepted and does nothing is a lie to the operator.
TEST(Config, EveryKeyHasAConsumer) {
  const char* src = getenv("PODSHIM_SRC");
  if (!src) GTEST_SKIP() << "run through meson test";
  // The member each key sets; a key missing here fails the test, so a new key
  // must name its field (and so its consumer).
  const std::map<std::string, std::string> field = {
      {"log_level", "log_level"}, {"socket.path", "socket_path"}, {"socket.group", "socket_group"},
      {"socket.mode", "socket_mode"}, {"socket.admin_group", "admin_group"}, {"access", "access"},
      {"http.timeout_seconds", "http_timeout"}, {"http.max_body_bytes", "max_body_bytes"},
      {"http.max_connections", "max_connections"}, {"http.max_watch_backlog_bytes", "max_watch_backlog_bytes"},
      {"http.max_watch_total_bytes", "max_watch_total_bytes"}, {"state_dir", "state_dir"},
      {"cgroup.root", "cgroup_root"}, {"cgroup.driver", "cgroup_driver"}, {"cgroup.weight_formula", "weight_formula"},
      {"cgroup.shrink_timeout_ms", "shrink_timeout"}, {"cgroup.shrink_headroom", "shrink_headroom_bytes"},
      {"cgroup.shrink_settle_ms", "shrink_settle"}, {"cgroup.shrink_growth_window_ms", "shrink_growth_window"},
      {"cgroup.shrink_pressure_threshold", "shrink_pressure_threshold"},
      {"cgroup.systemd_call_timeout_ms", "systemd_call_timeout"},
      {"debug.test_pause_after_clamp_ms", "test_pause_after_clamp"},
      {"debug.test_pause_after_step_ms", "test_pause_after_step"}, {"node.allocatable.cpu", "allocatable_cpu_milli"},
      {"node.allocatable.memory", "allocatable_memory_bytes"}, {"nri.enabled", "nri_enabled"},
      {"nri.socket", "nri_socket"}, {"nri.plugin_name", "nri_plugin_name"}, {"nri.plugin_index", "nri_plugin_index"},
      {"cdi.spec_dirs", "cdi_spec_dirs"}, {"metrics.listen", "metrics_listen"},
      {"metrics.max_containers", "metrics_max_containers"}, {"readback.interval_ms", "readback_interval"},
      {"readback.slice_budget_us", "readback_slice_budget"}, {"readback.fd_cache", "readback_fd_cache"},
      {"readback.repair_drift", "repair_drift"},
  };
  std::string code;  // podshimd's sources other than the parser
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(src) + "/shim")) {
    const std::string p = e.path().string();
    if (!e.is_regular_file() || !(p.ends_with(".cc") || p.ends_with(".h"))) continue;
    if (p.ends_with("/core/config.cc") || p.ends_with("/core/config.h")) continue;
    std::ifstream f(p);
    code.append(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  for (const auto& k : config_keys()) {
    auto it = field.find(std::string(k.key));
    if (it == field.end()) {
      ADD_FAILURE() << k.key << ": name its Config member in this test";
      continue;
    }
    EXPECT_TRUE(std::regex_search(code, std::regex("(\\.|->)" + it->second + "\\b")))
        << k.key << " (Config::" << it->second << ") is read nowhere in shim/";
  }
}

// Every key changes what podshimd does, and a named test proves it: it sets
// the key to a value other than its default through the configuration (a
// file given to podshimd with --config, or parse_config() feeding podshimd's
// own mapping code) and asserts what that value changes. A key without a
// row, a row for a key the schema does not have, or a row whose test is gone
// or no longer sets the key (its leaf name as a YAML key, "leaf:", between
// its TEST line and the next) fails here, so the table cannot rot.
TEST(Config, EveryKeyChangesBehaviourInATest) {
  const char* src = getenv("PODSHIM_SRC");
  if (!src) GTEST_SKIP() << "run through meson test";
  const std::string effect = "tests/shim/daemon/config_effect_test.cc:ConfigEffect.";
  const std::string nri = "tests/shim/adapter/podshimd_nri_test.cc:PodshimdNri.";
  const std::map<std::string, std::string> tested = {
      {"log_level", effect + "LogLevelDropsLinesBelowIt"},
      {"socket.path", effect + "SocketPathIsWhereTheSocketIs"},
      {"socket.group", effect + "SocketGroupOwnsTheSocket"},
      {"socket.mode", effect + "SocketModeSetsItsPermissions"},
      {"socket.admin_group", effect + "AdminGroupMayWrite"},
      {"access", effect + "AccessRulesReplaceTheDefaults"},
      {"http.timeout_seconds", effect + "HttpTimeoutCutsASlowClient"},
      {"http.max_body_bytes", effect + "MaxBodyBytesRefusesALargerBody"},
      {"http.max_connections", effect + "MaxConnectionsRefusesTheNextOne"},
      {"http.max_watch_backlog_bytes", effect + "WatchBacklogDropsASilentWatcher"},
      {"http.max_watch_total_bytes", effect + "WatchTotalDropsTheFurthestBehind"},
      {"state_dir", effect + "StateDirHoldsTheRegistrations"},
      {"cgroup.root", effect + "CgroupRootIsWhereCgroupsAreFoundAndWritten"},
      {"cgroup.driver", effect + "CgroupDriverSystemdRefusesACgroupfsPath"},
      {"cgroup.weight_formula", effect + "WeightFormulaWritesItsCpuWeight"},
      {"cgroup.shrink_timeout_ms", effect + "ShrinkTimeoutIsTheReclaimBudget"},
      {"cgroup.shrink_headroom", effect + "ShrinkHeadroomDecidesWhetherATightShrinkIsRefused"},
      {"cgroup.shrink_settle_ms", effect + "ShrinkSettleZeroAnswersAtOnce"},
      {"cgroup.shrink_growth_window_ms", effect + "ShrinkGrowthWindowIsHowFarAheadGrowthCounts"},
      {"cgroup.shrink_pressure_threshold", effect + "ShrinkPressureThresholdIsTheStallThatRefuses"},
      // Against a stand-in for systemd on DBUS_SYSTEM_BUS_ADDRESS that never answers.
      {"cgroup.systemd_call_timeout_ms", effect + "SystemdCallTimeoutBoundsTheWaitForSystemd"},
      {"debug.test_pause_after_clamp_ms", effect + "TestPauseAfterClampHoldsTheClamp"},
      {"debug.test_pause_after_step_ms", effect + "TestPauseAfterStepHoldsAMultiStepResize"},
      {"node.allocatable.cpu", effect + "NodeAllocatableIsWhatAdmissionCounts"},
      {"node.allocatable.memory", effect + "NodeAllocatableIsWhatAdmissionCounts"},
      {"nri.enabled", effect + "NriEnabledFalseIsHooksOnlyMode"},
      // podshimd as a plugin of the NRI runtime simulator (shim/nri/simulator.h).
      {"nri.socket", nri + "ConfiguredSocketNameAndIndexAreWhatTheRuntimeSees"},
      {"nri.plugin_name", nri + "ConfiguredSocketNameAndIndexAreWhatTheRuntimeSees"},
      {"nri.plugin_index", nri + "ConfiguredSocketNameAndIndexAreWhatTheRuntimeSees"},
      {"cdi.spec_dirs", nri + "CdiSpecDirsAreWhereDevicesAreFound"},
      {"metrics.listen", effect + "MetricsListenServesMetricsOverTcp"},
      {"metrics.max_containers", effect + "MetricsMaxContainersBoundsThePerContainerFamilies"},
      {"readback.interval_ms", effect + "ReadbackIntervalIsThePeriodOfThePass"},
      // A slice's length is not visible from outside podshimd: parse_config()
      // through readback_options(), the mapping podshimd uses, on a fake clock.
      {"readback.slice_budget_us", "tests/shim/core/readback_test.cc:ReadBackTest.SliceBudgetFromTheConfigBoundsEachSlice"},
      {"readback.fd_cache", effect + "ReadbackFdCacheKeepsAttributeFilesOpen"},
      {"readback.repair_drift", effect + "ReadbackRepairDriftRewritesAHandEdit"},
  };
  std::set<std::string> schema;
  for (const auto& k : config_keys()) {
    schema.insert(std::string(k.key));
    EXPECT_TRUE(tested.count(std::string(k.key))) << k.key << ": name the test that shows what it changes";
  }
  for (const auto& [key, where] : tested) {
    if (!schema.count(key)) {
      ADD_FAILURE() << "'" << key << "' is not a key of the schema";
      continue;
    }
    const size_t colon = where.find(':'), dot = where.rfind('.');
    ASSERT_TRUE(colon != std::string::npos && dot > colon) << key << ": '" << where << "' is not FILE:Suite.Name";
    const std::string file = where.substr(0, colon), suite = where.substr(colon + 1, dot - colon - 1),
                      name = where.substr(dot + 1);
    std::ifstream in(std::string(src) + "/" + file);
    if (!in) {
      ADD_FAILURE() << key << ": " << file << " does not exist";
      continue;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (!std::regex_search(text, m, std::regex("(^|\\n)TEST(_F|_P)?\\(" + suite + ", " + name + "\\)"))) {
      ADD_FAILURE() << key << ": " << file << " has no test " << suite << "." << name;
      continue;
    }
    // The body: from the TEST line to the next one (or the end of the file).
    const size_t start = static_cast<size_t>(m.position(0) + m.length(0));
    const size_t next = text.find("\nTEST", start);
    const std::string body = text.substr(start, next == std::string::npos ? std::string::npos : next - start);
    const std::string leaf = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
    EXPECT_TRUE(std::regex_search(body, std::regex("\\b" + leaf + ":")))
        << key << ": " << where << " does not set '" << leaf << ":'";
  }
}

TEST(Config, RepeatedKeysAreRefusedWithTheirLine) {
  auto r = parse_config("log_level: debug\nsocket:\n  path: /a\n  mode: \"0600\"\n  path: /b\n", "c.yaml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("c.yaml:5: 'socket.path' is given twice"), std::string::npos)
      << r.error().message;
  r = parse_config("log_level: debug\nlog_level: err\n", "c.yaml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("c.yaml:2: 'log_level' is given twice"), std::string::npos) << r.error().message;
  r = parse_config("access:\n  - methods: [GET]\n    methods: [POST]\n", "c.yaml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("c.yaml:3: 'access[0].methods' is given twice"), std::string::npos)
      << r.error().message;
}

TEST(Config, ErrorsNameFileLineAndKey) {
  struct { const char* yaml; const char* says; } cases[] = {
      {"log_level: info\ncgroup:\n  driver: systemd\n  shrink_timeout_ms: 5000\n",
       "c.yaml:4: 'cgroup.shrink_timeout_ms' = 5000 exceeds 1900"},
      {"\n\nsockt: {}\n", "c.yaml:3: unknown key 'sockt'"},
      {"socket:\n  group: \"wheel;rm\"\n", "c.yaml:2: 'socket.group' is not a group name"},
      {"nri:\n  plugin_name: \"a b\"\n", "c.yaml:2: 'nri.plugin_name' must be 1..63 of [A-Za-z0-9._-]"},
      {"cgroup:\n  root:\n", "c.yaml:2: 'cgroup.root' has no value"},
      {"log_level: [1, 2\n", "c.yaml:"},
  };
  for (auto& c : cases) expect_refused(c.yaml, "c.yaml", {c.says});
}

TEST(Config, RetiredKeysSayWhatToDoInstead) {
  for (const char* y : {"hook: {strict: true}", "hook:\n  timeout_ms: 0\n", "selinux: {file_type: anything_t}"})
    expect_refused(y, "c.yaml", {"is no longer a setting: podshimd does not read it"});
}

// Values that constrain each other are checked together: a settle set longer
// than a quarter of the budget was once cut without a word.
TEST(Config, SettleMustFitTheShrinkBudget) {
  auto r = parse_config("cgroup:\n  shrink_timeout_ms: 400\n  shrink_settle_ms: 1900\n", "c.yaml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("c.yaml:3: 'cgroup.shrink_settle_ms' (1900 ms) must be at most a "
                                   "quarter of 'cgroup.shrink_timeout_ms' (400 ms, c.yaml:2)"),
            std::string::npos)
      << r.error().message;
  // The flag that sets the timeout is named too.
  r = parse_config("cgroup:\n  shrink_settle_ms: 200\n", "c.yaml");
  ASSERT_TRUE(r) << r.error().message;
  r->shrink_timeout = std::chrono::milliseconds(600);
  r->origin["cgroup.shrink_timeout_ms"] = "--x";
  auto t = check_together(*r);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("(600 ms, --x)"), std::string::npos) << t.error().message;
  EXPECT_TRUE(parse_config("cgroup:\n  shrink_timeout_ms: 400\n  shrink_settle_ms: 100\n", "c.yaml"));
  // The default settle is not an error: it takes a quarter of a short budget.
  EXPECT_TRUE(parse_config("cgroup:\n  shrink_timeout_ms: 400\n", "c.yaml"));
}

// A flag is the same key: the same checks, and an error naming the flag.
TEST(Config, FlagsGoThroughTheFileChecks) {
  Config c;
  struct { const char* flag; const char* value; const char* says; } bad[] = {
      {"--nri-index", "5", "--nri-index: 'nri.plugin_index' must be two digits"},
      {"--socket", "relative.sock", "--socket: 'socket.path' must be an absolute path"},
      {"--state-dir", "", "--state-dir: 'state_dir' must be an absolute path"},
      {"--log-level", "loud", "--log-level: 'log_level': 'loud' is not one of"},
      {"--nri", "maybe", "--nri: 'nri.enabled' must be true or false"},
  };
  for (auto& b : bad) {
    auto r = apply_flag(c, b.flag, b.value);
    ASSERT_FALSE(r) << b.flag;
    EXPECT_NE(r.error().message.find(b.says), std::string::npos) << r.error().message;
  }
  ASSERT_TRUE(apply_flag(c, "--nri-index", "05"));
  EXPECT_EQ(c.nri_plugin_index, "05");
  EXPECT_EQ(c.where("nri.plugin_index"), "--nri-index");
  EXPECT_EQ(c.where("socket.path"), "default");
  EXPECT_FALSE(apply_flag(c, "--no-such-flag", "x"));
}

}  // namespace
}  // namespace podshim::core
