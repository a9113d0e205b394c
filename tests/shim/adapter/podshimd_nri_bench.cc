// Benchmark: NRI round trips through the real podshimd process, driven by our
// runtime simulator over a unix socket, with the seccomp filter on and off in
// the same run (the cost of the filter), plus podshimd's peak RSS after
// synchronizing 3000 containers. Prints figures; asserts nothing about speed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "shim/nri/simulator.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/shim/nri/test_support.h"
#include "tests/testutil/proc.h"

namespace {

using namespace podshim;
namespace api = podshim::nri::api;
using Clock = std::chrono::steady_clock;

struct Stats {
  double median_us = 0, p99_us = 0;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

struct Run {
  Stats create, update;
  long rss_kb = -1;
};

Run run(const std::string& podshimd, bool seccomp, int containers, int calls) {
  cgroup::testing::FakeTree tree;
  const std::string dir = tree.state();
  std::ofstream(dir + "/config.yaml") << "state_dir: " << dir << "/st\nsocket:\n  path: " << dir
                                      << "/p.sock\ncgroup:\n  root: " << tree.cg_root()
                                      << "\n  driver: cgroupfs\nlog_level: warning\nnri:\n  socket: " << dir
                                      << "/nri.sock\ncdi:\n  spec_dirs: [" << dir << "/cdi]\n";
  sd_event* loop = nullptr;
  sd_event_new(&loop);
  podshim::nri::Simulator sim(loop, podshim::nri::SimOptions{});
  std::vector<api::PodSandbox> pods;
  std::vector<api::Container> ctrs;
  for (int p = 0; p < 100; ++p) {
    api::PodSandbox pod;
    pod.set_id(fmt::format("sb{}", p));
    pod.set_uid(fmt::format("0000{:04}-0000-4000-8000-000000000000", p));
    pod.mutable_linux()->set_cgroup_parent(fmt::format("/kubepods/burstable/pod{}", pod.uid()));
    pods.push_back(pod);
  }
  for (int c = 0; c < containers; ++c) {
    const auto& pod = pods[static_cast<size_t>(c % 100)];
    api::Container ctr;
    ctr.set_id(fmt::format("ctr{:05}", c));
    ctr.set_pod_sandbox_id(pod.id());
    ctr.set_name(ctr.id());
    ctr.mutable_linux()->set_cgroups_path(pod.linux().cgroup_parent() + "/" + ctr.id());
    ctr.mutable_linux()->mutable_resources()->mutable_memory()->mutable_limit()->set_value(256 << 20);
    (*ctr.mutable_annotations())["io.kubernetes.container.name"] = ctr.id();
    ctrs.push_back(ctr);
  }
  sim.set_state(pods, ctrs);
  (void)sim.listen(dir + "/nri.sock");
  pid_t pid = fork();
  if (pid == 0) {
    if (seccomp)
      execl(podshimd.c_str(), "podshimd", "--config", (dir + "/config.yaml").c_str(), nullptr);
    else
      execl(podshimd.c_str(), "podshimd", "--config", (dir + "/config.yaml").c_str(), "--no-seccomp",
            nullptr);
    _exit(127);
  }
  Run out;
  if (!podshim::nri::test::run_until(loop, [&] { return sim.synchronized(); }, 120)) {
    std::fprintf(stderr, "podshimd did not synchronize\n");
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return out;
  }
  out.rss_kb = podshim::testutil::proc_status_kib(pid, "VmHWM");
  const api::PodSandbox& pod = pods[0];
  std::vector<double> create_us, update_us;
  for (int i = 0; i < calls; ++i) {
    api::Container c = ctrs[0];
    c.set_id(fmt::format("new{:05}", i));
    bool done = false;
    auto t0 = Clock::now();
    sim.create_container(pod, c, [&](podshim::nri::Status, api::CreateContainerResponse) { done = true; });
    podshim::nri::test::run_until(loop, [&] { return done; }, 10);
    create_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  for (int i = 0; i < calls; ++i) {
    api::LinuxResources r;
    r.mutable_memory()->mutable_limit()->set_value((256 << 20) + (i % 2) * 4096);
    bool done = false;
    auto t0 = Clock::now();
    sim.update_container(pod, ctrs[0], r, [&](podshim::nri::Status, api::UpdateContainerResponse) { done = true; });
    podshim::nri::test::run_until(loop, [&] { return done; }, 10);
    update_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  out.create = stats(create_us);
  out.update = stats(update_us);
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  sd_event_unref(loop);
  return out;
}

}  // namespace

int main() {
  const char* p = getenv("PODSHIM_PODSHIMD");
  if (!p) {
    std::fprintf(stderr, "PODSHIM_PODSHIMD not set\n");
    return 1;
  }
  const int containers = 3000, calls = 2000;
  Run off = run(p, false, containers, calls);
  Run on = run(p, true, containers, calls);
  std::printf("podshimd NRI round trips (simulator over a unix socket; %d pods, %d containers synced; %d calls each)\n",
              100, containers, calls);
  std::printf("%-34s %12s %12s\n", "", "median (us)", "p99 (us)");
  std::printf("%-34s %12.1f %12.1f\n", "CreateContainer, seccomp off", off.create.median_us, off.create.p99_us);
  std::printf("%-34s %12.1f %12.1f\n", "CreateContainer, seccomp on", on.create.median_us, on.create.p99_us);
  std::printf("%-34s %12.1f %12.1f\n", "UpdateContainer, seccomp off", off.update.median_us, off.update.p99_us);
  std::printf("%-34s %12.1f %12.1f\n", "UpdateContainer, seccomp on", on.update.median_us, on.update.p99_us);
  std::printf("seccomp cost (median ratio on/off): CreateContainer %.2fx, UpdateContainer %.2fx\n",
              on.create.median_us / off.create.median_us, on.update.median_us / off.update.median_us);
  std::printf("podshimd peak RSS (VmHWM) after synchronizing %d containers: %.1f MiB (seccomp on), %.1f MiB (off)\n",
              containers, on.rss_kb / 1024.0, off.rss_kb / 1024.0);
  return (on.rss_kb > 0 && off.rss_kb > 0) ? 0 : 1;
}
