// podshimd the process, as an NRI plugin of our runtime simulator: over a real
// unix socket (external plugin) and over a socketpair on fd 3 with the bare
// environment a runtime gives pre-installed plugins. Cgroups are a fake tree
// in a temp dir; the status socket is checked from outside.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shim/nri/simulator.h"
#include "shim/status/client.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/shim/nri/test_support.h"

namespace podshim {
namespace {

namespace api = podshim::nri::api;
using cgroup::testing::FakeTree;
constexpr int64_t kMi = 1 << 20;

const char* podshimd_path() {
  const char* p = getenv("PODSHIM_PODSHIMD");
  return p ? p : "podshimd";
}

class PodshimdNri : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sd_event_new(&loop_), 0);
    dir_ = tree_.state() + "/../run";
    std::filesystem::create_directories(dir_);
    dir_ = std::filesystem::canonical(dir_).string();
    uid_ = "7e1f0000-0000-4000-8000-000000000001";
    pod_.set_id("sb1");
    pod_.set_uid(uid_);
    pod_.set_name("p");
    pod_.set_namespace_("default");
    pod_.mutable_linux()->set_cgroup_parent("/kubepods/burstable/pod" + uid_);
    ctr_.set_id("c1");
    ctr_.set_pod_sandbox_id("sb1");
    ctr_.set_name("c1");
    ctr_.set_state(api::CONTAINER_RUNNING);
    ctr_.mutable_linux()->set_cgroups_path("/kubepods/burstable/pod" + uid_ + "/c1");
    ctr_.mutable_linux()->mutable_resources()->mutable_memory()->mutable_limit()->set_value(256 * kMi);
    tree_.add("kubepods/burstable/pod" + uid_);
    tree_.add("kubepods/burstable/pod" + uid_ + "/c1", std::to_string(256 * kMi), "max 100000", "100",
              100 * kMi, 100 * kMi, 0);
    config_ = dir_ + "/config.yaml";
    std::ofstream(config_) << "state_dir: " << dir_ << "/state\n"
                           << "socket:\n  path: " << dir_ << "/podshim.sock\n"
                           << "cgroup:\n  root: " << tree_.cg_root() << "\n  driver: cgroupfs\n"
                           << "  shrink_timeout_ms: 50\n"
                           << "nri:\n  enabled: true\n  socket: " << dir_ << "/nri.sock\n"
                           << "cdi:\n  spec_dirs: [" << dir_ << "/cdi]\n";
    std::filesystem::create_directories(dir_ + "/cdi");
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    sim_.reset();
    sd_event_unref(loop_);
  }

  void make_sim(std::string config = {}) {
    nri::SimOptions o;
    o.config = std::move(config);
    sim_ = std::make_unique<nri::Simulator>(loop_, o);
    sim_->set_state({pod_}, {ctr_});
    sim_->on_synchronized = [this](nri::Status st) { syncs_.push_back(st); };
  }

  // A pre-installed plugin, 10-podshim: it stands in for the packaged
  // symlink and points podshimd at the test's config (state dir, fake cgroup
  // root). Returns its path.
  std::string write_wrapper() {
    const std::string wrapper = dir_ + "/10-podshim";
    std::ofstream(wrapper) << "#!/bin/sh\nexec " << podshimd_path() << " --config " << config_ << "\n";
    std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
    return wrapper;
  }

  // The runtime listens on `nri_sock` (the config's nri.socket).
  void start_external(std::vector<std::string> extra = {}, std::string nri_sock = {}) {
    make_sim();
    ASSERT_TRUE(sim_->listen(nri_sock.empty() ? dir_ + "/nri.sock" : nri_sock));
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<std::string> args = {podshimd_path(), "--config", config_};
      for (auto& e : extra) args.push_back(e);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  std::optional<nlohmann::json> get(const std::string& target) {
    status::ClientOptions o;
    o.socket_path = dir_ + "/podshim.sock";
    auto r = status::http_request(o, "GET", target);
    if (!r || r->status != 200) return std::nullopt;
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  // The fixture's config with `nri` and `cdi` sections of the test's own.
  void write_config(const std::string& nri, const std::string& cdi) {
    std::ofstream(config_) << "state_dir: " << dir_ << "/state\n"
                           << "socket:\n  path: " << dir_ << "/podshim.sock\n"
                           << "cgroup:\n  root: " << tree_.cg_root() << "\n  driver: cgroupfs\n"
                           << "  shrink_timeout_ms: 50\n"
                           << "nri:\n" << nri << "cdi:\n" << cdi;
  }

  // Creates container `id` with one CDI device annotation; the runtime's
  // reply, or nullopt when podshimd failed the request.
  std::optional<api::CreateContainerResponse> create_with_device(const std::string& id, const std::string& device) {
    api::Container c = ctr_;
    c.set_id(id);
    c.set_name(id);
    c.set_state(api::CONTAINER_CREATED);
    (*c.mutable_annotations())["cdi.k8s.io/dev"] = device;
    std::optional<nri::Status> st;
    api::CreateContainerResponse reply;
    sim_->create_container(pod_, c, [&](nri::Status s, api::CreateContainerResponse r) {
      st = s;
      reply = r;
    });
    EXPECT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }, 30));
    if (!st || !st->ok()) return std::nullopt;
    return reply;
  }

  nri::Status update(int64_t mem) {
    api::LinuxResources r;
    r.mutable_memory()->mutable_limit()->set_value(mem);
    std::optional<nri::Status> st;
    sim_->update_container(pod_, ctr_, r, [&](nri::Status s, api::UpdateContainerResponse) { st = s; });
    EXPECT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }, 30));
    return st.value_or(nri::Status{-1, "no reply"});
  }

  bool exited(int* status, double seconds) {
    for (int i = 0; i < seconds * 100; ++i) {
      if (waitpid(pid_, status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      sd_event_run(loop_, 10'000);
    }
    return false;
  }

  sd_event* loop_ = nullptr;
  FakeTree tree_;
  std::string dir_, uid_, config_;
  api::PodSandbox pod_;
  api::Container ctr_;
  std::unique_ptr<nri::Simulator> sim_;
  std::vector<nri::Status> syncs_;
  pid_t pid_ = -1;
};

// Runs podshimctl ARGS in a child while the loop (the runtime) keeps
// serving; returns its exit status and output.
std::pair<int, std::string> run_ctl(sd_event* loop, const std::vector<std::string>& args) {
  const char* ctl = getenv("PODSHIM_PODSHIMCTL");
  int pfd[2];
  if (!ctl || pipe(pfd) != 0) return {-1, "no podshimctl"};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    std::vector<std::string> a = {ctl};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& x : a) argv.push_back(x.data());
    argv.push_back(nullptr);
    execv(ctl, argv.data());
    _exit(127);
  }
  close(pfd[1]);
  int status = -1;
  for (int i = 0; i < 3000 && waitpid(pid, &status, WNOHANG) != pid; ++i) sd_event_run(loop, 10'000);
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = read(pfd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(pfd[0]);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST_F(PodshimdNri, PodshimctlResizeGoesThroughTheRuntimeAndWaitsForIt) {
  if (!getenv("PODSHIM_PODSHIMCTL")) GTEST_SKIP() << "run through meson test";
  start_external();
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return sim_->synchronized(); }, 30));
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return get("/v1/containers/c1").has_value(); }, 10));
  const std::string rel = "kubepods/burstable/pod" + uid_ + "/c1";
  int asked = 0;
  bool fail = false;
  sim_->on_update_containers = [&](const api::UpdateContainersRequest& r) {
    api::UpdateContainersResponse resp;
    for (const auto& u : r.update()) {
      ++asked;
      if (fail) *resp.add_failed() = u;
      else tree_.set(rel, "memory.max", std::to_string(u.linux().resources().memory().limit().value()));
    }
    return resp;
  };
  const std::string sock = dir_ + "/podshim.sock";
  auto [rc, out] = run_ctl(loop_, {"--socket", sock, "resize", "c1", "--memory", "300Mi"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("c1: applied"), std::string::npos) << out;
  EXPECT_EQ(asked, 1);  // the runtime was asked (Runtime.UpdateContainers)
  EXPECT_EQ(tree_.get(rel, "memory.max"), std::to_string(300 * kMi));

  fail = true;
  std::tie(rc, out) = run_ctl(loop_, {"--socket", sock, "resize", "c1", "--memory", "310Mi"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("c1: error"), std::string::npos) << out;
  EXPECT_NE(out.find("the runtime failed to update container c1"), std::string::npos) << out;
}

TEST_F(PodshimdNri, ExternalPluginOverAUnixSocket) {
  start_external();
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return sim_->synchronized(); }, 30));
  EXPECT_EQ(sim_->plugin().name, "podshim");
  EXPECT_EQ(sim_->plugin().index, "10");
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return get("/v1/containers/c1").has_value(); }, 10));

  // A shrink below usage (100 MiB, all anon) is refused to the runtime…
  auto st = update(50 * kMi);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("below current usage"), std::string::npos) << st.message;
  EXPECT_EQ(tree_.get("kubepods/burstable/pod" + uid_ + "/c1", "memory.max"), std::to_string(256 * kMi));
  // …and reported on the status socket.
  auto c = get("/v1/containers/c1");
  ASSERT_TRUE(c);
  bool error_condition = false;
  for (const auto& cond : (*c)["conditions"])
    error_condition |= cond["type"] == "PodResizeInProgress" && cond["reason"] == "Error";
  EXPECT_TRUE(error_condition) << c->dump();

  // A runtime restart: the connection drops, podshimd reconnects and
  // resynchronizes by itself.
  const uint64_t accepted = sim_->accepted();
  sim_->close_plugin();
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return sim_->accepted() > accepted && sim_->synchronized(); }, 30));

  // Garbage on the socket: podshimd drops that connection, logs why, keeps
  // serving and comes back.
  const uint64_t accepted2 = sim_->accepted();
  sim_->write_raw(std::string("GET / HTTP/1.1\r\nHost: p\r\n\r\n") + std::string(6000, '\xff'));
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return sim_->accepted() > accepted2 && sim_->synchronized(); }, 30));
  auto health = get("/v1/containers");
  EXPECT_TRUE(health.has_value());

  // The runtime is the source of truth: syncs, a refused shrink and a
  // reconnection left nothing on disk (no pods/containers state files, no
  // journal: the refusal happened before any clamp).
  size_t state_files = 0;
  if (std::filesystem::exists(dir_ + "/state"))
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ + "/state"))
      state_files += e.is_regular_file();
  EXPECT_EQ(state_files, 0u) << "podshimd wrote state on the NRI event path";

  kill(pid_, SIGTERM);
  int status = 0;
  ASSERT_TRUE(exited(&status, 20));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// nri.socket, nri.plugin_name and nri.plugin_index from the file: podshimd
// connects where nri.socket says (the runtime listens nowhere else) and
// registers under that name and index, which ExternalPluginOverAUnixSocket
// sees at their defaults ("podshim", "10"). NRI orders plugins by index
// (containerd/nri pkg/adaptation: plugins are sorted by their index).
TEST_F(PodshimdNri, ConfiguredSocketNameAndIndexAreWhatTheRuntimeSees) {
  std::filesystem::create_directories(dir_ + "/alt");
  write_config("  socket: " + dir_ + "/alt/runtime.sock\n  plugin_name: podshim-alt\n  plugin_index: \"42\"\n",
               "  spec_dirs: [" + dir_ + "/cdi]\n");
  start_external({}, dir_ + "/alt/runtime.sock");
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return sim_->synchronized(); }, 30));
  EXPECT_EQ(sim_->plugin().name, "podshim-alt");
  EXPECT_EQ(sim_->plugin().index, "42");
}

// cdi.spec_dirs from the file: a device whose spec lies in a directory it
// names is injected; one whose spec lies only elsewhere is not.
TEST_F(PodshimdNri, CdiSpecDirsAreWhereDevicesAreFound) {
  const std::string named = dir_ + "/cdi-named", other = dir_ + "/cdi-other";
  for (const auto& [d, kind, dev] : {std::tuple{named, "gpu", "gpu0"}, std::tuple{other, "nic", "nic0"}}) {
    std::filesystem::create_directories(d);
    std::ofstream(d + "/vendor.yaml") << "cdiVersion: 0.6.0\nkind: podshim-test.example.com/" << kind
                                      << "\ndevices:\n- name: " << dev
                                      << "\n  containerEdits:\n    deviceNodes:\n    - path: /dev/null\n";
  }
  write_config("  socket: " + dir_ + "/nri.sock\n", "  spec_dirs: [" + named + "]\n");
  start_external();
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return sim_->synchronized(); }, 30));
  auto found = create_with_device("c2", "podshim-test.example.com/gpu=gpu0");
  ASSERT_TRUE(found);
  ASSERT_EQ(found->adjust().linux().devices_size(), 1);
  EXPECT_EQ(found->adjust().linux().devices(0).path(), "/dev/null");
  auto elsewhere = create_with_device("c3", "podshim-test.example.com/nic=nic0");
  EXPECT_TRUE(!elsewhere || elsewhere->adjust().linux().devices_size() == 0)
      << "a device from a directory cdi.spec_dirs does not name was injected";
}

// The runtime runs the hooks of an adjustment on the host, so podshimd names
// the host path it was given (--hook-host-path) and only when the file is
// there as podshimd sees it (the DaemonSet mounts the host directory at the
// same path); otherwise it injects no hook and says so in a metric.
struct HookCase {
  api::ContainerAdjustment adjust;
  std::string metrics;
};
class PodshimdNriHook : public PodshimdNri {
 protected:
  HookCase run_case(bool hook_present) {
    HookCase out;
    std::ofstream(dir_ + "/cdi/vendor.yaml")
        << "cdiVersion: 0.6.0\nkind: vendor.example.com/gpu\ndevices:\n"
           "- name: gpu0\n  containerEdits:\n    deviceNodes:\n    - path: /dev/null\n"
           "    mounts:\n    - hostPath: /tmp\n      containerPath: /opt/gpu\n      options: [ro, bind]\n";
    const std::string bin = dir_ + "/hostbin", hook = bin + "/podshim-hook";
    std::filesystem::create_directories(bin);
    if (hook_present) {
      std::ofstream(hook) << "#!/bin/true\n";
      std::filesystem::permissions(hook, std::filesystem::perms(0755));
    }
    start_external({"--hook-host-path", hook});
    EXPECT_TRUE(nri::test::run_until(loop_, [&] { return sim_->synchronized(); }, 30));
    api::Container c = ctr_;
    c.set_id("c2");
    c.set_name("c2");
    c.set_state(api::CONTAINER_CREATED);
    (*c.mutable_annotations())["cdi.k8s.io/gpu"] = "vendor.example.com/gpu=gpu0";
    std::optional<api::CreateContainerResponse> reply;
    sim_->create_container(pod_, c, [&](nri::Status s, api::CreateContainerResponse r) {
      EXPECT_TRUE(s.ok()) << s.message;
      reply = r;
    });
    EXPECT_TRUE(nri::test::run_until(loop_, [&] { return reply.has_value(); }, 30));
    if (reply) out.adjust = reply->adjust();
    status::ClientOptions o;
    o.socket_path = dir_ + "/podshim.sock";
    auto m = status::http_request(o, "GET", "/metrics");
    if (m) out.metrics = m->body;
    kill(pid_, SIGTERM);
    int status = 0;
    EXPECT_TRUE(exited(&status, 20));
    return out;
  }
};

TEST_F(PodshimdNriHook, HookAtItsHostPathIsInjectedUnderThatPath) {
  HookCase r = run_case(true);
  ASSERT_EQ(r.adjust.linux().devices_size(), 1);
  ASSERT_EQ(r.adjust.hooks().create_runtime_size(), 1);
  EXPECT_EQ(r.adjust.hooks().create_runtime(0).path(), dir_ + "/hostbin/podshim-hook");
  ASSERT_EQ(r.adjust.hooks().poststop_size(), 1);
  EXPECT_EQ(r.adjust.hooks().poststop(0).path(), dir_ + "/hostbin/podshim-hook");
  EXPECT_NE(r.metrics.find("\npodshim_cdi_hook_injected 1\n"), std::string::npos) << r.metrics;
}

TEST_F(PodshimdNriHook, NoHookAtTheHostPathMeansNoHookInjected) {
  HookCase r = run_case(false);
  EXPECT_EQ(r.adjust.linux().devices_size(), 1);  // the device still goes in
  EXPECT_EQ(r.adjust.mounts_size(), 1);
  EXPECT_EQ(r.adjust.hooks().create_runtime_size(), 0);
  EXPECT_EQ(r.adjust.hooks().poststop_size(), 0);
  EXPECT_NE(r.metrics.find("\npodshim_cdi_hook_injected 0\n"), std::string::npos) << r.metrics;
}

TEST_F(PodshimdNri, PreinstalledPluginTakesItsConfigFromConfigure) {
  // The runtime starts /opt/nri/plugins/NN-podshim with only NRI_PLUGIN_*
  // in the environment.
  const std::string wrapper = write_wrapper();
  make_sim("log_level: debug\n");
  auto pid = sim_->spawn_plugin(wrapper, "podshim", "10");
  ASSERT_TRUE(pid) << pid.error().message;
  pid_ = *pid;
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return sim_->synchronized(); }, 30));
  ASSERT_FALSE(syncs_.empty());
  EXPECT_TRUE(syncs_.back().ok()) << syncs_.back().message;
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return get("/v1/containers/c1").has_value(); }, 10));
  // The runtime goes away: a pre-installed plugin exits instead of retrying.
  sim_->close_plugin();
  int status = 0;
  ASSERT_TRUE(exited(&status, 20));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(PodshimdNri, InvalidConfigFromConfigureIsRefused) {
  const std::string wrapper = write_wrapper();
  make_sim("no_such_key: 1\n");
  auto pid = sim_->spawn_plugin(wrapper, "podshim", "10");
  ASSERT_TRUE(pid);
  pid_ = *pid;
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return !syncs_.empty(); }, 30));
  EXPECT_FALSE(syncs_.back().ok());
  EXPECT_NE(syncs_.back().message.find("no_such_key"), std::string::npos) << syncs_.back().message;
}

}  // namespace
}  // namespace podshim
