// podshim-hook under real OCI runtimes, inside the test VM (hostroot mode, so
// Debian's crun, runc and podman from the host run against the guest kernel).
//
// 1. crun and runc run a busybox bundle whose config.json carries the hook at
//    createRuntime and poststop: the hook records the state it parsed (stage,
//    status, id, pid, bundle) and a fake podshimd in this process receives the
//    registration (id, cgroup path, pod uid) and the deregistration.
// 2. A device whose host node does not match the spec makes the runtime fail
//    the start, with our one stderr line in its error, and nothing registered.
// 3. podman --hooks-dir <packaging/hooks.d> runs a container with and without
//    a matching annotation: podman uses containers/common pkg/hooks, the same
//    matcher CRI-O uses, so this shows the shipped match rules work.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <iterator>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shim/status/client.h"
#include "tests/kernel/hook/run_cmd.h"
#include "tests/shim/hook/fixtures.h"
#include "tests/kernel/kernel_env.h"

namespace podshim::hook {
namespace {

using nlohmann::json;
using testing::CmdResult;
using testing::FakeServer;
using testing::have_program;
using testing::run_cmd;
using testing::TempDir;

std::string env_or_empty(const char* k) {
  const char* v = std::getenv(k);
  return v ? v : "";
}


// Stops a child daemon when the test ends, whatever the outcome.
struct ScopeKill {
  pid_t pid;
  ~ScopeKill() {
    int st;
    if (::waitpid(pid, &st, WNOHANG) != 0) return;  // already reaped or gone
    ::kill(pid, SIGTERM);
    ::waitpid(pid, &st, 0);
  }
};

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

// A bundle with a busybox-static rootfs and the runtime's own default spec
// (`crun spec` / `runc spec`), patched.
struct Bundle {
  TempDir dir;
  std::string path = dir.sub("bundle");
  std::string sock = dir.sub("podshim.sock");
  std::string record = dir.sub("record.jsonl");

  explicit Bundle(const std::string& runtime) {
    std::filesystem::create_directories(path + "/rootfs/bin");
    std::filesystem::copy_file("/bin/busybox", path + "/rootfs/bin/busybox");
    CmdResult r = run_cmd({runtime, "spec"}, path);
    if (r.status != 0) ADD_FAILURE() << runtime << " spec: " << r.output;
  }

  json spec() const {
    std::ifstream in(path + "/config.json");
    return json::parse(in);
  }
  void write_spec(const json& j) const { std::ofstream(path + "/config.json") << j.dump(2); }

  // The hook at createRuntime and poststop, as a hooks.d file or podshimd
  // would add it.
  json hook(const std::string& stage) const {
    return {{"path", env_or_empty("PODSHIM_HOOK")},
            {"args", {"podshim-hook", "--socket", sock, "--record", record, stage}},
            {"timeout", 30}};
  }
};

// The spec every runtime test uses: busybox prints a word, cgroupsPath and a
// pod uid annotation for the registration, one injected device backed by the
// host's /dev/null under another container path.
json patched_spec(const Bundle& b, const std::string& cgroup, int64_t minor) {
  json s = b.spec();
  s["process"]["terminal"] = false;
  s["process"]["args"] = {"/bin/busybox", "echo", "container-ran"};
  s["linux"]["cgroupsPath"] = cgroup;
  s["annotations"] = {
      {"io.kubernetes.pod.uid", "0c5a4d53-0000-4000-8000-000000000001"},
      {"podshim.io/injected-devices", R"([{"path":"/dev/podshim-test0","hostPath":"/dev/null"}])"}};
  s["linux"]["devices"] = {{{"path", "/dev/podshim-test0"},
                            {"type", "c"},
                            {"major", 1},
                            {"minor", minor},
                            {"fileMode", 0666},
                            {"uid", 0},
                            {"gid", 0}}};
  s["linux"]["resources"]["devices"].push_back(
      {{"allow", true}, {"type", "c"}, {"major", 1}, {"minor", minor}, {"access", "rwm"}});
  s["hooks"] = {{"createRuntime", {b.hook("createRuntime")}}, {"poststop", {b.hook("poststop")}}};
  return s;
}

// The hostroot guest is chroot()ed, not pivoted, so pivot_root(2) would fail
// with EINVAL: both runtimes are told to use MS_MOVE + chroot instead.
std::vector<std::string> run_args(const std::string& runtime, const std::string& bundle,
                                  const std::string& id) {
  return {runtime, "run", "--no-pivot", "--bundle", bundle, id};
}

class RuntimeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS();
    if (env_or_empty("PODSHIM_HOOK").empty()) GTEST_SKIP() << "PODSHIM_HOOK not set";
    if (!have_program(GetParam())) GTEST_SKIP() << GetParam() << " is not installed";
  }
};

TEST_P(RuntimeTest, HookRunsAtBothStagesAndRegisters) {
  const std::string rt = GetParam();
  Bundle b(rt);
  const std::string id = "hooktest-" + rt;
  const std::string cgroup = "/podshim-hooktest/" + rt;
  b.write_spec(patched_spec(b, cgroup, 3));
  FakeServer server(b.sock);

  CmdResult r = run_cmd(run_args(rt, b.path, id));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("container-ran"), std::string::npos) << r.output;

  // The hook ran once per stage, in order, with the runtime's state.
  auto rec = read_jsonl(b.record);
  ASSERT_EQ(rec.size(), 2u) << r.output;
  EXPECT_EQ(rec[0]["stage"], "createRuntime");
  EXPECT_EQ(rec[0]["id"], id);
  EXPECT_EQ(rec[0]["bundle"], b.path);
  EXPECT_GT(rec[0]["pid"].get<int64_t>(), 0);  // the container's init, in our pid namespace
  EXPECT_EQ(rec[0]["annotations"]["io.kubernetes.pod.uid"], "0c5a4d53-0000-4000-8000-000000000001");
  // runc says "creating" (runtime-spec); crun 1.8.1 says "created".
  EXPECT_EQ(rec[0]["status"], rt == "runc" ? "creating" : "created");
  EXPECT_EQ(rec[1]["stage"], "poststop");
  EXPECT_EQ(rec[1]["status"], "stopped");
  EXPECT_EQ(rec[1]["id"], id);

  // ...and did its work: podshimd got the registration, then the deregistration.
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/v1/containers");
  json body = json::parse(reqs[0].body);
  EXPECT_EQ(body["id"], id);
  EXPECT_EQ(body["cgroupPath"], cgroup);
  EXPECT_EQ(body["podUid"], "0c5a4d53-0000-4000-8000-000000000001");
  EXPECT_EQ(body["pid"], rec[0]["pid"]);
  EXPECT_EQ(reqs[1].method, "DELETE");
  EXPECT_EQ(reqs[1].target, "/v1/containers/" + id);
}

TEST_P(RuntimeTest, MismatchedDeviceFailsTheStart) {
  const std::string rt = GetParam();
  Bundle b(rt);
  const std::string id = "hooktest-bad-" + rt;
  // The spec says 1:5 (zero), the host node behind it is /dev/null, 1:3.
  json spec = patched_spec(b, "/podshim-hooktest/bad-" + rt, 5);
  // crun 1.8.1 does not put a hook's stderr into its error ("error executing
  // hook `…` (exit code: 1)" only); its run.oci.hooks.stderr annotation
  // (crun(1)) sends it to a file instead. runc quotes it in its error.
  const std::string hook_err = b.dir.sub("hook-stderr");
  if (rt == "crun") spec["annotations"]["run.oci.hooks.stderr"] = hook_err;
  b.write_spec(spec);
  FakeServer server(b.sock);

  CmdResult r = run_cmd(run_args(rt, b.path, id));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("container-ran"), std::string::npos) << r.output;
  std::string err = r.output;
  if (rt == "crun") {
    std::ifstream in(hook_err);
    err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    // Exactly one line, the error, with its priority prefix.
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(err.rfind("<3>podshim-hook createRuntime: ", 0), 0u) << err;
  }
  EXPECT_NE(err.find("is 1:3, but config.json says 1:5"), std::string::npos) << r.output << err;
  for (const auto& q : server.requests()) EXPECT_NE(q.method, "POST") << q.body;
  // Leave nothing behind for the next test.
  run_cmd({rt, "delete", "--force", id});
}

// ---------------------------------------------------------------- real podshimd

// The hook against the real podshimd (--nri=off): after `create` (which runs
// createRuntime) the container is in GET /v1/containers/{id} with its cgroup
// path and pod; after `delete` (poststop) it is gone.
TEST_P(RuntimeTest, RealPodshimdSeesTheContainerComeAndGo) {
  const std::string podshimd = env_or_empty("PODSHIM_PODSHIMD");
  if (podshimd.empty()) GTEST_SKIP() << "PODSHIM_PODSHIMD not set";
  const std::string rt = GetParam();
  Bundle b(rt);
  const std::string id = "hooktest-real-" + rt;
  const std::string cgroup = "/podshim-hooktest/real-" + rt;
  json spec = patched_spec(b, cgroup, 3);
  spec["process"]["args"] = {"/bin/busybox", "sleep", "600"};
  // What the kubelet asks for a 500m / 1 CPU / 256Mi container
  // (MilliCPUToShares, MilliCPUToQuota): the runtime converts the shares to
  // cpu.weight with its own formula, which podshimd has to learn.
  spec["linux"]["resources"]["cpu"] = {{"shares", 512}, {"quota", 100000}, {"period", 100000}};
  spec["linux"]["resources"]["memory"] = {{"limit", 256 << 20}};
  b.write_spec(spec);

  // An empty configuration: every default, nothing read from the host's /etc.
  b.dir.write("config.yaml", "");
  pid_t d = ::fork();
  if (d == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::execl(podshimd.c_str(), "podshimd", "--nri=off", "--config", b.dir.sub("config.yaml").c_str(),
            "--socket", b.sock.c_str(), "--state-dir", b.dir.sub("state").c_str(), nullptr);
    ::_exit(127);
  }
  ScopeKill kill_daemon{d};
  status::ClientOptions co;
  co.socket_path = b.sock;
  co.timeout = std::chrono::milliseconds(5000);
  bool up = false;
  for (int i = 0; i < 600 && !up; ++i) {  // TCG: allow a slow start, poll every 100 ms
    up = status::http_request(co, "GET", "/v1/containers").has_value();
    if (up) break;
    int st;
    ASSERT_EQ(::waitpid(d, &st, WNOHANG), 0) << "podshimd exited early, status " << st;
    ::usleep(100 * 1000);
  }
  ASSERT_TRUE(up) << "podshimd did not come up on " << b.sock;

  CmdResult c = run_cmd({rt, "create", "--no-pivot", "--bundle", b.path, id}, "", b.dir.sub("create.out"));
  ASSERT_EQ(c.status, 0) << c.output;
  auto got = status::http_request(co, "GET", "/v1/containers/" + id);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->status, 200) << got->body;
  json cj = json::parse(got->body, nullptr, false);
  EXPECT_EQ(cj["cgroupPath"], cgroup) << got->body;
  EXPECT_EQ(cj["podUid"], "0c5a4d53-0000-4000-8000-000000000001") << got->body;
  EXPECT_EQ(cj["source"], "hook") << got->body;

  // weight_formula: auto against this runtime. Debian 12's crun 1.8.1 and
  // runc 1.1.5 write cpu.weight with the linear formula (512 shares → 20;
  // the quadratic one of crun >= 1.23 and runc >= 1.3.2 gives 59). podshimd
  // learns it from the kernel and reports the CPU request the kubelet asked
  // for, 500m, as the actual one.
  const uint64_t weight = std::stoull(kernel_test::slurp("/sys/fs/cgroup" + cgroup + "/cpu.weight"));
  EXPECT_EQ(weight, 20u) << rt << " wrote cpu.weight " << weight << " for 512 shares";
  json actual;
  std::string metrics;
  for (int i = 0; i < 150; ++i) {  // the read-back's first pass; TCG is slow
    auto g = status::http_request(co, "GET", "/v1/containers/" + id);
    auto m = status::http_request(co, "GET", "/metrics");
    if (g && m) {
      actual = json::parse(g->body, nullptr, false).value("actual", json());
      metrics = m->body;
      if (actual.is_object() && actual.contains("cpuRequestMilli") &&
          metrics.find("podshim_cpu_weight_formula{") != std::string::npos)
        break;
    }
    ::usleep(100 * 1000);
  }
  ASSERT_TRUE(actual.is_object()) << "no read-back for " << id;
  EXPECT_EQ(actual.value("cpuRequestMilli", int64_t{-1}), 500) << actual.dump();
  EXPECT_EQ(actual.value("cpuLimitMilli", int64_t{-1}), 1000) << actual.dump();
  EXPECT_EQ(actual.value("memoryLimitBytes", int64_t{-1}), int64_t{256} << 20) << actual.dump();
  EXPECT_NE(metrics.find("formula=\"linear\""), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("formula=\"quadratic\""), std::string::npos) << metrics;

  CmdResult del = run_cmd({rt, "delete", "--force", id});
  ASSERT_EQ(del.status, 0) << del.output;
  auto gone = status::http_request(co, "GET", "/v1/containers/" + id);
  ASSERT_TRUE(gone) << gone.error().message;
  EXPECT_EQ(gone->status, 404) << gone->body;
}

INSTANTIATE_TEST_SUITE_P(Runtimes, RuntimeTest, ::testing::Values("crun", "runc"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------- podman

class PodmanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS();
    if (env_or_empty("PODSHIM_HOOK").empty() || env_or_empty("PODSHIM_HOOKS_DIR").empty())
      GTEST_SKIP() << "PODSHIM_HOOK or PODSHIM_HOOKS_DIR not set";
    if (!have_program("podman")) GTEST_SKIP() << "podman is not installed";
    // The shipped hooks.d files name /usr/libexec/podshim/podshim-hook, and
    // pkg/hooks refuses a hook whose path does not exist at load time. The
    // guest's root is a throw-away overlay, so install the binary there.
    std::filesystem::create_directories(kInstalled.parent_path());
    std::filesystem::copy_file(env_or_empty("PODSHIM_HOOK"), kInstalled,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::create_directories("/run/podshim");
    std::filesystem::remove("/run/podshim/podshim.sock");
    std::filesystem::create_directories(dir_.sub("rootfs/bin"));
    std::filesystem::copy_file("/bin/busybox", dir_.sub("rootfs/bin/busybox"));
  }

  // No registry exists here: --rootfs runs busybox straight from a directory.
  // vfs storage (overlay on the guest's overlay root is not supported),
  // cgroupfs (no systemd in hostroot mode), no network, no journald.
  CmdResult podman_run(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {
        "podman", "--root", dir_.sub("storage"), "--runroot", dir_.sub("runroot"),
        "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
        "--hooks-dir", env_or_empty("PODSHIM_HOOKS_DIR"), "--runtime", "crun",
        "run", "--rm", "--network", "none", "--log-driver", "k8s-file"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (std::string a : {std::string("--rootfs"), dir_.sub("rootfs"), std::string("/bin/busybox"),
                          std::string("echo"), std::string("podman-ran")})
      argv.push_back(a);
    return run_cmd(argv);
  }

  inline static const std::filesystem::path kInstalled = "/usr/libexec/podshim/podshim-hook";
  TempDir dir_;
};

TEST_F(PodmanTest, MatchingAnnotationRunsTheHook) {
  FakeServer server("/run/podshim/podshim.sock");
  for (const char* ann : {"podshim.io/manage=true", "cdi.k8s.io/vendor.com_gpu=vendor.com/gpu=0"}) {
    size_t before = server.requests().size();
    CmdResult r = podman_run({"--annotation", ann});
    ASSERT_EQ(r.status, 0) << ann << ": " << r.output;
    EXPECT_NE(r.output.find("podman-ran"), std::string::npos) << r.output;
    auto reqs = server.requests();
    ASSERT_EQ(reqs.size(), before + 2) << ann << ": " << r.output;
    EXPECT_EQ(reqs[before].method, "POST");
    json body = json::parse(reqs[before].body);
    const std::string id = body["id"];
    EXPECT_EQ(id.size(), 64u) << id;  // podman's container id
    EXPECT_NE(body["cgroupPath"].get<std::string>().find(id), std::string::npos) << body.dump();
    EXPECT_EQ(reqs[before + 1].method, "DELETE");  // podman runs poststop itself, after cleanup
    EXPECT_EQ(reqs[before + 1].target, "/v1/containers/" + id);
  }
}

TEST_F(PodmanTest, NoMatchingAnnotationNoHook) {
  FakeServer server("/run/podshim/podshim.sock");
  // No annotation, an empty value (the rule wants ^.+$), and a near miss on
  // the key (the packaged regexes are anchored).
  for (std::vector<std::string> extra :
       {std::vector<std::string>{}, {"--annotation", "podshim.io/manage="},
        {"--annotation", "xpodshim.io/manage=true"}, {"--annotation", "podshim.io/managed=true"}}) {
    CmdResult r = podman_run(extra);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("podman-ran"), std::string::npos) << r.output;
  }
  EXPECT_TRUE(server.requests().empty()) << server.requests()[0].body;
}

}  // namespace
}  // namespace podshim::hook
