// Benchmark: the status socket of a real podshimd (--nri=off, a
// fake cgroup tree under a temp dir, http.max_connections 64, timeout 3 s)
// under more slow clients than it has connections: 70 clients of a read-only
// uid dripping header lines and 30 of a writer uid dripping bodies, each
// reconnecting whenever the server closes it, for 8 s. Meanwhile root asks
// GET /healthz and the hook's registrar POSTs registrations, one request every
// 20 ms. Prints the good requests' median/p99/max, against the same stream
// with no slow clients measured first in the same run, and how the slow
// clients were turned away. Unix sockets only; bounded to ~12 s.
//
// Needs root (the slow clients drop to uids 65534/65533); exits 77 otherwise.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/cgroup/fake_tree.h"
#include "tests/hostile/slow_clients.h"

namespace t = podshim::testing;

namespace {

void row(const char* name, const std::vector<double>& ms) {
  std::printf("%-34s n=%-5zu median %7.2f ms   p99 %7.2f ms   max %7.2f ms\n", name, ms.size(), t::percentile(ms, 50),
              t::percentile(ms, 99), t::percentile(ms, 100));
}

}  // namespace

int main() {
  ::signal(SIGPIPE, SIG_IGN);
  const char* exe = std::getenv("PODSHIM_PODSHIMD");
  if (!exe) {
    std::fprintf(stderr, "PODSHIM_PODSHIMD not set\n");
    return 1;
  }
  if (::geteuid() != 0) {
    std::printf("SKIP: needs root to run slow clients as uids 65534/65533\n");
    return 77;
  }
  podshim::cgroup::testing::FakeTree tree;
  tree.add("kubepods");
  tree.add("kubepods/burstable");
  tree.add("kubepods/burstable/podb");
  tree.add("kubepods/burstable/podb/c1");
  const std::string dir = tree.state() + "/daemon";
  std::filesystem::create_directories(dir + "/state");
  for (const std::string& d : {tree.state() + "/..", tree.state(), dir}) ::chmod(d.c_str(), 0755);
  const std::string sock = dir + "/s.sock", cfg = dir + "/config.yaml";
  std::ofstream(cfg) << "socket:\n  path: " << sock << "\n  group: \"65534\"\n"
                     << "state_dir: " << dir << "/state\n"
                     << "cgroup:\n  root: " << tree.cg_root() << "\n  driver: cgroupfs\n"
                     << "http:\n  timeout_seconds: 3\n  max_connections: 64\n"
                     << "node:\n  allocatable:\n    cpu: \"8\"\n    memory: 16Gi\n"
                     << "access:\n  - methods: [\"GET\"]\n    uids: [0]\n    groups: [\"65534\"]\n"
                     << "  - methods: [\"POST\"]\n    uids: [0]\n    groups: [\"65533\"]\n"
                     << "  - methods: [\"*\"]\n    uids: [0]\n";
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, 2);
    ::execl(exe, exe, "--nri=off", "--config", cfg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  podshim::status::ClientOptions co;
  co.socket_path = sock;
  co.timeout = std::chrono::milliseconds(500);
  bool up = false;
  for (int i = 0; i < 250 && !up; i++) {
    auto r = podshim::status::http_request(co, "GET", "/healthz");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int rc = 0;
  if (!up) {
    std::fprintf(stderr, "podshimd did not come up\n");
    rc = 1;
  } else {
    const std::string cg = "/kubepods/burstable/podb/c1";
    auto base = t::good_stream(sock, cg, std::chrono::milliseconds(2000), std::chrono::milliseconds(20));

    t::SlowOptions ho;
    ho.socket = sock;
    ho.clients = 70;
    ho.duration = std::chrono::milliseconds(8000);
    ho.drip = std::chrono::milliseconds(400);
    t::SlowOptions bo = ho;
    bo.clients = 30;
    bo.body = true;
    bo.uid = bo.gid = 65533;
    bo.groups = {65534};
    t::SlowClients heads(ho), bodies(bo);
    heads.start();
    bodies.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto load = t::good_stream(sock, cg, std::chrono::milliseconds(7000), std::chrono::milliseconds(20));
    auto hr = heads.finish();
    auto br = bodies.finish();

    std::printf("podshimd status socket, max_connections 64, http timeout 3 s, unix socket\n");
    std::printf("baseline (no slow clients), 2 s:\n");
    row("  root GET /healthz", base.root_ms);
    row("  hook registration (POST)", base.hook_ms);
    std::printf("under 70 slow header clients (uid 65534) + 30 slow body clients (uid 65533), 7 s:\n");
    row("  root GET /healthz", load.root_ms);
    row("  hook registration (POST)", load.hook_ms);
    std::printf("  good requests failed: %d%s%s\n", load.failed + base.failed, load.first_failure.empty() ? "" : ": ",
                load.first_failure.c_str());
    for (auto [name, r] : {std::pair{"header drippers", hr}, std::pair{"body drippers", br}}) {
      std::printf("  %s: %d connects, %d refused 503, %d cut off 408, %d other, longest connection %d ms\n", name,
                  r.connects, r.refused_503, r.timed_out, r.other, r.longest_ms);
    }
    std::printf("  p99 under load: root %.2f ms, hook %.2f ms (target <= 100 ms)\n", t::percentile(load.root_ms, 99),
                t::percentile(load.hook_ms, 99));
    if (load.failed + base.failed > 0) rc = 1;
  }
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  return rc;
}
