// NRI round-trip and memory benchmark. Prints figures; asserts nothing about
// speed. Three round-trip measurements over ≥ 2000 calls each:
//   baseline  a bare 1.4 KB write/read ping-pong over a socketpair (kernel cost)
//   in-proc   simulator and plugin on one sd-event loop (all podshim code)
//   child     the plugin as a separate pre-installed process (what a runtime sees)
// and the plugin child's peak RSS (VmHWM) after synchronizing 3000
// containers, next to a child synchronized with none.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "shim/nri/simulator.h"
#include "tests/shim/nri/test_support.h"
#include "tests/testutil/proc.h"

using namespace podshim::nri;
using podshim::nri::test::RecordingHandlers;
using podshim::nri::test::run_until;

namespace {

constexpr int kCalls = 2000;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

void report(const char* name, std::vector<uint64_t> ns) {
  std::sort(ns.begin(), ns.end());
  const double med = static_cast<double>(ns[ns.size() / 2]) / 1000.0;
  const double p99 = static_cast<double>(ns[ns.size() * 99 / 100]) / 1000.0;
  std::printf("%-34s n=%zu median=%8.1f us  p99=%8.1f us\n", name, ns.size(), med, p99);
}

std::vector<uint64_t> baseline_pingpong() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) return {};
  std::string msg(1400, 'x');
  char buf[2048];
  std::vector<uint64_t> out;
  for (int i = 0; i < kCalls; ++i) {
    const uint64_t t0 = now_ns();
    if (::write(sv[0], msg.data(), msg.size()) < 0) break;
    size_t got = 0;
    while (got < msg.size()) got += static_cast<size_t>(::read(sv[1], buf, sizeof buf));
    if (::write(sv[1], buf, 10) < 0) break;
    if (::read(sv[0], buf, sizeof buf) < 0) break;
    out.push_back(now_ns() - t0);
  }
  ::close(sv[0]);
  ::close(sv[1]);
  return out;
}

// Runs kCalls CreateContainer and UpdateContainer round trips.
void round_trips(sd_event* loop, Simulator& sim, const char* label) {
  const auto pod = make_pod(1);
  const auto ctr = make_container(pod, 1);
  api::LinuxResources res;
  res.mutable_memory()->mutable_limit()->set_value(256 << 20);
  res.mutable_cpu()->mutable_quota()->set_value(50000);
  std::vector<uint64_t> create, update;
  for (int i = 0; i < kCalls; ++i) {
    bool done = false;
    const uint64_t t0 = now_ns();
    sim.create_container(pod, ctr, [&](Status s, api::CreateContainerResponse) {
      if (!s.ok()) std::fprintf(stderr, "CreateContainer: %s\n", s.message.c_str());
      done = true;
    });
    run_until(loop, [&] { return done; });
    create.push_back(now_ns() - t0);
  }
  for (int i = 0; i < kCalls; ++i) {
    bool done = false;
    const uint64_t t0 = now_ns();
    sim.update_container(pod, ctr, res, [&](Status s, api::UpdateContainerResponse) {
      if (!s.ok()) std::fprintf(stderr, "UpdateContainer: %s\n", s.message.c_str());
      done = true;
    });
    run_until(loop, [&] { return done; });
    update.push_back(now_ns() - t0);
  }
  report((std::string("CreateContainer ") + label).c_str(), create);
  report((std::string("UpdateContainer ") + label).c_str(), update);
}

// Spawns the test plugin, synchronizes `ctrs` containers, optionally runs
// round trips, returns VmHWM in KiB.
long child_run(sd_event* loop, int ctrs, bool trips) {
  SimOptions so;
  so.nri_minor = 8;  // paging
  Simulator sim(loop, so);
  std::vector<api::PodSandbox> pods;
  std::vector<api::Container> cs;
  for (int i = 0; i < 100; ++i) pods.push_back(make_pod(i));
  for (int i = 0; i < ctrs; ++i) cs.push_back(make_container(pods[static_cast<size_t>(i % 100)], i));
  sim.set_state(std::move(pods), std::move(cs));
  auto pid = sim.spawn_plugin(PODSHIM_NRI_TEST_PLUGIN, "podshim", "10");
  if (!pid) {
    std::fprintf(stderr, "spawn: %s\n", pid.error().message.c_str());
    return -1;
  }
  if (!run_until(loop, [&] { return sim.synchronized(); }, 120)) {
    kill(*pid, SIGKILL);
    int st = 0;
    waitpid(*pid, &st, 0);
    std::fprintf(stderr, "plugin did not synchronize (wait status 0x%x)\n", st);
    return -1;
  }
  if (ctrs > 0) {
    std::printf("synchronized %d containers in %zu page(s)\n", ctrs, sim.sync_pages().size());
  }
  if (trips) round_trips(loop, sim, "(plugin child)");
  const long hwm = podshim::testutil::proc_status_kib(*pid, "VmHWM");
  sim.close_plugin();
  int st = 0;
  waitpid(*pid, &st, 0);
  return hwm;
}

}  // namespace

int main() {
  signal(SIGPIPE, SIG_IGN);
  sd_event* loop = nullptr;
  if (sd_event_new(&loop) < 0) return 1;

  report("baseline socketpair ping-pong", baseline_pingpong());

  {
    Simulator sim(loop, SimOptions{});
    RecordingHandlers h;
    auto fd = sim.socketpair();
    if (!fd) return 1;
    PluginOptions po;
    po.socket_fd = fd->release();
    Plugin plugin(loop, h, po);
    if (!plugin.start()) return 1;
    if (!run_until(loop, [&] { return sim.synchronized(); })) return 1;
    h.calls.reserve(2 * kCalls + 8);
    round_trips(loop, sim, "(in-process)");
  }

  const long idle = child_run(loop, 0, false);
  const long full = child_run(loop, 3000, true);
  std::printf("plugin child peak RSS (VmHWM): %ld KiB after syncing 0 containers, "
              "%ld KiB after syncing 3000\n", idle, full);
  sd_event_unref(loop);
  return idle > 0 && full > 0 ? 0 : 1;
}
