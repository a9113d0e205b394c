// Benchmark: podshimd --nri=off on a fake cgroup root. 1000 containers are
// registered; then GET /v1/containers (the full list), single GETs and 1000
// resize requests go through the socket, each twice: one connection per
// request (as podshimctl and podshim-hook do) and over one kept-alive
// connection (a client that asks repeatedly). Prints requests/s, median and
// p99 latency, and podshimd's RSS; GET /healthz in the same run and mode is
// the baseline (the cost of the connection + HTTP round trip with no work).
//
// Those figures are round trips of one synchronous client on the same 2-core
// machine: they add the client's own time to podshimd's. The "concurrent"
// figures measure what podshimd itself serves: several connections driven
// from one epoll loop (kept-alive ones with a few requests pipelined each,
// or a new connection per request), every response parsed and checked. Each
// phase also prints the CPU time podshimd and the client spent per request.
// The fake cgroup root is put on a tmpfs (/dev/shm) when there is one: it
// stands for cgroupfs, which is in memory; on ext4 every O_TRUNC rewrite of a
// cgroup file starts writeback (auto_da_alloc) and made resizes wait for the
// disk the other processes on the machine were using. The state dir stays on
// the temp dir's disk, as /var/lib/podshim is: hooks-only mode's journal and
// its compaction (Store::compact, every 4 MiB of changes) are in the figures.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <functional>
#include <numeric>
#include <string_view>

#include "tests/shim/daemon/daemon_harness.h"
#include "tests/testutil/proc.h"

using namespace podshim::testing;
using Clock = std::chrono::steady_clock;

namespace {

template <typename... A>
std::string fmt_s(const char* f, A... a) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a...);
  return buf;
}

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



// CPU time (ns) of every thread of `pid` (/proc/<pid>/task/*/schedstat).
uint64_t task_cpu_ns(pid_t pid) {
  uint64_t sum = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(e.path() / "schedstat");
    uint64_t ns = 0;
    if (in >> ns) sum += ns;
  }
  return sum;
}

uint64_t self_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A request of the load generator: its bytes and the check of its answer
// (status, body); a check that fails ends the run with an error.
struct Job {
  std::string text;
  std::function<bool(int status, std::string_view body)> check;
};

// One client connection of the load generator.
struct LConn {
  int fd = -1;
  std::string out;
  size_t out_off = 0;
  std::string in;
  std::vector<std::pair<int, Clock::time_point>> flight;  // job index, sent at
  int served = 0;
};

// Drives `n` jobs over `conns` connections from one epoll loop. keep_alive:
// each connection carries up to `depth` pipelined requests; otherwise every
// request has its own connection ("Connection: close", read until the
// server closes). Returns false (printing why) on a failed check, a
// connection error or when `limit` passes.
bool run_load(const std::string& socket, int n, int conns, int depth, bool keep_alive,
              const std::function<Job(int)>& make, Stats* out, std::chrono::seconds limit = std::chrono::seconds(120)) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  std::vector<LConn> cs(static_cast<size_t>(conns));
  std::vector<Job> jobs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) jobs[static_cast<size_t>(i)] = make(i);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  int next = 0, done = 0;
  bool ok = true;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, socket.c_str(), socket.size() + 1);
  auto open_conn = [&](LConn& c) {
    c.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c.fd < 0 || (connect(c.fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS)) {
      std::fprintf(stderr, "load: connect: %s\n", strerror(errno));
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.ptr = &c;
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    c.in.clear();
    c.out.clear();
    c.out_off = 0;
    return true;
  };
  auto close_conn = [&](LConn& c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.fd = -1;
  };
  // Queues requests up to the connection's depth and sends what it can.
  auto feed = [&](LConn& c) {
    int room = keep_alive ? depth : (c.served == 0 && c.flight.empty() ? 1 : 0);
    while (static_cast<int>(c.flight.size()) < room && next < n) {
      c.out += jobs[static_cast<size_t>(next)].text;
      c.flight.emplace_back(next, Clock::now());
      ++next;
    }
    while (c.out_off < c.out.size()) {
      ssize_t w = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        std::fprintf(stderr, "load: send: %s\n", strerror(errno));
        return false;
      }
      c.out_off += static_cast<size_t>(w);
    }
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | (c.out.empty() ? 0u : EPOLLOUT);
    ev.data.ptr = &c;
    epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
    return true;
  };
  // Takes every complete response off c.in.
  auto parse = [&](LConn& c, bool eof) {
    for (;;) {
      if (c.flight.empty()) {
        if (!c.in.empty()) {
          std::fprintf(stderr, "load: unexpected bytes from podshimd\n");
          return false;
        }
        return true;
      }
      auto he = c.in.find("\r\n\r\n");
      if (he == std::string::npos) break;
      std::string_view head(c.in.data(), he);
      if (head.substr(0, 9) != "HTTP/1.1 " || head.size() < 12) {
        std::fprintf(stderr, "load: malformed status line\n");
        return false;
      }
      int status = std::atoi(std::string(head.substr(9, 3)).c_str());
      auto cl = head.find("Content-Length: ");
      if (cl == std::string_view::npos) {
        std::fprintf(stderr, "load: response without Content-Length\n");
        return false;
      }
      size_t len = std::strtoull(head.data() + cl + 16, nullptr, 10);
      if (c.in.size() < he + 4 + len) break;
      std::string_view body(c.in.data() + he + 4, len);
      auto [job, sent] = c.flight.front();
      if (!jobs[static_cast<size_t>(job)].check(status, body)) {
        std::fprintf(stderr, "load: request %d answered %d %.*s\n", job, status, static_cast<int>(std::min<size_t>(body.size(), 300)), body.data());
        return false;
      }
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent).count());
      c.flight.erase(c.flight.begin());
      c.in.erase(0, he + 4 + len);
      ++done;
      ++c.served;
    }
    if (eof && !c.flight.empty()) {
      std::fprintf(stderr, "load: podshimd closed a connection with %zu requests unanswered\n", c.flight.size());
      return false;
    }
    return true;
  };
  auto t0 = Clock::now();
  for (auto& c : cs) {
    if (next >= n) break;
    if (!open_conn(c) || !feed(c)) ok = false;
  }
  epoll_event evs[64];
  char buf[65536];
  while (ok && done < n) {
    if (Clock::now() - t0 > limit) {
      std::fprintf(stderr, "load: %d of %d answered within %lld s\n", done, n, static_cast<long long>(limit.count()));
      ok = false;
      break;
    }
    int k = epoll_wait(ep, evs, 64, 1000);
    for (int e = 0; e < k && ok; ++e) {
      auto& c = *static_cast<LConn*>(evs[e].data.ptr);
      if (c.fd < 0) continue;
      bool eof = false;
      if (evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        for (;;) {
          ssize_t r = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (r > 0) {
            c.in.append(buf, static_cast<size_t>(r));
            if (static_cast<size_t>(r) < sizeof(buf)) break;
            continue;
          }
          if (r == 0) eof = true;
          else if (errno != EAGAIN && errno != EINTR) eof = true;
          break;
        }
      }
      if (!parse(c, eof)) {
        ok = false;
        break;
      }
      if (keep_alive) {
        if (eof) {
          std::fprintf(stderr, "load: podshimd closed a kept-alive connection\n");
          ok = false;
          break;
        }
        if (!feed(c)) ok = false;
      } else if (eof || (c.served > 0 && c.flight.empty())) {
        // Connection: close — the server ends it after the reply.
        if (!eof) continue;  // wait for its close
        close_conn(c);
        c.served = 0;
        if (next < n && (!open_conn(c) || !feed(c))) ok = false;
      } else if (!feed(c)) {
        ok = false;
      }
    }
  }
  double total = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& c : cs)
    if (c.fd >= 0) close_conn(c);
  close(ep);
  if (!ok || us.empty()) return false;
  std::sort(us.begin(), us.end());
  *out = {done / total, us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
  return true;
}

std::string request(std::string_view method, const std::string& target, std::string_view body, bool keep_alive) {
  std::string r = std::string(method) + " " + target + " HTTP/1.1\r\nHost: podshim\r\n";
  if (!keep_alive) r += "Connection: close\r\n";
  if (method == "POST") r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  r += "\r\n";
  r += body;
  return r;
}

// One phase's figures, kept for the comparison with the baseline binary.
struct Figure {
  std::string section, what;
  Stats st;
  double server_cpu_us, client_cpu_us;
  int n = 0;  // requests
};

// The whole run against one podshimd binary: prints its figures and
// appends them to `figs`. Returns 0 when every request was answered right.
int run(const std::string& binary, std::vector<Figure>& figs) {
  std::string dir = make_temp_dir();
  std::string cfg = dir + "/config.yaml";
  // PODSHIM_BENCH_CONFIG: more YAML for both binaries (e.g. "readback: {interval_ms: 0}" to see
  // what the periodic read-back and the shrinks' use of its readings cost).
  const char* extra = getenv("PODSHIM_BENCH_CONFIG");
  std::ofstream(cfg) << "log_level: warning\nnode: {allocatable: {cpu: \"100000\", memory: 10Ti}}\n"
                     << (extra ? extra : "") << "\n";
  Daemon d(dir, {"--config", cfg});
  d.set_binary(binary);
  std::string cg_dir;
  struct statfs sfs {};
  if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC) {
    char tmpl[] = "/dev/shm/podshimd-bench-cg-XXXXXX";
    if (mkdtemp(tmpl)) {
      cg_dir = tmpl;
      d.set_cgroot(cg_dir + "/cg");
    }
  }
  auto cleanup = [&] {
    std::filesystem::remove_all(dir);
    if (!cg_dir.empty()) std::filesystem::remove_all(cg_dir);
  };
  if (!d.start()) {
    std::fprintf(stderr, "podshimd did not start\n");
    cleanup();
    return 1;
  }
  constexpr int kContainers = 1000;
  long rss0 = podshim::testutil::proc_status_kib(d.pid(), "VmRSS");
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
      cleanup();
      return 1;
    }
  }
  long rss1 = podshim::testutil::proc_status_kib(d.pid(), "VmRSS");
  std::printf("%s: status socket, %d containers registered, fake cgroup root on %s\n", binary.c_str(), kContainers,
              cg_dir.empty() ? "the temp dir's file system (no tmpfs at /dev/shm)" : "tmpfs");
  podshim::status::ClientOptions ko;
  ko.socket_path = d.socket();
  ko.timeout = std::chrono::seconds(30);
  podshim::status::Connection keep(ko);
  auto kreq = [&](std::string_view m, const std::string& t, std::string_view body = {}) {
    auto r = keep.request(m, t, body);
    return r ? *r : podshim::status::HttpResponse{};
  };
  int applied = 0, in_progress = 0, sent = 0, failed = 0;
  auto resize_body = [](int i) {
    std::string mem = std::to_string(128 + (i % 2) * 64) + "Mi";
    return R"({"resources":{"limits":{"memory":")" + mem + R"(","cpu":")" + std::to_string(200 + i % 7 * 100) +
           R"(m"}}})";
  };
  // A resize answer: 200 with "applied", or "in_progress" for a memory
  // decrease (its shrink settles on the daemon's timers,
  // cgroup.shrink_settle_ms, after the reply) or one queued behind it.
  auto resize_ok = [&](int status, std::string_view body) {
    ++sent;
    if (status == 200 && body.find("\"result\":\"applied\"") != std::string_view::npos) {
      ++applied;
      return true;
    }
    if (status == 200 && body.find("\"result\":\"in_progress\"") != std::string_view::npos) {
      ++in_progress;
      return true;
    }
    if (++failed == 1)
      std::fprintf(stderr, "first resize answered otherwise: %d %.*s\n", status, static_cast<int>(body.size()),
                   body.data());
    return false;
  };
  auto count = [&](const podshim::status::HttpResponse& r) { resize_ok(r.status, r.body); };
  size_t bytes = 0;
  bool all_ok = true;
  // Runs one phase and prints its figures with the CPU time per request of
  // podshimd and of this client.
  std::string section;
  auto begin_section = [&](std::string title) {
    std::printf("-- %s\n", title.c_str());
    section = std::move(title);
  };
  auto mono = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  };
  auto phase = [&](const char* what, int n, auto&& run) {
    double m0 = mono();
    int a0 = applied, p0 = in_progress;
    uint64_t s0 = task_cpu_ns(d.pid()), c0 = self_cpu_ns();
    Stats st{};
    bool ok = run(n, &st);
    uint64_t s1 = task_cpu_ns(d.pid()), c1 = self_cpu_ns();
    // For matching a profile of podshimd (perf record -k CLOCK_MONOTONIC) to the phases.
    if (getenv("PODSHIM_BENCH_PHASE_TIMES")) std::fprintf(stderr, "phase %.6f %.6f %s\n", m0, mono(), what);
    if (!ok) {
      std::printf("%-34s FAILED\n", what);
      all_ok = false;
      return;
    }
    const double srv = static_cast<double>(s1 - s0) / 1000 / n, cli = static_cast<double>(c1 - c0) / 1000 / n;
    std::printf("%-34s %9.0f req/s  median %8.1f us  p99 %8.1f us  cpu/req podshimd %5.1f us client %5.1f us\n", what,
                st.rps, st.median_us, st.p99_us, srv, cli);
    figs.push_back({section, what, st, srv, cli, n});
    if (applied + in_progress > a0 + p0)
      std::printf("%-34s applied %d, in_progress %d\n", "", applied - a0, in_progress - p0);
  };
  auto seq = [&](auto&& f) {
    return [f](int n, Stats* st) mutable {
      *st = measure(n, f);
      return true;
    };
  };
  const std::string sock = d.socket();
  // Several connections at once: what podshimd serves, not one client's round trip.
  constexpr int kConns = 4, kDepth = 4;
  auto load = [&](bool keep_alive, auto&& make) {
    return [&, keep_alive, make](int n, Stats* st) {
      return run_load(sock, n, kConns, keep_alive ? kDepth : 1, keep_alive, make, st);
    };
  };
  auto expect = [](int want, std::string needle) {
    return [want, needle](int status, std::string_view body) {
      return status == want && body.find(needle) != std::string_view::npos;
    };
  };
  auto healthz = [&](bool ka) {
    return [ka, &expect](int) { return Job{request("GET", "/healthz", {}, ka), expect(200, "ok")}; };
  };
  auto one = [&](bool ka) {
    return [ka, &expect](int i) {
      std::string id = "c" + std::to_string(i % kContainers);
      return Job{request("GET", "/v1/containers/" + id, {}, ka), expect(200, "\"id\":\"" + id + "\"")};
    };
  };
  auto list = [&](bool ka) {
    return [ka](int) {
      return Job{request("GET", "/v1/containers", {}, ka), [](int status, std::string_view body) {
                   // The whole list: its frame, and about the size a container's object gives
                   // (~500 bytes each; a scan of the body would cost the client more than the server).
                   return status == 200 && body.size() > kContainers * 400 && body.substr(0, 10) == "{\"items\":[" &&
                          body.substr(body.size() - 3) == "]}\n";
                 }};
    };
  };
  auto resize = [&](bool ka, int shift) {
    return [ka, shift, &resize_body, &resize_ok](int i) {
      return Job{request("POST", "/v1/containers/c" + std::to_string(i % kContainers) + "/resize", resize_body(i + shift), ka),
                 resize_ok};
    };
  };
  begin_section("one connection per request");
  phase("GET /healthz (baseline)", 2000, seq([&](int) { d.req("GET", "/healthz"); }));
  phase("GET /v1/containers (1000 items)", 200, seq([&](int) { bytes = d.req("GET", "/v1/containers").body.size(); }));
  phase("GET /v1/containers/{id}", 2000, seq([&](int i) { d.req("GET", "/v1/containers/c" + std::to_string(i % kContainers)); }));
  begin_section("one kept-alive connection");
  phase("GET /healthz (baseline)", 10000, seq([&](int) { kreq("GET", "/healthz"); }));
  phase("GET /v1/containers (1000 items)", 500, seq([&](int) { bytes = kreq("GET", "/v1/containers").body.size(); }));
  phase("GET /v1/containers/{id}", 10000, seq([&](int i) { kreq("GET", "/v1/containers/c" + std::to_string(i % kContainers)); }));
  begin_section(fmt_s("concurrent: %d connections at once, a new connection per request", kConns));
  phase("GET /healthz (baseline)", 4000, load(false, healthz(false)));
  phase("GET /v1/containers (1000 items)", 200, load(false, list(false)));
  phase("GET /v1/containers/{id}", 4000, load(false, one(false)));
  begin_section(fmt_s("concurrent: %d kept-alive connections, %d requests in flight on each", kConns, kDepth));
  phase("GET /healthz (baseline)", 20000, load(true, healthz(true)));
  phase("GET /v1/containers (1000 items)", 500, load(true, list(true)));
  phase("GET /v1/containers/{id}", 20000, load(true, one(true)));
  begin_section("resizes (after the reads: a resize adds the read-back to each container), one connection per request");
  const double resizes_m0 = mono();
  const uint64_t resizes_s0 = task_cpu_ns(d.pid()), resizes_c0 = self_cpu_ns();
  phase("POST /v1/containers/{id}/resize", 1000, seq([&](int i) {
          count(d.req("POST", "/v1/containers/c" + std::to_string(i % kContainers) + "/resize", resize_body(i)));
        }));
  begin_section("resizes, one kept-alive connection");
  phase("POST /v1/containers/{id}/resize", 2000, seq([&](int i) {
          count(kreq("POST", "/v1/containers/c" + std::to_string(i % kContainers) + "/resize", resize_body(i + 1)));
        }));
  begin_section(fmt_s("resizes, concurrent: %d connections, a new connection per request", kConns));
  phase("POST /v1/containers/{id}/resize", 1000, load(false, resize(false, 0)));
  begin_section(fmt_s("resizes, concurrent: %d kept-alive connections, %d in flight on each", kConns, kDepth));
  phase("POST /v1/containers/{id}/resize", 2000, load(true, resize(true, 1)));
  if (all_ok) {
    // The four resize phases as one: the store compacts its journal every
    // 4 MiB of changes, on its own thread but on the same two cores, and
    // which phase that lands in moves with the size of a record. Summed, each
    // binary's figure holds the same compactions (one per run today).
    Figure all{"resizes, all four phases above as one (the journal's compaction lands in one of them)",
               "POST /v1/containers/{id}/resize", {}, 0, 0, 0};
    double wall = 0, srv = 0, cli = 0;
    for (size_t i = figs.size() - 4; i < figs.size(); ++i) {
      all.n += figs[i].n;
      wall += figs[i].n / figs[i].st.rps;
      srv += figs[i].n * figs[i].server_cpu_us;
      cli += figs[i].n * figs[i].client_cpu_us;
    }
    all.st.rps = all.n / wall;
    all.server_cpu_us = srv / all.n;
    all.client_cpu_us = cli / all.n;
    std::printf("-- %s\n%-34s %9.0f req/s  cpu/req podshimd %5.1f us client %5.1f us\n", all.section.c_str(),
                all.what.c_str(), all.st.rps, all.server_cpu_us, all.client_cpu_us);
    figs.push_back(std::move(all));
    // An answer of in_progress is not the end of a resize's work: memory
    // decreases settle on podshimd's timers after it, and a resize queued
    // behind one runs when that one is done, past the phase that sent it
    // (so a phase's figure moves with how much spills into the next). Until
    // every container's lastResizeOutcome has left in_progress, all of it.
    bool settled = false;
    const double deadline = mono() + 60;
    while (!settled && mono() < deadline) {
      auto r = d.req("GET", "/v1/containers");
      settled = r.status == 200 && r.body.find("\"lastResizeOutcome\":\"in_progress\"") == std::string::npos;
      if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const double wall_all = mono() - resizes_m0;
    const uint64_t s_all = task_cpu_ns(d.pid()), c_all = self_cpu_ns();
    Figure landed{"resizes, all four phases until every one has landed (no lastResizeOutcome in_progress)",
                  "POST /v1/containers/{id}/resize", {}, 0, 0, all.n};
    if (!settled) {
      std::printf("-- %s\n%-34s FAILED: still in progress after 60 s\n", landed.section.c_str(), landed.what.c_str());
      all_ok = false;
    } else {
      landed.st.rps = landed.n / wall_all;
      landed.server_cpu_us = static_cast<double>(s_all - resizes_s0) / 1000 / landed.n;
      landed.client_cpu_us = static_cast<double>(c_all - resizes_c0) / 1000 / landed.n;
      std::printf("-- %s\n%-34s %9.0f req/s  cpu/req podshimd %5.1f us client %5.1f us\n", landed.section.c_str(),
                  landed.what.c_str(), landed.st.rps, landed.server_cpu_us, landed.client_cpu_us);
      figs.push_back(std::move(landed));
    }
  }
  std::printf("  list response size: %zu bytes\n", bytes);
  // in_progress: a memory decrease settling after the reply, or a resize
  // queued behind an earlier one of the same cgroup (the engine runs one
  // resize per cgroup at a time, in arrival order); both finish in
  // lastResizeOutcome.
  std::printf("  resizes answered applied: %d, in_progress (a memory decrease settling after the reply, or queued "
              "behind one): %d, of %d\n",
              applied, in_progress, sent);
  long rss2 = podshim::testutil::proc_status_kib(d.pid(), "VmRSS");
  std::printf("podshimd RSS: %ld KiB idle, %ld KiB with %d containers, %ld KiB after the run\n", rss0, rss1,
              kContainers, rss2);
  d.stop();
  cleanup();
  return all_ok && failed == 0 && applied + in_progress == sent ? 0 : 1;
}

// The ratio measured / baseline of each round's pair (the two binaries run
// back to back, taking turns at going first): its median, lowest and highest.
// A pair shares the machine's state, which drifts over a run (seen: the same
// binary 30% faster in its last rounds than in its first), so ratios within
// pairs are compared, not the best round of each side.
struct Ratio {
  double median, lo, hi;
};
Ratio paired(const std::vector<std::vector<Figure>>& cur, const std::vector<std::vector<Figure>>& base, size_t phase,
             double (*get)(const Figure&)) {
  std::vector<double> r;
  for (size_t i = 0; i < cur.size() && i < base.size(); ++i)
    if (phase < cur[i].size() && phase < base[i].size() && get(base[i][phase]) > 0)
      r.push_back(get(cur[i][phase]) / get(base[i][phase]));
  if (r.empty()) return {0, 0, 0};
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  return {n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2, r.front(), r.back()};
}

}  // namespace

// PODSHIMD is the binary measured. With PODSHIMD_BASELINE (an older
// podshimd, say one built from the previous release) the same run measures
// both, PODSHIM_BENCH_ROUNDS times each (default 10: a round is a few
// seconds), alternating which goes first, and ends with a table of ratios,
// requests/s and podshimd's CPU per request: the median of the rounds' ratios
// and their range (paired()).
int main() {
  const char* cur = getenv("PODSHIMD");
  if (!cur) {
    std::fprintf(stderr, "run through meson test --benchmark\n");
    return 77;
  }
  const char* base = getenv("PODSHIMD_BASELINE");
  const char* rounds_env = getenv("PODSHIM_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : base ? 10 : 1;
  std::vector<std::vector<Figure>> cur_figs, base_figs;
  int rc = 0;
  for (int r = 0; r < rounds; ++r) {
    auto measure_one = [&](const char* bin, std::vector<std::vector<Figure>>& into) {
      std::printf("\n== round %d of %d: %s%s\n", r + 1, rounds, bin, bin == base ? " (baseline)" : "");
      std::fflush(stdout);
      into.emplace_back();
      if (run(bin, into.back()) != 0) rc = 1;
    };
    if (base && r % 2 == 0) measure_one(base, base_figs);
    measure_one(cur, cur_figs);
    if (base && r % 2 == 1) measure_one(base, base_figs);
  }
  if (!base) return rc;
  const auto& c = cur_figs.front();
  const auto& b = base_figs.front();
  std::printf("\n== %s against the baseline %s: the median over %d rounds of each round's ratio measured / baseline, "
              "[lowest-highest]; req/s above 1x and CPU below 1x are better\n",
              cur, base, rounds);
  std::printf("%-34s %22s %22s\n", "", "req/s", "podshimd cpu/req");
  std::string section;
  for (size_t i = 0; i < c.size() && i < b.size(); ++i) {
    if (c[i].what != b[i].what) {
      std::printf("phase %zu differs between the runs (%s / %s)\n", i, c[i].what.c_str(), b[i].what.c_str());
      return 1;
    }
    if (c[i].section != section) std::printf("-- %s\n", (section = c[i].section).c_str());
    const Ratio rps = paired(cur_figs, base_figs, i, [](const Figure& f) { return f.st.rps; });
    const Ratio cpu = paired(cur_figs, base_figs, i, [](const Figure& f) { return f.server_cpu_us; });
    std::printf("%-34s %6.2fx [%4.2f-%4.2f] %6.2fx [%4.2f-%4.2f]\n", c[i].what.c_str(), rps.median, rps.lo, rps.hi,
                cpu.median, cpu.lo, cpu.hi);
  }
  return rc;
}

