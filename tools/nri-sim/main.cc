// podshim-nri-sim: a runtime-side NRI peer for manual testing of plugins.
// Listens on a socket (or spawns a pre-installed plugin on fd 3),
// configures and synchronizes it, drives every event for one pod and
// container, and prints round-trip times.
#include <getopt.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/str.h"
#include "shim/nri/simulator.h"

using namespace podshim::nri;

namespace {

void usage(FILE* f) {
  std::fprintf(f,
      "usage: podshim-nri-sim [options]\n"
      "  --socket PATH       listen here for an external plugin (default /tmp/nri-sim.sock)\n"
      "  --spawn EXE         run EXE as a pre-installed plugin (socketpair on fd 3)\n"
      "  --name NAME         name given to a spawned plugin (default podshim)\n"
      "  --index NN          index given to a spawned plugin (default 10)\n"
      "  --nri-minor N       emulated runtime NRI version 0.N (2..12, default 12)\n"
      "  --pods N            pods in Synchronize (default 10)\n"
      "  --containers N      containers in Synchronize (default 30)\n"
      "  --calls N           CreateContainer/UpdateContainer round trips to time (default 1000)\n"
      "  --config STRING     ConfigureRequest.config\n"
      "  -h, --help          this text\n");
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

bool run_until(sd_event* loop, const std::function<bool()>& pred, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (pred()) return true;
    if (sd_event_run(loop, 10'000) < 0) return false;
  }
  return pred();
}

void print_times(const char* what, std::vector<uint64_t> ns) {
  if (ns.empty()) return;
  std::sort(ns.begin(), ns.end());
  std::printf("%-16s n=%zu median=%.1f us p99=%.1f us\n", what, ns.size(),
              static_cast<double>(ns[ns.size() / 2]) / 1000,
              static_cast<double>(ns[ns.size() * 99 / 100]) / 1000);
}

// What the command line asks for.
struct SimArgs {
  std::string socket = "/tmp/nri-sim.sock", spawn, name = "podshim", index = "10";
  SimOptions so;
  uint64_t pods = 10, ctrs = 30, calls = 1000;
};

// The arguments into `a`; an exit code when they are wrong or --help.
std::optional<int> parse_args(int argc, char** argv, SimArgs* a) {
  static const option longopts[] = {
      {"socket", required_argument, nullptr, 's'}, {"spawn", required_argument, nullptr, 'x'},
      {"name", required_argument, nullptr, 'n'},   {"index", required_argument, nullptr, 'i'},
      {"nri-minor", required_argument, nullptr, 'm'}, {"pods", required_argument, nullptr, 'p'},
      {"containers", required_argument, nullptr, 'c'}, {"calls", required_argument, nullptr, 'k'},
      {"config", required_argument, nullptr, 'f'}, {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  auto num = [](const char* opt, const char* v, uint64_t max) -> std::optional<uint64_t> {
    auto r = podshim::str::parse_u64(v);
    if (!r || *r > max) {
      std::fprintf(stderr, "podshim-nri-sim: invalid --%s '%s'\n", opt, v);
      return std::nullopt;
    }
    return *r;
  };
  int o;
  while ((o = getopt_long(argc, argv, "h", longopts, nullptr)) != -1) {
    std::optional<uint64_t> n = 0;
    switch (o) {
      case 's': a->socket = optarg; break;
      case 'x': a->spawn = optarg; break;
      case 'n': a->name = optarg; break;
      case 'i': a->index = optarg; break;
      case 'm':
        if ((n = num("nri-minor", optarg, 12))) a->so.nri_minor = static_cast<int>(*n);
        break;
      case 'p':
        if ((n = num("pods", optarg, 100000))) a->pods = *n;
        break;
      case 'c':
        if ((n = num("containers", optarg, 1000000))) a->ctrs = *n;
        break;
      case 'k':
        if ((n = num("calls", optarg, 10000000))) a->calls = *n;
        break;
      case 'f': a->so.config = optarg; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
    if (!n) return 2;
  }
  if (a->so.nri_minor < 2) {
    std::fprintf(stderr, "podshim-nri-sim: --nri-minor must be 2..12\n");
    return 2;
  }
  if (a->pods == 0 && a->ctrs > 0) a->pods = 1;
  return std::nullopt;
}

// `calls` CreateContainer and UpdateContainer round trips, timed; then one
// of every lifecycle event. Returns the failures.
int drive(sd_event* loop, Simulator& sim, const api::PodSandbox& pod, uint64_t calls) {
  const auto ctr = make_container(pod, 999999);
  int failures = 0;
  auto wait = [&](bool& done) { run_until(loop, [&] { return done; }, 30); };
  std::vector<uint64_t> create, update;
  for (uint64_t i = 0; i < calls; ++i) {
    bool done = false;
    const uint64_t t = now_ns();
    sim.create_container(pod, ctr, [&](Status s, api::CreateContainerResponse) {
      failures += !s.ok();
      done = true;
    });
    wait(done);
    create.push_back(now_ns() - t);
    done = false;
    const uint64_t u = now_ns();
    sim.update_container(pod, ctr, ctr.linux().resources(), [&](Status s, api::UpdateContainerResponse) {
      failures += !s.ok();
      done = true;
    });
    wait(done);
    update.push_back(now_ns() - u);
  }
  for (api::Event e : {api::RUN_POD_SANDBOX, api::POST_CREATE_CONTAINER, api::START_CONTAINER,
                       api::POST_START_CONTAINER, api::POST_UPDATE_CONTAINER,
                       api::REMOVE_CONTAINER, api::STOP_POD_SANDBOX, api::REMOVE_POD_SANDBOX}) {
    bool done = false;
    const bool pod_only = e == api::RUN_POD_SANDBOX || e == api::STOP_POD_SANDBOX ||
                          e == api::REMOVE_POD_SANDBOX;
    sim.observe(e, pod, pod_only ? nullptr : &ctr, [&](Status s) {
      if (!s.ok()) std::printf("%s: code %d: %s\n", std::string(event_name(e)).c_str(), s.code, s.message.c_str());
      failures += !s.ok();
      done = true;
    });
    wait(done);
  }
  print_times("CreateContainer", create);
  print_times("UpdateContainer", update);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  SimArgs a;
  if (auto rc = parse_args(argc, argv, &a)) return *rc;
  signal(SIGPIPE, SIG_IGN);
  sd_event* loop = nullptr;
  if (sd_event_default(&loop) < 0) return 1;
  Simulator sim(loop, a.so);
  std::vector<api::PodSandbox> ps;
  std::vector<api::Container> cs;
  for (uint64_t i = 0; i < a.pods; ++i) ps.push_back(make_pod(static_cast<int>(i)));
  for (uint64_t i = 0; i < a.ctrs; ++i) cs.push_back(make_container(ps[i % a.pods], static_cast<int>(i)));
  sim.set_state(ps, cs);
  Status sync_status{-1, "pending"};
  sim.on_synchronized = [&](Status s) { sync_status = s; };
  sim.on_plugin_closed = [](const podshim::Error& e) {
    std::fprintf(stderr, "plugin connection closed: %s\n", e.message.c_str());
  };
  pid_t child = -1;
  if (!a.spawn.empty()) {
    auto pid = sim.spawn_plugin(a.spawn, a.name, a.index);
    if (!pid) {
      std::fprintf(stderr, "podshim-nri-sim: %s\n", pid.error().message.c_str());
      return 1;
    }
    child = *pid;
  } else if (auto r = sim.listen(a.socket); !r) {
    std::fprintf(stderr, "podshim-nri-sim: %s\n", r.error().message.c_str());
    return 1;
  } else {
    std::printf("listening on %s (NRI v0.%d)\n", a.socket.c_str(), a.so.nri_minor);
  }
  const uint64_t t0 = now_ns();
  if (!run_until(loop, [&] { return sync_status.code != -1; }, 3600) || !sync_status.ok()) {
    std::fprintf(stderr, "handshake failed: %s\n", sync_status.message.c_str());
    return 1;
  }
  std::printf("plugin %s-%s (NRI %s) subscribed 0x%x; synchronized %zu pods / %zu containers in "
              "%zu page(s), %.1f ms\n", sim.plugin().index.c_str(), sim.plugin().name.c_str(),
              sim.plugin().nri_version.c_str(), sim.plugin().events, ps.size(), cs.size(),
              sim.sync_pages().size(), static_cast<double>(now_ns() - t0) / 1e6);
  const int failures = drive(loop, sim, ps.empty() ? make_pod(0) : ps[0], a.calls);
  std::printf("largest frame from plugin: %llu bytes; event transport: %s; failures: %d\n",
              static_cast<unsigned long long>(sim.max_plugin_frame()),
              sim.uses_state_change() ? "StateChange" : "dedicated RPCs", failures);
  sim.close_plugin();
  if (child > 0) waitpid(child, nullptr, 0);
  sd_event_unref(loop);
  return failures ? 1 : 0;
}
