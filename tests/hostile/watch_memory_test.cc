// Bounded watchers, bounded memory: twelve GET /v1/watch
// clients that never read, while about 35 MB of container events stream,
// must not take a real podshimd's peak RSS (VmHWM) past 64 MiB; each of them
// is disconnected (http.max_watch_backlog_bytes, http.max_watch_total_bytes),
// a watcher that reads keeps receiving every line, and podshimd goes on
// answering /healthz.
//
// podshimd runs with --nri=off on a fake cgroup tree in a temporary
// directory (never /sys/fs/cgroup), as the hostile table's does. To see the
// bound fail, give other limits: PODSHIM_WATCH_TEST_LIMITS=BACKLOG,TOTAL
// (bytes; "16777216,1073741824" is the old 16 MiB per watcher with no
// ceiling that counts).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shim/status/client.h"
#include "tests/cgroup/fake_tree.h"

namespace podshim {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fsys = std::filesystem;

constexpr int kIds = 4;                      // containers re-registered in turn: the store stays small
constexpr size_t kAnnotationBytes = 60 << 10;  // each ContainerUpserted line is about this long
constexpr size_t kEventBytes = 35'000'000;     // produced in all
constexpr int kSilentWatchers = 12;
constexpr uint64_t kBoundKiB = 64 << 10;       // VmHWM must stay below 64 MiB

// Polls `cond` until it holds or `limit` passes (a bounded wait on a
// condition, not a sleep standing in for synchronisation).
template <typename F>
bool wait_for(F cond, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto deadline = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class Daemon {
 public:
  explicit Daemon(const std::string& http_extra) {
    const char* exe = std::getenv("PODSHIM_PODSHIMD");
    if (!exe) return;
    dir_ = tree_.state() + "/daemon";
    fsys::create_directories(dir_ + "/state");
    sock_ = dir_ + "/s.sock";
    tree_.add("kubepods");
    tree_.add("kubepods/burstable");
    tree_.add("kubepods/burstable/podp1");
    for (int i = 0; i < kIds; ++i) tree_.add("kubepods/burstable/podp1/c" + std::to_string(i));
    tree_.add("kubepods/burstable/podp1/final");
    const std::string cfg = dir_ + "/config.yaml";
    std::ofstream(cfg) << "socket:\n  path: " << sock_ << "\n"
                       << "state_dir: " << dir_ << "/state\n"
                       << "cgroup:\n  root: " << tree_.cg_root() << "\n  driver: cgroupfs\n"
                       << "http:\n  timeout_seconds: 10\n" << http_extra
                       << "access:\n  - methods: [\"*\"]\n    uids: [" << ::getuid() << "]\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0 && !std::getenv("PODSHIM_WATCH_TEST_DAEMON_LOG")) ::dup2(devnull, 2);
      ::execl(exe, exe, "--nri=off", "--config", cfg.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    wait_for([&] { return healthy() || !alive(); });
  }
  ~Daemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool available() const { return pid_ > 0; }
  bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return sock_; }

  status::ClientOptions client() const {
    status::ClientOptions o;
    o.socket_path = sock_;
    o.timeout = std::chrono::seconds(20);
    return o;
  }
  bool healthy() const {
    auto r = status::http_request(client(), "GET", "/healthz", "");
    return r && r->status == 200 && r->body == "ok\n";
  }
  // A /proc/<pid>/status field in kB.
  uint64_t status_kib(const std::string& field) const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10);
    }
    return 0;
  }

 private:
  cgroup::testing::FakeTree tree_;
  std::string dir_, sock_;
  pid_t pid_ = -1;
};

// A watch that reads its head and the Bookmark line (so podshimd has it as a
// watcher), then never reads again; a small receive buffer.
struct SilentWatch {
  int fd = -1;
  ~SilentWatch() {
    if (fd >= 0) ::close(fd);
  }
  bool open(const std::string& sock) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, sock.c_str(), sizeof(a.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
    const std::string r = "GET /v1/watch HTTP/1.1\r\nHost: podshim\r\n\r\n";
    if (::send(fd, r.data(), r.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(r.size())) return false;
    std::string in;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      auto e = in.find("\r\n\r\n");
      if (e != std::string::npos && in.find("Bookmark", e) != std::string::npos) return in.rfind("HTTP/1.1 200", 0) == 0;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{fd, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
      char buf[512];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, static_cast<size_t>(n));
    }
  }
  // podshimd has closed it (seen without reading what is queued).
  bool closed_by_server() const {
    pollfd p{fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
  }
};

TEST(WatchMemory, SilentWatchersAreDroppedAndPeakMemoryStaysBounded) {
  std::string http_extra;
  if (const char* l = std::getenv("PODSHIM_WATCH_TEST_LIMITS")) {
    std::string s = l;
    auto comma = s.find(',');
    ASSERT_NE(comma, std::string::npos) << "PODSHIM_WATCH_TEST_LIMITS=BACKLOG,TOTAL";
    http_extra = "  max_watch_backlog_bytes: " + s.substr(0, comma) + "\n  max_watch_total_bytes: " +
                 s.substr(comma + 1) + "\n";
  }
  Daemon d(http_extra);
  if (!d.available()) GTEST_SKIP() << "PODSHIM_PODSHIMD not set (run through meson test)";
  ASSERT_TRUE(d.healthy()) << "podshimd did not come up";
  const uint64_t start_kib = d.status_kib("VmHWM");

  // The watcher that reads: every line, seq without gaps, until the
  // container "final". Each registration's event carries its "gen"
  // annotation; podshimd's read-back may add ContainerUpserted events of its
  // own (actual values), so the reader records which gens it saw.
  const int events = static_cast<int>(kEventBytes / kAnnotationBytes);
  std::vector<char> seen(static_cast<size_t>(events) + 1, 0);
  std::atomic<int> upserts{0};  // gens seen, each once
  std::atomic<bool> bookmark{false}, gap{false}, reader_done{false};
  std::string reader_error;
  std::thread reader([&] {
    uint64_t seq = 0;
    auto r = status::http_stream_lines(d.client(), "/v1/watch", [&](std::string_view l) {
      json j = json::parse(l, nullptr, false);
      if (!j.is_object()) {
        gap = true;
        return false;
      }
      uint64_t s = j.value("seq", uint64_t{0});
      if (bookmark && s != seq + 1) gap = true;
      bookmark = true;
      seq = s;
      if (j.value("type", "") != "ContainerUpserted") return true;
      const auto& c = j["container"];
      if (c.contains("annotations") && c["annotations"].contains("gen")) {
        size_t g = std::strtoul(c["annotations"]["gen"].get<std::string>().c_str(), nullptr, 10);
        if (g < seen.size() && !seen[g]) {
          seen[g] = 1;
          ++upserts;
        }
      }
      return c.value("id", "") != "final";
    });
    if (!r) reader_error = r.error().message;
    reader_done = true;
  });
  // Ends the reader however the test goes: it returns when podshimd closes.
  struct Joiner {
    std::thread& t;
    Daemon& d;
    std::atomic<bool>& done;
    ~Joiner() {
      if (!done && d.pid() > 0) ::kill(d.pid(), SIGTERM);
      if (t.joinable()) t.join();
    }
  } joiner{reader, d, reader_done};
  ASSERT_TRUE(wait_for([&] { return bookmark.load() || reader_done.load(); }));
  ASSERT_TRUE(bookmark) << reader_error;

  std::vector<std::unique_ptr<SilentWatch>> silent;
  for (int i = 0; i < kSilentWatchers; ++i) {
    silent.push_back(std::make_unique<SilentWatch>());
    ASSERT_TRUE(silent.back()->open(d.socket())) << "watch " << i;
  }
  auto dropped = [&] {
    int n = 0;
    for (auto& w : silent) n += w->closed_by_server();
    return n;
  };

  // ~35 MB of ContainerUpserted lines: the same few containers registered
  // again and again, each time with a new 60 KiB annotation.
  int produced = 0, produced_when_all_dropped = -1;
  auto post = [&](const std::string& id, int gen) {
    json body = {{"id", id},
                 {"podUid", "p1"},
                 {"cgroupPath", "/kubepods/burstable/podp1/" + id},
                 {"annotations",
                  {{"gen", std::to_string(gen)},
                   {"blob", std::string(kAnnotationBytes, static_cast<char>('a' + gen % 26))}}}};
    auto r = status::http_request(d.client(), "POST", "/v1/containers", body.dump());
    return r && (r->status == 200 || r->status == 201);
  };
  const auto t0 = Clock::now();
  for (int i = 0; i < events; ++i) {
    ASSERT_TRUE(post("c" + std::to_string(i % kIds), i)) << "registration " << i;
    ++produced;
    // The reader keeps pace (it is not the one that falls behind).
    ASSERT_TRUE(wait_for([&] { return upserts.load() >= produced || reader_done.load(); }))
        << "the reading watcher stalled at " << upserts << " of " << produced;
    ASSERT_FALSE(reader_done) << "the reading watcher was cut off after " << upserts << " events: " << reader_error;
    if (produced_when_all_dropped < 0 && dropped() == kSilentWatchers) produced_when_all_dropped = produced;
  }
  ASSERT_TRUE(post("final", events));
  ++produced;
  ASSERT_TRUE(wait_for([&] { return reader_done.load(); })) << "the reader did not see the last event";
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();

  const uint64_t hwm_kib = d.status_kib("VmHWM");
  std::printf("[ watch-mem ] %d events of ~%zu KiB (%.1f MB) in %.1f s to %d silent watchers + 1 reader; "
              "VmHWM %.1f MiB (at start %.1f MiB); all silent watchers dropped after %d events\n",
              produced, kAnnotationBytes >> 10, produced * static_cast<double>(kAnnotationBytes) / 1e6, secs,
              kSilentWatchers, hwm_kib / 1024.0, start_kib / 1024.0, produced_when_all_dropped);
  RecordProperty("VmHWM_KiB", std::to_string(hwm_kib));

  EXPECT_LT(hwm_kib, kBoundKiB) << "podshimd's peak RSS passed 64 MiB";
  EXPECT_TRUE(wait_for([&] { return dropped() == kSilentWatchers; }, std::chrono::seconds(5)))
      << dropped() << " of " << kSilentWatchers << " silent watchers were disconnected";
  // The reader went on receiving after the others were dropped, and lost nothing.
  EXPECT_GT(produced_when_all_dropped, 0);
  EXPECT_LT(produced_when_all_dropped, produced);
  EXPECT_FALSE(gap) << "the reading watcher lost or reordered a line";
  EXPECT_EQ(upserts.load(), produced) << reader_error;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), produced) << "the reader missed a registration";
  EXPECT_TRUE(d.alive());
  EXPECT_TRUE(d.healthy());
  // podshim_watch_dropped_total counts them.
  auto m = status::http_request(d.client(), "GET", "/metrics", "");
  ASSERT_TRUE(m && m->status == 200);
  double counted = 0;
  for (size_t p = m->body.find("\npodshim_watch_dropped_total{"); p != std::string::npos;
       p = m->body.find("\npodshim_watch_dropped_total{", p + 1)) {
    auto sp = m->body.find(' ', p + 1);
    counted += std::strtod(m->body.c_str() + sp + 1, nullptr);
  }
  auto family = m->body.find("# HELP podshim_watch_dropped_total");
  EXPECT_EQ(counted, kSilentWatchers) << (family == std::string::npos ? "no podshim_watch_dropped_total in /metrics"
                                                                       : m->body.substr(family, 600));
}

}  // namespace
}  // namespace podshim
