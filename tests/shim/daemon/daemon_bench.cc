// Benchmark: podshimd --nri=off on a fake cgroup root. 1000 containers are
// registered; then GET /v1/containers (the full list), single GETs and 1000
// resize requests go through the socket, each twice: one connection per
// request (as podshimctl and podshim-hook do) and over one kept-alive
// connection (a client that asks repeatedly). Prints requests/s, median and
// p99 latency, and podshimd's RSS; GET /healthz in the same run and mode is
// the baseline (the cost of the connection + HTTP round trip with no work).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "tests/shim/daemon/daemon_harness.h"

using namespace podshim::testing;
using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
  double rps, median_us, p99_us;
};

template <typename F>
Stats measure(int n, F&& f) {
  std::vector<double> us;
  us.reserve(n);
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto s = Clock::now();
    f(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
  }
  double total = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(us.begin(), us.end());
  return {n / total, us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

void print(const char* what, const Stats& s) {
  std::printf("%-34s %9.0f req/s  median %8.1f us  p99 %8.1f us\n", what, s.rps, s.median_us, s.p99_us);
}

}  // namespace

int main() {
  if (!getenv("PODSHIMD")) {
    std::fprintf(stderr, "run through meson test --benchmark\n");
    return 77;
  }
  std::string dir = make_temp_dir();
  std::string cfg = dir + "/config.yaml";
  std::ofstream(cfg) << "log_level: warning\nnode: {allocatable: {cpu: \"100000\", memory: 10Ti}}\n";
  Daemon d(dir, {"--config", cfg});
  if (!d.start()) {
    std::fprintf(stderr, "podshimd did not start\n");
    return 1;
  }
  constexpr int kContainers = 1000;
  long rss0 = rss_kib(d.pid());
  for (int i = 0; i < kContainers; ++i) {
    std::string id = "c" + std::to_string(i);
    std::string cg = "/kubepods/burstable/podp" + std::to_string(i % 100) + "/" + id;
    fake_cgroup(d.cgroot(), cg);
    nlohmann::json body{{"id", id}, {"podUid", "p" + std::to_string(i % 100)}, {"cgroupPath", cg},
                        {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}},
                                       {"limits", {{"memory", "128Mi"}}}}}};
    auto r = d.req("POST", "/v1/containers", body.dump());
    if (r.status != 201) {
      std::fprintf(stderr, "register %s: %d %s\n", id.c_str(), r.status, r.body.c_str());
      return 1;
    }
  }
  long rss1 = rss_kib(d.pid());
  std::printf("podshimd status socket, %d containers registered, fake cgroup root\n", kContainers);
  podshim::status::ClientOptions ko;
  ko.socket_path = d.socket();
  ko.timeout = std::chrono::seconds(30);
  podshim::status::Connection keep(ko);
  auto kreq = [&](std::string_view m, const std::string& t, std::string_view body = {}) {
    auto r = keep.request(m, t, body);
    return r ? *r : podshim::status::HttpResponse{};
  };
  int applied = 0, in_progress = 0, sent = 0;
  auto resize_body = [](int i) {
    std::string mem = std::to_string(128 + (i % 2) * 64) + "Mi";
    return R"({"resources":{"limits":{"memory":")" + mem + R"(","cpu":")" + std::to_string(200 + i % 7 * 100) +
           R"(m"}}})";
  };
  auto count = [&](const podshim::status::HttpResponse& r) {
    ++sent;
    // A memory decrease answers in_progress: its shrink settles on the
    // daemon's timers (cgroup.shrink_settle_ms) after the reply.
    if (r.body.find("\"applied\"") != std::string::npos)
      ++applied;
    else if (r.body.find("\"in_progress\"") != std::string::npos)
      ++in_progress;
    else if (sent - applied - in_progress == 1)
      std::fprintf(stderr, "first resize answered otherwise: %d %s\n", r.status, r.body.c_str());
  };
  size_t bytes = 0;
  std::printf("-- one connection per request\n");
  print("GET /healthz (baseline)", measure(2000, [&](int) { d.req("GET", "/healthz"); }));
  print("GET /v1/containers (1000 items)", measure(200, [&](int) { bytes = d.req("GET", "/v1/containers").body.size(); }));
  print("GET /v1/containers/{id}", measure(2000, [&](int i) { d.req("GET", "/v1/containers/c" + std::to_string(i % kContainers)); }));
  std::printf("-- one kept-alive connection\n");
  print("GET /healthz (baseline)", measure(10000, [&](int) { kreq("GET", "/healthz"); }));
  print("GET /v1/containers (1000 items)", measure(500, [&](int) { bytes = kreq("GET", "/v1/containers").body.size(); }));
  print("GET /v1/containers/{id}", measure(10000, [&](int i) { kreq("GET", "/v1/containers/c" + std::to_string(i % kContainers)); }));
  std::printf("-- resizes (after the reads: a resize adds the read-back to each container), one connection per request\n");
  print("POST /v1/containers/{id}/resize", measure(1000, [&](int i) {
          count(d.req("POST", "/v1/containers/c" + std::to_string(i % kContainers) + "/resize", resize_body(i)));
        }));
  std::printf("-- resizes, one kept-alive connection\n");
  print("POST /v1/containers/{id}/resize", measure(2000, [&](int i) {
          count(kreq("POST", "/v1/containers/c" + std::to_string(i % kContainers) + "/resize", resize_body(i + 1)));
        }));
  std::printf("  list response size: %zu bytes\n", bytes);
  std::printf("  resizes answered applied: %d, in_progress (memory decreases, settling after the reply): %d, of %d\n",
              applied, in_progress, sent);
  long rss2 = rss_kib(d.pid());
  std::printf("podshimd RSS: %ld KiB idle, %ld KiB with %d containers, %ld KiB after the run\n", rss0, rss1,
              kContainers, rss2);
  d.stop();
  std::filesystem::remove_all(dir);
  return applied + in_progress == sent ? 0 : 1;
}
