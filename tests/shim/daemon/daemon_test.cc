// podshimd as a process: hooks-only mode on a fake cgroup tree, state that
// survives a restart, SIGHUP reload, clean SIGTERM, and podshimctl against it.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/shim/daemon/daemon_harness.h"
#include "tests/testutil/files.h"
#include "tests/testutil/shell.h"

namespace podshim::testing {
namespace {

using testutil::read_file;

using nlohmann::json;

// Runs podshimctl with args; returns {exit code, stdout}.
std::pair<int, std::string> ctl(const std::string& sock, const std::string& args) {
  int code = -1;
  std::string out = testutil::run_shell(std::string(getenv("PODSHIMCTL")) + " --socket " + sock + " " + args + " 2>&1",
                                        &code);
  return {code, out};
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!getenv("PODSHIMD") || !getenv("PODSHIMCTL")) GTEST_SKIP() << "run through meson test";
    dir = make_temp_dir();
  }
  void TearDown() override {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  std::string dir;
};

TEST_F(DaemonTest, ResizeThroughEngineAndStateSurvivesRestart) {
  std::string cfg = dir + "/config.yaml";
  std::ofstream(cfg) << "node:\n  allocatable: {cpu: \"4\", memory: 8Gi}\n";
  Daemon d(dir, {"--config", cfg});
  ASSERT_TRUE(d.start()) << d.log();
  fake_cgroup(d.cgroot(), "/kubepods/burstable/podp1/c1");
  auto r = d.req("POST", "/v1/containers",
                 R"({"id":"c1","podUid":"p1","cgroupPath":"/kubepods/burstable/podp1/c1",
                     "resources":{"requests":{"cpu":"250m","memory":"64Mi"},"limits":{"memory":"128Mi"}}})");
  ASSERT_EQ(r.status, 201) << r.body;
  r = d.req("POST", "/v1/containers/c1/resize", R"({"resources":{"limits":{"cpu":"500m","memory":"256Mi"}}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["result"], "applied") << r.body;
  // The engine wrote the fake tree.
  EXPECT_EQ(read_file(d.cgroot() + "/kubepods/burstable/podp1/c1/memory.max"), "268435456");
  EXPECT_EQ(read_file(d.cgroot() + "/kubepods/burstable/podp1/c1/cpu.max"), "50000 100000");
  // Infeasible beyond the configured allocatable.
  r = d.req("POST", "/v1/containers/c1/resize", R"({"resources":{"requests":{"memory":"9Gi"},"limits":{"memory":"9Gi"}}})");
  EXPECT_EQ(json::parse(r.body)["result"], "infeasible") << r.body;
  // Hooks-only mode logs every outcome once: id, pod, old -> new, reclaimed, duration, reason.
  const std::string log = d.log();
  EXPECT_NE(log.find("resize applied: container c1 pod p1 (api): cpu 250m/- mem 67108864/134217728 -> "
                     "cpu 250m/500m mem 67108864/268435456, reclaimed 0 bytes"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("resize infeasible: container c1 pod p1 (api)"), std::string::npos) << log;
  EXPECT_NE(log.find("Node didn't have enough capacity: memory"), std::string::npos) << log;

  int st = d.stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << d.log();
  EXPECT_FALSE(std::filesystem::exists(d.socket())) << "socket removed on SIGTERM";

  Daemon d2(dir, {"--config", cfg});
  ASSERT_TRUE(d2.start()) << d2.log();
  r = d2.req("GET", "/v1/containers/c1");
  ASSERT_EQ(r.status, 200);
  json c = json::parse(r.body);
  EXPECT_EQ(c["allocated"]["memoryLimitBytes"], 256 << 20);
  EXPECT_EQ(c["generation"], 2);
  EXPECT_EQ(c["conditions"][0]["reason"], "Infeasible");
  EXPECT_EQ(c["desired"]["memoryRequestBytes"], 9LL << 30);
}

TEST_F(DaemonTest, SighupReloadsAndKeepsOldConfigOnError) {
  std::string cfg = dir + "/config.yaml";
  std::ofstream(cfg) << "node:\n  allocatable: {cpu: \"1\", memory: 1Gi}\n";
  Daemon d(dir, {"--config", cfg});
  ASSERT_TRUE(d.start()) << d.log();
  fake_cgroup(d.cgroot(), "/c1");  // registration checks the cgroup exists
  d.req("POST", "/v1/containers", R"({"id":"c1","cgroupPath":"/c1","resources":{"requests":{"cpu":"100m"}}})");
  auto r = d.req("POST", "/v1/containers/c1/resize", R"({"resources":{"requests":{"cpu":"2"}}})");
  EXPECT_EQ(json::parse(r.body)["result"], "infeasible");
  // A bad file: logged, old config kept, daemon alive.
  std::ofstream(cfg) << "node: {allocatable: {cpu: \"4\", gpu: 1}}\n";
  kill(d.pid(), SIGHUP);
  for (int i = 0; i < 200 && d.log().find("keeping the running one") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(d.log().find("unknown key 'node.allocatable.gpu'"), std::string::npos) << d.log();
  EXPECT_EQ(d.req("GET", "/healthz").status, 200);
  // A good file: the larger allocatable admits the same resize.
  std::ofstream(cfg) << "node: {allocatable: {cpu: \"4\", memory: 1Gi}}\n";
  kill(d.pid(), SIGHUP);
  for (int i = 0; i < 200 && d.log().find("Configuration reloaded") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r = d.req("POST", "/v1/containers/c1/resize", R"({"resources":{"requests":{"cpu":"2"}}})");
  EXPECT_EQ(json::parse(r.body)["result"], "applied") << r.body;
}

TEST_F(DaemonTest, CorruptStateIsMovedAsideNotFatal) {
  std::filesystem::create_directories(dir + "/state/containers");
  std::ofstream(dir + "/state/containers/bad.json") << "{{{";
  Daemon d(dir);
  ASSERT_TRUE(d.start()) << d.log();
  EXPECT_TRUE(std::filesystem::exists(dir + "/state/containers/bad.json.corrupt"));
  EXPECT_NE(d.log().find("bad.json"), std::string::npos);
}

TEST_F(DaemonTest, PodshimctlAgainstRunningDaemon) {
  Daemon d(dir);
  ASSERT_TRUE(d.start()) << d.log();
  fake_cgroup(d.cgroot(), "/kubepods/podp1/c1");
  d.req("POST", "/v1/containers",
        R"({"id":"c1","podUid":"p1","name":"app","cgroupPath":"/kubepods/podp1/c1",
            "resources":{"requests":{"cpu":"250m","memory":"64Mi"},"limits":{"memory":"128Mi"}}})");
  auto [rc, out] = ctl(d.socket(), "status");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("containers:         1"), std::string::npos) << out;
  std::tie(rc, out) = ctl(d.socket(), "get containers");
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("250m/-"), std::string::npos) << out;
  std::tie(rc, out) = ctl(d.socket(), "resize c1 --memory 256Mi --cpu-limit 1");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("applied"), std::string::npos) << out;
  std::tie(rc, out) = ctl(d.socket(), "-o json get containers c1");
  EXPECT_EQ(rc, 0);
  json j = json::parse(out);
  EXPECT_EQ(j["allocated"]["memoryLimitBytes"], 256 << 20);
  EXPECT_EQ(j["allocated"]["cpuLimitMilli"], 1000);
  std::tie(rc, out) = ctl(d.socket(), "resize c1 --memory 64Mi --policy memory=RestartContainer");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("restart_required"), std::string::npos) << out;
  std::tie(rc, out) = ctl(d.socket(), "resize c1 --cpu 100");  // > node
  EXPECT_EQ(rc, 1) << out;
  std::tie(rc, out) = ctl(d.socket(), "get containers nope");
  EXPECT_EQ(rc, 4) << out;
  std::tie(rc, out) = ctl(d.socket(), "resize c1 --memory lots");
  EXPECT_EQ(rc, 2) << out;
  std::tie(rc, out) = ctl(d.socket(), "-o json watch --count 1");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Bookmark"), std::string::npos);
  d.stop();
  std::tie(rc, out) = ctl(d.socket(), "status");
  EXPECT_EQ(rc, 3) << out;
}

TEST(PodshimdCli, HelpAndBadFlags) {
  if (!getenv("PODSHIMD")) GTEST_SKIP();
  std::string bin = getenv("PODSHIMD");
  int code = -1;
  const std::string out = testutil::run_shell(bin + " --help", &code);
  EXPECT_EQ(code, 0);
  for (const char* flag : {"--config", "--nri=on|off", "--socket", "--state-dir", "--cgroup-root", "--log-level",
                           "--check-config", "SIGHUP", "SIGTERM"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
  EXPECT_EQ(WEXITSTATUS(system((bin + " --nri=maybe 2>/dev/null").c_str())), 2);
  EXPECT_EQ(WEXITSTATUS(system((bin + " --config /nonexistent.yaml --check-config 2>/dev/null").c_str())), 2);
  for (const char* flag : {"--hook-host-path", "--install-hook"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
    EXPECT_EQ(WEXITSTATUS(system((bin + " " + flag + " relative/path 2>/dev/null").c_str())), 2) << flag;
  }
}

// The flags go through the file's checks and --check-config says where
// every value came from (the schema's own tests are in shim/core).
TEST(PodshimdCli, CheckConfigNamesOriginsAndRefusesBadFlags) {
  if (!getenv("PODSHIMD")) GTEST_SKIP();
  const std::string bin = getenv("PODSHIMD");
  char dir[] = "/tmp/podshimd-check.XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const std::string cfg = std::string(dir) + "/c.yaml";
  FILE* w = fopen(cfg.c_str(), "w");
  ASSERT_TRUE(w);
  fputs("log_level: info\ncgroup:\n  shrink_timeout_ms: 800\n", w);
  fclose(w);
  auto run = [&](const std::string& args) {
    int code = -1;
    std::string out = testutil::run_shell(bin + " --config " + cfg + " --check-config " + args + " 2>&1", &code);
    return std::pair{code, out};
  };
  auto [rc, out] = run("--nri-index 07 --socket /tmp/p.sock");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("cgroup.shrink_timeout_ms           800  [" + cfg + ":3]"), std::string::npos) << out;
  EXPECT_NE(out.find("nri.plugin_index                   07  [--nri-index]"), std::string::npos) << out;
  EXPECT_NE(out.find("socket.path                        /tmp/p.sock  [--socket]"), std::string::npos) << out;
  EXPECT_NE(out.find("http.timeout_seconds               10  [default]"), std::string::npos) << out;
  std::tie(rc, out) = run("--nri-index 5");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--nri-index: 'nri.plugin_index' must be two digits"), std::string::npos) << out;
  std::tie(rc, out) = run("--socket relative.sock");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--socket: 'socket.path' must be an absolute path"), std::string::npos) << out;
  std::tie(rc, out) = run("--metrics-listen nohost");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--metrics-listen: "), std::string::npos) << out;
  unlink(cfg.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace podshim::testing
