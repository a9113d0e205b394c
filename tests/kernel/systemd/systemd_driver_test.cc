// The engine's systemd driver against a real systemd 252 running as PID 1 in
// the qemu guest (tests/vm/vm-run --mode systemd): a pod slice and a
// container scope created by systemd-run the way runc's systemd driver lays
// them out, resized through cgroup::Engine with DriverKind::Systemd. Both the
// unit properties (`systemctl show`) and the cgroup files must carry the new
// values — CPUQuotaPerSecUSec rounded up to 10 ms as runc does (runc#4622)
// and the same rounded quota in cpu.max — and the files must still carry them
// after `systemctl daemon-reload`, which re-applies unit properties to the
// cgroup (the reason the driver sets properties at all: moby#41233,
// kubernetes#113857). Skips outside the VM or without systemd as PID 1.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <systemd/sd-event.h>

#include "base/str.h"
#include "cgroup/convert.h"
#include "cgroup/engine.h"
#include "tests/cgroup/schedule_on.h"
#include "tests/kernel/kernel_env.h"
#include "tests/testutil/shell.h"

namespace podshim::cgroup {
namespace {

using podshim::kernel_test::slurp;

using namespace std::chrono_literals;

constexpr int64_t kMi = 1 << 20;
const std::string kCg = "/sys/fs/cgroup";

// Runs a shell command, returns its stdout; *rc gets the exit status.
std::string sh(const std::string& cmd, int* rc = nullptr) { return testutil::run_shell(cmd, rc); }
std::map<std::string, std::string> show(const std::string& unit) {
  std::map<std::string, std::string> m;
  std::istringstream in(
      sh("systemctl show -p CPUWeight,CPUQuotaPerSecUSec,CPUQuotaPeriodUSec,MemoryMax,ControlGroup " + unit));
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

class SystemdDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS({.systemd = true});
    // runc's layout: the pod is a slice, the container a scope in it named
    // <prefix>-<id>.scope (runc docs/systemd.md).
    id_ = "podshimtest" + std::to_string(getpid());
    pod_slice_ = "podshimtest-pod" + std::to_string(getpid()) + ".slice";
    scope_ = "cri-containerd-" + id_ + ".scope";
    // systemd-run --scope registers the scope, then execs the command in it:
    // the child's pid becomes `sleep` inside the scope.
    child_ = fork();
    if (child_ == 0) {
      execlp("systemd-run", "systemd-run", "--quiet", "--scope", "--slice", pod_slice_.c_str(), "--unit",
             ("cri-containerd-" + id_).c_str(), "-p", "Delegate=yes", "sleep", "1000", nullptr);
      _exit(127);
    }
    ASSERT_GT(child_, 0);
    bool active = false;
    for (int i = 0; i < 600 && !active; ++i) {
      active = str::trim(sh("systemctl is-active " + scope_ + " 2>/dev/null")) == "active";
      if (!active) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(active) << scope_ << " never became active";
    rel_pod_ = "podshimtest.slice/" + pod_slice_;
    rel_scope_ = rel_pod_ + "/" + scope_;
    ASSERT_EQ(show(scope_)["ControlGroup"], "/" + rel_scope_);
    ASSERT_NE(slurp(kCg + "/" + rel_scope_ + "/cgroup.procs"), "") << "no process in " << rel_scope_;

    EngineOptions o;
    o.driver = DriverKind::Systemd;
    o.state_dir = "/run/podshim-systemd-test";
    auto e = Engine::create(o);
    ASSERT_TRUE(e) << e.error().message;
    engine_ = std::move(*e);
  }
  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
      sh("systemctl stop " + pod_slice_ + " >/dev/null 2>&1");
    }
  }

  std::string id_, pod_slice_, scope_, rel_pod_, rel_scope_;
  pid_t child_ = -1;
  std::unique_ptr<Engine> engine_;
};

TEST_F(SystemdDriver, PropertiesAndFilesCarryNewValuesAndSurviveDaemonReload) {
  // 333m does not fall on systemd's 10 ms-per-second grid: runc rounds the
  // quota up to 340 ms/s, i.e. 34000 µs per 100 ms period, in the unit and in
  // cpu.max alike (runc#4622). The pod gets the containers' totals.
  K8sResources ctr{300, 333, std::nullopt, 200 * kMi};
  K8sResources pod{300, 333, std::nullopt, 256 * kMi};
  PodResizeRequest req;
  req.pod = ResizeTarget{"pod", pod_slice_, pod};
  req.containers.push_back(ResizeTarget{id_, pod_slice_ + ":cri-containerd:" + id_, ctr});

  const auto before_scope = show(scope_);
  std::printf("before: %s CPUWeight=%s CPUQuotaPerSecUSec=%s MemoryMax=%s; cpu.max=\"%s\" memory.max=%s\n",
              scope_.c_str(), before_scope.at("CPUWeight").c_str(), before_scope.at("CPUQuotaPerSecUSec").c_str(),
              before_scope.at("MemoryMax").c_str(), slurp(kCg + "/" + rel_scope_ + "/cpu.max").c_str(),
              slurp(kCg + "/" + rel_scope_ + "/memory.max").c_str());
  auto r = engine_->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  for (const auto& s : r->steps)
    std::printf("  step %s %s: %s -> %s\n", s.id.c_str(), s.file.c_str(), s.before.c_str(), s.after.c_str());

  const uint64_t ctr_weight = milli_cpu_to_weight(300, WeightFormula::Quadratic);
  const uint64_t pod_weight = milli_cpu_to_weight(300, WeightFormula::Linear);
  const uint64_t quota = systemd_round_quota_us(milli_cpu_to_quota_us(333));
  ASSERT_EQ(quota, 34000u) << "the rounding under test";
  struct Want {
    std::string unit, rel;
    uint64_t weight, memory;
  };
  const Want wants[] = {{scope_, rel_scope_, ctr_weight, 200 * kMi}, {pod_slice_, rel_pod_, pod_weight, 256 * kMi}};

  auto check_files = [&](const char* when) {
    for (const auto& w : wants) {
      SCOPED_TRACE(std::string(when) + " " + w.unit);
      EXPECT_EQ(slurp(kCg + "/" + w.rel + "/cpu.weight"), std::to_string(w.weight));
      EXPECT_EQ(slurp(kCg + "/" + w.rel + "/cpu.max"), fmt::format("{} 100000", quota));
      EXPECT_EQ(slurp(kCg + "/" + w.rel + "/memory.max"), std::to_string(w.memory));
    }
  };
  auto check_units = [&](const char* when) {
    for (const auto& w : wants) {
      SCOPED_TRACE(std::string(when) + " " + w.unit);
      auto p = show(w.unit);
      EXPECT_EQ(p["CPUWeight"], std::to_string(w.weight));
      EXPECT_EQ(p["CPUQuotaPerSecUSec"], "340ms");
      EXPECT_EQ(p["CPUQuotaPeriodUSec"], "100ms");
      EXPECT_EQ(p["MemoryMax"], std::to_string(w.memory));
    }
  };
  check_units("after resize");
  check_files("after resize");

  // daemon-reload re-applies every unit's properties to its cgroup: values
  // written only to files would be reverted here.
  int rc = -1;
  std::string out = sh("systemctl daemon-reload 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const auto& w : wants) {
    auto p = show(w.unit);
    std::printf("after daemon-reload: %s CPUWeight=%s CPUQuotaPerSecUSec=%s CPUQuotaPeriodUSec=%s MemoryMax=%s; "
                "cpu.weight=%s cpu.max=\"%s\" memory.max=%s\n",
                w.unit.c_str(), p["CPUWeight"].c_str(), p["CPUQuotaPerSecUSec"].c_str(),
                p["CPUQuotaPeriodUSec"].c_str(), p["MemoryMax"].c_str(),
                slurp(kCg + "/" + w.rel + "/cpu.weight").c_str(), slurp(kCg + "/" + w.rel + "/cpu.max").c_str(),
                slurp(kCg + "/" + w.rel + "/memory.max").c_str());
  }
  check_units("after daemon-reload");
  check_files("after daemon-reload");

  // Read-back through the engine agrees with Kubernetes units.
  auto a = engine_->read_actual(pod_slice_ + ":cri-containerd:" + id_);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->memory_limit_bytes, 200 * kMi);
  EXPECT_EQ(a->cpu_limit_milli, 340);  // the rounded quota is what the kernel enforces
  EXPECT_EQ(a->cpu_request_milli, weight_to_milli_cpu(ctr_weight, WeightFormula::Quadratic));
}

// The same driver as podshimd runs it: asynchronous resizes on an sd-event
// loop, the sd-bus connection attached to it (EngineOptions::event), the
// SetUnitProperties replies dispatched by the loop, so a slow systemd
// never stalls the loop.
TEST_F(SystemdDriver, AsynchronousResizeOnTheLoopSetsUnitAndFiles) {
  sd_event* loop = nullptr;
  ASSERT_GE(sd_event_new(&loop), 0);
  EngineOptions o;
  o.driver = DriverKind::Systemd;
  o.state_dir = "/run/podshim-systemd-test";
  o.event = loop;
  o.schedule = [loop](std::chrono::milliseconds d, std::function<void()> fn) {
    testing::schedule_on(loop, d, std::move(fn));
  };
  auto e = Engine::create(o);
  ASSERT_TRUE(e) << e.error().message;
  PodResizeRequest req;
  req.containers.push_back(ResizeTarget{id_, pod_slice_ + ":cri-containerd:" + id_, {500, 700, std::nullopt, 96 * kMi}});
  std::optional<Result<ResizeReport>> out;
  (*e)->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
  auto stop = std::chrono::steady_clock::now() + 20s;
  while (!out && std::chrono::steady_clock::now() < stop) sd_event_run(loop, 100000);
  ASSERT_TRUE(out) << "the asynchronous resize never completed";
  ASSERT_TRUE(*out) << out->error().message;
  auto p = show(scope_);
  const uint64_t weight = milli_cpu_to_weight(500, WeightFormula::Quadratic);
  EXPECT_EQ(p["CPUWeight"], std::to_string(weight));
  EXPECT_EQ(p["CPUQuotaPerSecUSec"], "700ms");
  EXPECT_EQ(p["MemoryMax"], std::to_string(96 * kMi));
  EXPECT_EQ(slurp(kCg + "/" + rel_scope_ + "/cpu.max"), "70000 100000");
  EXPECT_EQ(slurp(kCg + "/" + rel_scope_ + "/memory.max"), std::to_string(96 * kMi));
  std::printf("async on the loop: %s CPUWeight=%s CPUQuotaPerSecUSec=%s MemoryMax=%s in %lld ms\n", scope_.c_str(),
              p["CPUWeight"].c_str(), p["CPUQuotaPerSecUSec"].c_str(), p["MemoryMax"].c_str(),
              static_cast<long long>((*out)->duration.count()));
  e->reset();
  sd_event_unref(loop);
}

}  // namespace
}  // namespace podshim::cgroup
