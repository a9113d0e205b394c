// Every configuration key changes what podshimd does: each test starts a
// real podshimd (hooks-only, on a fake cgroup tree in a temp dir, never
// /sys/fs/cgroup) with a --config file that sets the key to a value other
// than its default (plus, in a few, another key the observation needs), and
// observes what that value changes, mostly against a second podshimd whose
// file leaves the key at its default. Config.EveryKeyChangesBehaviourInATest
// (tests/shim/core/config_test.cc) names the test of each key.
//
// The status socket, the state directory and the cgroup root are always
// under the test's temp dir: by flag, or, in the tests of socket.path,
// state_dir and cgroup.root, by the key itself.
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "shim/status/client.h"
#include "tests/cgroup/fake_systemd.h"
#include "tests/shim/daemon/daemon_harness.h"
#include "tests/testutil/files.h"
#include "tests/testutil/peer.h"

namespace podshim::testing {
namespace {

using testutil::read_file;
using testutil::request_as_nobody;

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
constexpr uint64_t kMi = 1 << 20;

// Polls `pred` every 20 ms until it holds or `limit` passes.
bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds limit = 5000ms) {
  const auto end = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// Overwrites a fake attribute in place, without truncating it first, so a
// concurrent reader sees the old or the new value, never an empty file. The
// values a test writes into one file all have the same length.
void overwrite(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::pwrite(fd, value.data(), value.size(), 0);
  ::close(fd);
}

std::string padded(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%012llu", static_cast<unsigned long long>(v));
  return b;
}

// memory.current and memory.stat (all anon) at `bytes`, fixed width.
void set_usage(const std::string& cg, uint64_t bytes) {
  overwrite(cg + "/memory.stat", "anon " + padded(bytes) + "\nfile " + padded(0) + "\nkernel " + padded(0) +
                                     "\nshmem " + padded(0) + "\nslab_reclaimable " + padded(0) + "\n");
  overwrite(cg + "/memory.current", padded(bytes) + "\n");
}

// A fake cgroup as the runtime leaves it for a container registered with a
// 256Mi memory limit: cpu.weight 100 (the kernel's default), no cpu limit.
void seed_cgroup(const std::string& root, const std::string& rel) {
  fake_cgroup(root, rel);
  std::ofstream(root + rel + "/memory.max") << 256 * kMi << "\n";
  std::ofstream(root + rel + "/cpu.weight") << "100\n";
  std::ofstream(root + rel + "/cpu.max") << "max 100000\n";
}

// podshimd (the daemon harness) with a config file, and the requests these
// tests make of it.
class Podshimd : public Daemon {
 public:
  Podshimd(std::string dir, std::string yaml) : Daemon(std::move(dir)) { set_config(std::move(yaml)); }

  // A raw connection to the status socket (-1 on failure).
  int connect_raw() const {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", socket().c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Registers container `id` of pod p1 at /kubepods/podp1/<id> (its fake
  // cgroup made first) with a 256Mi memory limit.
  int add(const std::string& id, const std::string& resources =
                                     R"({"requests":{"cpu":"250m","memory":"64Mi"},"limits":{"memory":"256Mi"}})") {
    seed_cgroup(cgroot(), "/kubepods/podp1/" + id);
    return req("POST", "/v1/containers",
               R"({"id":")" + id + R"(","podUid":"p1","cgroupPath":"/kubepods/podp1/)" + id +
                   R"(","resources":)" + resources + "}")
        .status;
  }
  std::string cg(const std::string& id) const { return cgroot() + "/kubepods/podp1/" + id; }

  json container(const std::string& id) const {
    auto r = req("GET", "/v1/containers/" + id);
    return r.status == 200 ? json::parse(r.body) : json();
  }
  // POSTs a resize of `id`; returns the answer's "result".
  std::string resize(const std::string& id, const std::string& resources) const {
    auto r = req("POST", "/v1/containers/" + id + "/resize", R"({"resources":)" + resources + "}");
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() ? j.value("result", "HTTP " + std::to_string(r.status) + " " + r.body) : r.body;
  }
  // The final outcome of the last resize of `id` (waits while in progress)
  // and its error message.
  std::pair<std::string, std::string> outcome(const std::string& id, std::chrono::milliseconds limit = 8000ms) const {
    json c;
    wait_for([&] {
      c = container(id);
      return c.is_object() && c.value("lastResizeOutcome", "") != "in_progress";
    }, limit);
    return {c.is_object() ? c.value("lastResizeOutcome", "") : "", c.is_object() ? c.value("lastError", "") : ""};
  }
  // The duration podshimd logged for its last outcome line about `id`.
  std::optional<long> logged_ms(const std::string& id) const {
    const std::string text = log();
    std::regex re("resize [a-z_]+: container " + id + " [^\n]*reclaimed [0-9]+ bytes, ([0-9]+) ms");
    std::optional<long> ms;
    for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) ms = std::stol((*it)[1]);
    return ms;
  }

  std::string metrics() const { return req("GET", "/metrics").body; }
};

class ConfigEffect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!getenv("PODSHIMD")) GTEST_SKIP() << "run through meson test";
    dir = make_temp_dir();
  }
  void TearDown() override {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  // A podshimd under <dir>/<name>.
  std::unique_ptr<Podshimd> daemon(const std::string& name, const std::string& yaml) {
    return std::make_unique<Podshimd>(dir + "/" + name, yaml);
  }
  std::string dir;
};

// ---- log_level, socket.*, access ------------------------------------------------------

TEST_F(ConfigEffect, LogLevelDropsLinesBelowIt) {
  // log_level: warning keeps the warning of a refused resize and drops the
  // info lines (ready, an applied resize) that the default level writes.
  for (const char* level : {"", "warning"}) {
    auto d = daemon(level[0] ? level : "default",
                    std::string(level[0] ? "log_level: warning\n" : "") + "node: {allocatable: {cpu: \"2\", memory: 1Gi}}\n");
    ASSERT_TRUE(d->start()) << d->log();
    ASSERT_EQ(d->add("c1"), 201);
    EXPECT_EQ(d->resize("c1", R"({"requests":{"cpu":"3"}})"), "infeasible");
    EXPECT_EQ(d->resize("c1", R"({"requests":{"cpu":"500m"}})"), "applied");
    d->stop();
    const std::string log = d->log();
    EXPECT_NE(log.find("resize infeasible: container c1"), std::string::npos) << level << "\n" << log;
    const bool info = std::string_view(level).empty();
    EXPECT_EQ(log.find("resize applied: container c1") != std::string::npos, info) << level << "\n" << log;
    EXPECT_EQ(log.find("podshimd ready") != std::string::npos, info) << level << "\n" << log;
  }
}

TEST_F(ConfigEffect, SocketPathIsWhereTheSocketIs) {
  // No --socket: socket.path alone puts the socket there.
  auto d = daemon("d", "socket:\n  path: " + dir + "/d/from-config.sock\n");
  d->flag_socket = false;
  d->set_socket(dir + "/d/from-config.sock");
  ASSERT_TRUE(d->start()) << d->log();
  struct stat st{};
  ASSERT_EQ(::stat((dir + "/d/from-config.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(d->req("GET", "/v1/containers").status, 200);
}

TEST_F(ConfigEffect, SocketModeSetsItsPermissions) {
  auto def = daemon("default", "");
  ASSERT_TRUE(def->start()) << def->log();
  auto d = daemon("d", "socket:\n  mode: \"0600\"\n");
  ASSERT_TRUE(d->start()) << d->log();
  struct stat st{};
  ASSERT_EQ(::stat(def->socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  ASSERT_EQ(::stat(d->socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// The group of gid 65534 ("nogroup" on Debian, "nobody" elsewhere), or "".
std::string group_65534() {
  const group* g = getgrgid(65534);
  return g ? g->gr_name : "";
}

TEST_F(ConfigEffect, SocketGroupOwnsTheSocket) {
  const std::string g = group_65534();
  if (g.empty()) GTEST_SKIP() << "no group with gid 65534";
  auto def = daemon("default", "");
  ASSERT_TRUE(def->start()) << def->log();
  auto d = daemon("d", "socket:\n  group: " + g + "\n");
  ASSERT_TRUE(d->start()) << d->log();
  struct stat st{};
  ASSERT_EQ(::stat(def->socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getgid());
  ASSERT_EQ(::stat(d->socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 65534u);
}

TEST_F(ConfigEffect, AdminGroupMayWrite) {
  // The default rules let @admin (socket.admin_group) POST; a member of the
  // socket group only reads.
  if (geteuid() != 0) GTEST_SKIP() << "needs root to fork a peer that drops to uid 65534";
  const std::string g = group_65534();
  if (g.empty()) GTEST_SKIP() << "no group with gid 65534";
  ::chmod(dir.c_str(), 0755);  // the peer must reach the socket
  const std::string body = R"({"resources":{"limits":{"cpu":"500m"}}})";
  auto def = daemon("default", "socket:\n  group: " + g + "\n");
  auto d = daemon("d", "socket:\n  group: " + g + "\n  admin_group: " + g + "\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ::chmod((dir + "/" + (p == d.get() ? "d" : "default")).c_str(), 0755);
    ASSERT_EQ(p->add("c1"), 201);
    EXPECT_EQ(request_as_nobody(p->socket(), "GET", "/v1/containers/c1", ""), 200);
  }
  EXPECT_EQ(request_as_nobody(def->socket(), "POST", "/v1/containers/c1/resize", body), 403);
  EXPECT_EQ(request_as_nobody(d->socket(), "POST", "/v1/containers/c1/resize", body), 200);
  EXPECT_EQ(d->container("c1")["allocated"].value("cpuLimitMilli", 0), 500);
}

TEST_F(ConfigEffect, AccessRulesReplaceTheDefaults) {
  // Root may only ask for /healthz: every other request is refused.
  auto d = daemon("d", "access:\n  - {path: /healthz, methods: [GET], uids: [0]}\n");
  ASSERT_TRUE(d->start()) << d->log();
  EXPECT_EQ(d->req("GET", "/healthz").status, 200);
  EXPECT_EQ(d->req("GET", "/v1/containers").status, 403);
  EXPECT_NE(d->log().find("status socket: denied GET /v1/containers to uid 0"), std::string::npos) << d->log();
}

// ---- http.* -------------------------------------------------------------------------------

// Sends `head` on a fresh connection and waits up to `limit` for the answer.
std::string half_request(const Podshimd& d, const std::string& head, std::chrono::milliseconds limit) {
  int fd = d.connect_raw();
  if (fd < 0) return "no connection";
  (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::string got;
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return got;
}

TEST_F(ConfigEffect, HttpTimeoutCutsASlowClient) {
  // A head that never ends is answered 408 after timeout_seconds (1 s here,
  // 10 s by default: the 5 s wait would see nothing).
  auto d = daemon("d", "http:\n  timeout_seconds: 1\n");
  ASSERT_TRUE(d->start()) << d->log();
  const auto t0 = Clock::now();
  const std::string got = half_request(*d, "GET /healthz HTTP/1.1\r\nHost: p\r\n", 5000ms);
  EXPECT_NE(got.find("408"), std::string::npos) << got;
  EXPECT_NE(got.find("within 1000 ms"), std::string::npos) << got;
  EXPECT_LT(Clock::now() - t0, 5000ms);
}

TEST_F(ConfigEffect, MaxBodyBytesRefusesALargerBody) {
  const std::string body = R"({"id":"c9","podUid":"p1","cgroupPath":"/kubepods/podp1/c9","annotations":{"a":")" +
                           std::string(3000, 'x') + "\"}}";
  auto def = daemon("default", "");
  auto d = daemon("d", "http:\n  max_body_bytes: 2048\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    fake_cgroup(p->cgroot(), "/kubepods/podp1/c9");
  }
  EXPECT_EQ(def->req("POST", "/v1/containers", body).status, 201);
  auto r = d->req("POST", "/v1/containers", body);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("2048"), std::string::npos) << r.body;
}

TEST_F(ConfigEffect, MaxConnectionsRefusesTheNextOne) {
  // Two idle connections fill max_connections: 2; a third is answered 503.
  auto d = daemon("d", "http:\n  max_connections: 2\n");
  ASSERT_TRUE(d->start()) << d->log();
  int a = d->connect_raw(), b = d->connect_raw();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  // The refusal is written at accept, before any request: read it without
  // sending one (a request written after podshimd closed would fail first).
  const std::string got = half_request(*d, "", 5000ms);
  EXPECT_NE(got.find("503"), std::string::npos) << got;
  EXPECT_NE(got.find("too many connections (2)"), std::string::npos) << got;
  ::close(a);
  ::close(b);
  EXPECT_TRUE(wait_for([&] { return d->req("GET", "/healthz").status == 200; }));
}

// Opens a GET /v1/watch, reads up to its first line (the bookmark: the
// stream is open) and no further.
int silent_watch(const Podshimd& d) {
  int fd = d.connect_raw();
  if (fd < 0) return -1;
  const std::string head = "GET /v1/watch HTTP/1.1\r\nHost: p\r\n\r\n";
  (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::string got;
  const auto end = Clock::now() + 5s;
  while (got.find("Bookmark") == std::string::npos && Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char c;
    if (::recv(fd, &c, 1, 0) <= 0) break;  // a byte at a time: nothing past the bookmark line
    got += c;
  }
  if (got.find("Bookmark") == std::string::npos) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Registers `n` containers, each event carrying a 60 KiB annotation.
void stream_events(Podshimd& d, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string id = "w" + std::to_string(i);
    fake_cgroup(d.cgroot(), "/kubepods/podp1/" + id);
    auto r = d.req("POST", "/v1/containers",
                   R"({"id":")" + id + R"(","podUid":"p1","cgroupPath":"/kubepods/podp1/)" + id +
                       R"(","annotations":{"blob":")" + std::string(60 << 10, 'b') + "\"}}");
    ASSERT_EQ(r.status, 201) << r.body;
  }
}

// podshim_watch_dropped_total{reason="..."}, or -1.
double dropped(const Podshimd& d, const std::string& reason) {
  const std::string m = d.metrics();
  const std::string key = "podshim_watch_dropped_total{reason=\"" + reason + "\"} ";
  auto at = m.find(key);
  return at == std::string::npos ? -1 : std::stod(m.substr(at + key.size()));
}

TEST_F(ConfigEffect, WatchBacklogDropsASilentWatcher) {
  // About 600 KB of events to one watcher that reads nothing: the socket
  // takes about 200 KB (a unix stream socket's send buffer,
  // net.core.wmem_default: 208 KiB), the rest queues in podshimd. Over
  // max_watch_backlog_bytes (64 KiB here) the watcher is dropped; under the
  // default (1 MiB) it is not.
  auto def = daemon("default", "");
  auto d = daemon("d", "http:\n  max_watch_backlog_bytes: 65536\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    int w = silent_watch(*p);
    ASSERT_GE(w, 0);
    stream_events(*p, 10);
    EXPECT_TRUE(p->req("GET", "/healthz").status == 200);
    if (p == d.get()) {
      EXPECT_TRUE(wait_for([&] { return dropped(*p, "backlog") == 1; })) << p->metrics();
    } else {
      EXPECT_EQ(dropped(*p, "backlog"), 0) << p->metrics();
    }
    ::close(w);
  }
}

TEST_F(ConfigEffect, WatchTotalDropsTheFurthestBehind) {
  // Two silent watchers, each under its own limit (256 KiB): together they
  // pass max_watch_total_bytes (256 KiB here, 8 MiB by default) first, and
  // one is dropped for the total.
  auto def = daemon("default", "http:\n  max_watch_backlog_bytes: 262144\n");
  auto d = daemon("d", "http:\n  max_watch_backlog_bytes: 262144\n  max_watch_total_bytes: 262144\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    int w1 = silent_watch(*p), w2 = silent_watch(*p);
    ASSERT_GE(w1, 0);
    ASSERT_GE(w2, 0);
    stream_events(*p, 10);
    if (p == d.get()) {
      EXPECT_TRUE(wait_for([&] { return dropped(*p, "total") >= 1; })) << p->metrics();
    } else {
      EXPECT_TRUE(wait_for([&] { return dropped(*p, "backlog") >= 1; })) << p->metrics();
      EXPECT_EQ(dropped(*p, "total"), 0) << p->metrics();
    }
    ::close(w1);
    ::close(w2);
  }
}

// ---- state_dir, cgroup.*, node.allocatable.* ------------------------------------------

TEST_F(ConfigEffect, StateDirHoldsTheRegistrations) {
  // No --state-dir: state_dir alone says where hooks-only registrations are
  // kept, and a restart finds them there.
  const std::string state = dir + "/d/state-from-config";
  auto d = daemon("d", "state_dir: " + state + "\n");
  d->flag_state = false;
  d->set_state(state);
  ASSERT_TRUE(d->start()) << d->log();
  ASSERT_EQ(d->add("c1"), 201);
  d->stop();
  ASSERT_TRUE(std::filesystem::is_directory(state)) << state << " was not made";
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(state)) files += e.is_regular_file();
  EXPECT_GT(files, 0u) << "nothing stored under " << state;
  ASSERT_TRUE(d->start()) << d->log();
  EXPECT_EQ(d->req("GET", "/v1/containers/c1").status, 200);
}

TEST_F(ConfigEffect, CgroupRootIsWhereCgroupsAreFoundAndWritten) {
  // No --cgroup-root: cgroup.root alone is the tree registrations are
  // checked against and resizes write.
  const std::string root = dir + "/d/cg-from-config";
  auto d = daemon("d", "cgroup:\n  root: " + root + "\n");
  d->flag_cgroot = false;
  d->set_cgroot(root);
  ASSERT_TRUE(d->start()) << d->log();
  ASSERT_EQ(d->add("c1"), 201);
  EXPECT_EQ(d->resize("c1", R"({"limits":{"cpu":"500m"}})"), "applied");
  EXPECT_EQ(read_file(root + "/kubepods/podp1/c1/cpu.max"), "50000 100000");
}

TEST_F(ConfigEffect, CgroupDriverSystemdRefusesACgroupfsPath) {
  // auto takes "/kubepods/..." as a cgroupfs path; driver: systemd reads
  // every path as a systemd "slice:prefix:name" and refuses it.
  auto def = daemon("default", "");
  auto d = daemon("d", "cgroup:\n  driver: systemd\n");
  ASSERT_TRUE(def->start()) << def->log();
  ASSERT_TRUE(d->start()) << d->log();
  EXPECT_EQ(def->add("c1"), 201);
  EXPECT_EQ(d->add("c1"), 400);
  auto r = d->req("POST", "/v1/containers", R"({"id":"c1","cgroupPath":"/kubepods/podp1/c1"})");
  EXPECT_NE(r.body.find("cgroup path '/kubepods/podp1/c1' contains a disallowed character"), std::string::npos)
      << r.body;
}

TEST_F(ConfigEffect, WeightFormulaWritesItsCpuWeight) {
  // 500m is 512 shares: cpu.weight 20 in runc's linear formula (runc 1.1),
  // 59 in the quadratic one the default falls back to (runc >= 1.3.2;
  // opencontainers/runc#4772).
  auto def = daemon("default", "");
  auto d = daemon("d", "cgroup:\n  weight_formula: linear\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
    EXPECT_EQ(p->resize("c1", R"({"requests":{"cpu":"500m"}})"), "applied");
  }
  EXPECT_EQ(read_file(def->cg("c1") + "/cpu.weight"), "59");
  EXPECT_EQ(read_file(d->cg("c1") + "/cpu.weight"), "20");
}

TEST_F(ConfigEffect, ShrinkTimeoutIsTheReclaimBudget) {
  // Usage (200 MiB, 190 of it page cache) never falls in the fake, so reclaim
  // runs until its deadline: shrink_timeout_ms less the watch before and
  // the settle after the write (200 ms each), 1500 ms here, 600 ms by default.
  auto d = daemon("d", "cgroup:\n  shrink_timeout_ms: 1900\n");
  ASSERT_TRUE(d->start()) << d->log();
  ASSERT_EQ(d->add("c1"), 201);
  std::ofstream(d->cg("c1") + "/memory.current") << 200 * kMi << "\n";
  std::ofstream(d->cg("c1") + "/memory.stat") << "anon " << 10 * kMi << "\nfile " << 190 * kMi
                                             << "\nshmem 0\nslab_reclaimable 0\n";
  EXPECT_EQ(d->resize("c1", R"({"limits":{"memory":"100Mi"}})"), "in_progress");
  auto [outcome, error] = d->outcome("c1");
  EXPECT_EQ(outcome, "error") << error;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(error, m, std::regex("after reclaiming for ([0-9]+) ms"))) << error;
  EXPECT_GE(std::stol(m[1]), 1500) << error;
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.max"), std::to_string(256 * kMi) + "\n");
}

TEST_F(ConfigEffect, ShrinkHeadroomDecidesWhetherATightShrinkIsRefused) {
  // 60 MiB of anon, shrunk to 64 MiB: 4 MiB of room. The default headroom
  // (8Mi) refuses that; shrink_headroom: 2Mi lets it through.
  auto def = daemon("default", "");
  auto d = daemon("d", "cgroup:\n  shrink_headroom: 2Mi\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
    set_usage(p->cg("c1"), 60 * kMi);
    p->resize("c1", R"({"limits":{"memory":"64Mi"}})");
  }
  auto [def_outcome, def_error] = def->outcome("c1");
  EXPECT_EQ(def_outcome, "error");
  EXPECT_NE(def_error.find("below current usage"), std::string::npos) << def_error;
  auto [outcome, error] = d->outcome("c1");
  EXPECT_EQ(outcome, "applied") << error;
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.max"), std::to_string(64 * kMi));
}

TEST_F(ConfigEffect, ShrinkSettleZeroAnswersAtOnce) {
  // A shrink watches under the clamp and settles after the write for
  // shrink_settle_ms each (200 ms by default), on the loop's timers, so the
  // answer is in_progress; with 0 nothing is waited for and the answer is
  // the outcome.
  auto def = daemon("default", "");
  auto d = daemon("d", "cgroup:\n  shrink_settle_ms: 0\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
  }
  EXPECT_EQ(def->resize("c1", R"({"limits":{"memory":"128Mi"}})"), "in_progress");
  EXPECT_EQ(d->resize("c1", R"({"limits":{"memory":"128Mi"}})"), "applied");
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.max"), std::to_string(128 * kMi));
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.high"), "max");
  EXPECT_EQ(def->outcome("c1").first, "applied");
}

// A workload: calls `step` with the seconds since it started, at once and
// then every 5 ms until destroyed (it rewrites the fake cgroup's files).
class Workload {
 public:
  Workload(std::function<void(double seconds)> step) : step_(std::move(step)) {
    step_(0);
    th_ = std::thread([this] {
      const auto t0 = Clock::now();
      while (!stop_) {
        step_(std::chrono::duration<double>(Clock::now() - t0).count());
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~Workload() {
    stop_ = true;
    th_.join();
  }

 private:
  std::function<void(double)> step_;
  std::atomic<bool> stop_{false};
  std::thread th_;
};

TEST_F(ConfigEffect, ShrinkGrowthWindowIsHowFarAheadGrowthCounts) {
  // Anon grows 5 MiB/s from 40 MiB; the shrink is to 100 MiB. Over the
  // default window (5 s) that is 65 MiB plus headroom: it fits. Over
  // shrink_growth_window_ms: 60000 it does not, and the shrink is refused
  // with the rate.
  auto def = daemon("default", "");
  auto d = daemon("d", "cgroup:\n  shrink_growth_window_ms: 60000\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
    const std::string cg = p->cg("c1");
    Workload w([cg](double s) { set_usage(cg, static_cast<uint64_t>((40 + 5 * s) * kMi)); });
    p->resize("c1", R"({"limits":{"memory":"100Mi"}})");
    auto [outcome, error] = p->outcome("c1");
    if (p == def.get()) {
      EXPECT_EQ(outcome, "applied") << error;
    } else {
      EXPECT_EQ(outcome, "error") << error;
      EXPECT_NE(error.find("usage grows"), std::string::npos) << error;
      EXPECT_NE(error.find("would reach the limit within 60000 ms"), std::string::npos) << error;
      EXPECT_EQ(read_file(cg + "/memory.max"), std::to_string(256 * kMi) + "\n");
    }
  }
}

TEST_F(ConfigEffect, ShrinkPressureThresholdIsTheStallThatRefuses) {
  // Tasks stall 10% of the time (memory.pressure "some" total), with avg10
  // at 10: under the default threshold (20) the shrink is applied, over
  // shrink_pressure_threshold: 5 it is refused with the figure.
  auto def = daemon("default", "");
  auto d = daemon("d", "cgroup:\n  shrink_pressure_threshold: 5\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
    const std::string cg = p->cg("c1");
    set_usage(cg, 40 * kMi);
    Workload w([cg](double s) {
      overwrite(cg + "/memory.pressure",
                "some avg10=10.00 avg60=0.00 avg300=0.00 total=" + padded(10'000'000 + static_cast<uint64_t>(s * 1e5)) +
                    "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=" + padded(0) + "\n");
    });
    p->resize("c1", R"({"limits":{"memory":"128Mi"}})");
    auto [outcome, error] = p->outcome("c1");
    if (p == def.get()) {
      EXPECT_EQ(outcome, "applied") << error;
    } else {
      EXPECT_EQ(outcome, "error") << error;
      EXPECT_NE(error.find("memory pressure some"), std::string::npos) << error;
      EXPECT_NE(error.find("threshold 5.0%"), std::string::npos) << error;
    }
  }
}

TEST_F(ConfigEffect, SystemdCallTimeoutBoundsTheWaitForSystemd) {
  // A container in a systemd scope (the systemd driver, from the path form):
  // its resize asks systemd (SetUnitProperties), which never answers. The
  // resize fails after systemd_call_timeout_ms (150 here, 1000 by default).
  auto d = daemon("d", "cgroup:\n  systemd_call_timeout_ms: 150\n");
  cgroup::testing::FakeSystemd systemd(dir + "/system_bus_socket", std::nullopt);  // never answers
  ASSERT_TRUE(systemd.ok());
  // sd_bus_open_system() connects where DBUS_SYSTEM_BUS_ADDRESS says (sd_bus_default(3)).
  d->env.push_back("DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + dir + "/system_bus_socket");
  ASSERT_TRUE(d->start()) << d->log();
  const std::string path = "kubepods-burstable-podp1.slice:cri-containerd:c1";
  seed_cgroup(d->cgroot(), "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podp1.slice/cri-containerd-c1.scope");
  auto r = d->req("POST", "/v1/containers", R"({"id":"c1","podUid":"p1","cgroupPath":")" + path +
                                                R"(","resources":{"requests":{"cpu":"250m","memory":"64Mi"},"limits":{"memory":"256Mi"}}})");
  ASSERT_EQ(r.status, 201) << r.body;
  d->resize("c1", R"({"limits":{"cpu":"500m"}})");
  auto [outcome, error] = d->outcome("c1");
  EXPECT_EQ(outcome, "error") << error;
  EXPECT_NE(error.find("no reply from systemd within 150 ms"), std::string::npos) << error;
  ASSERT_EQ(systemd.calls().size(), 1u);
  EXPECT_EQ(systemd.calls()[0].unit, "cri-containerd-c1.scope");
}

TEST_F(ConfigEffect, TestPauseAfterClampHoldsTheClamp) {
  // debug.test_pause_after_clamp_ms holds a shrink with memory.high at the
  // target (journaled) for that long before it goes on.
  auto d = daemon("d", "debug:\n  test_pause_after_clamp_ms: 1500\n");
  ASSERT_TRUE(d->start()) << d->log();
  ASSERT_EQ(d->add("c1"), 201);
  const auto t0 = Clock::now();
  EXPECT_EQ(d->resize("c1", R"({"limits":{"memory":"128Mi"}})"), "in_progress");
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.high"), std::to_string(128 * kMi));
  EXPECT_EQ(d->outcome("c1").first, "applied");
  EXPECT_GE(Clock::now() - t0, 1500ms);
  ASSERT_TRUE(d->logged_ms("c1"));
  EXPECT_GE(*d->logged_ms("c1"), 1500) << d->log();
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.max"), std::to_string(128 * kMi));
}

TEST_F(ConfigEffect, TestPauseAfterStepHoldsAMultiStepResize) {
  // Raising a container's memory limit raises its pod's first (the kubelet's
  // order), then the container's: two steps. debug.test_pause_after_step_ms
  // holds the resize between them; by default both land in one answer.
  auto def = daemon("default", "");
  auto d = daemon("d", "debug:\n  test_pause_after_step_ms: 1500\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    seed_cgroup(p->cgroot(), "/kubepods/podp1");
    seed_cgroup(p->cgroot(), "/kubepods/podp1/c1");
    auto r = p->req("POST", "/v1/containers",
                    R"({"id":"c1","podUid":"p1","podName":"p","podNamespace":"default",)"
                    R"("podCgroupPath":"/kubepods/podp1","cgroupPath":"/kubepods/podp1/c1",)"
                    R"("resources":{"requests":{"cpu":"250m","memory":"64Mi"},"limits":{"memory":"256Mi"}}})");
    ASSERT_EQ(r.status, 201) << r.body;
  }
  EXPECT_EQ(def->resize("c1", R"({"limits":{"memory":"512Mi"}})"), "applied");
  const auto t0 = Clock::now();
  EXPECT_EQ(d->resize("c1", R"({"limits":{"memory":"512Mi"}})"), "in_progress");
  EXPECT_EQ(read_file(d->cgroot() + "/kubepods/podp1/memory.max"), std::to_string(512 * kMi));
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.max"), std::to_string(256 * kMi) + "\n");
  EXPECT_EQ(d->outcome("c1").first, "applied");
  EXPECT_GE(Clock::now() - t0, 1500ms);
  EXPECT_EQ(read_file(d->cg("c1") + "/memory.max"), std::to_string(512 * kMi));
}

TEST_F(ConfigEffect, NodeAllocatableIsWhatAdmissionCounts) {
  // Far more than this machine has: refused on the defaults (online CPUs,
  // MemTotal), admitted with node.allocatable cpu: "200" and memory: 100Ti.
  auto def = daemon("default", "");
  auto d = daemon("d", "node:\n  allocatable:\n    cpu: \"200\"\n    memory: 100Ti\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1", R"({"requests":{"cpu":"250m","memory":"64Mi"}})"), 201);
  }
  for (const char* r : {R"({"requests":{"cpu":"150"}})", R"({"requests":{"memory":"50Ti"}})"}) {
    EXPECT_EQ(def->resize("c1", r), "infeasible") << r;
    EXPECT_EQ(d->resize("c1", r), "applied") << r;
  }
}

// ---- nri.enabled, metrics.*, readback.* ---------------------------------------------------

TEST_F(ConfigEffect, NriEnabledFalseIsHooksOnlyMode) {
  // No --nri flag: nri.enabled: false alone makes podshimd hooks-only, where
  // registrations are kept across a restart (NRI mode keeps none: the
  // runtime resends them). The NRI socket named is never there.
  auto d = daemon("d", "nri:\n  enabled: false\n  socket: " + dir + "/no-runtime.sock\n");
  d->flag_nri_off = false;
  ASSERT_TRUE(d->start()) << d->log();
  ASSERT_EQ(d->add("c1"), 201);
  d->stop();
  EXPECT_NE(d->log().find("hooks-only mode"), std::string::npos) << d->log();
  ASSERT_TRUE(d->start()) << d->log();
  EXPECT_EQ(d->req("GET", "/v1/containers/c1").status, 200);
}

TEST_F(ConfigEffect, MetricsListenServesMetricsOverTcp) {
  auto d = daemon("d", "metrics:\n  listen: 127.0.0.1:0\n");
  ASSERT_TRUE(d->start()) << d->log();
  std::smatch m;
  const std::string log = d->log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("Serving /metrics on 127\\.0\\.0\\.1:([0-9]+)"))) << log;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(m[1])));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n";
  (void)::send(fd, get.data(), get.size(), MSG_NOSIGNAL);
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got.substr(0, 200);
  EXPECT_NE(got.find("podshim_containers"), std::string::npos);
}

TEST_F(ConfigEffect, MetricsMaxContainersBoundsThePerContainerFamilies) {
  auto def = daemon("default", "");
  auto d = daemon("d", "metrics:\n  max_containers: 1\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    for (const char* id : {"c1", "c2", "c3"}) ASSERT_EQ(p->add(id), 201);
  }
  EXPECT_NE(def->metrics().find("\npodshim_container_metrics_dropped 0\n"), std::string::npos);
  EXPECT_NE(d->metrics().find("\npodshim_container_metrics_dropped 2\n"), std::string::npos) << d->metrics();
}

// The memory limit the read-back last saw for `id`, or -1.
int64_t actual_memory_limit(const Podshimd& d, const std::string& id) {
  json c = d.container(id);
  if (!c.is_object() || !c["actual"].is_object()) return -1;
  return c["actual"].value("memoryLimitBytes", int64_t{-1});
}

TEST_F(ConfigEffect, ReadbackIntervalIsThePeriodOfThePass) {
  // A hand edit of memory.max shows in the container's actual values at the
  // next pass: within 2 s with readback.interval_ms: 100, not with the
  // default 5000.
  auto def = daemon("default", "");
  auto d = daemon("d", "readback:\n  interval_ms: 100\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
    ASSERT_TRUE(wait_for([&] { return actual_memory_limit(*p, "c1") == int64_t(256 * kMi); }));
    std::ofstream(p->cg("c1") + "/memory.max") << 300 * kMi << "\n";
  }
  EXPECT_TRUE(wait_for([&] { return actual_memory_limit(*d, "c1") == int64_t(300 * kMi); }, 2000ms));
  EXPECT_EQ(actual_memory_limit(*def, "c1"), int64_t(256 * kMi));
}

// How many of `pid`'s open fds are regular files under `root`.
int files_open_under(pid_t pid, const std::string& root) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (ec || target.string().rfind(root + "/", 0) != 0) continue;
    if (std::filesystem::is_regular_file(target, ec)) ++n;
  }
  return n;
}

TEST_F(ConfigEffect, ReadbackFdCacheKeepsAttributeFilesOpen) {
  // By default the read-back keeps each container's attribute files open
  // between passes; readback.fd_cache: 0 keeps none.
  auto def = daemon("default", "");
  auto d = daemon("d", "readback:\n  fd_cache: 0\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
    ASSERT_TRUE(wait_for([&] { return actual_memory_limit(*p, "c1") == int64_t(256 * kMi); }));
  }
  EXPECT_TRUE(wait_for([&] { return files_open_under(def->pid(), def->cgroot()) >= 5; }))
      << files_open_under(def->pid(), def->cgroot());
  EXPECT_EQ(files_open_under(d->pid(), d->cgroot()), 0);
}

TEST_F(ConfigEffect, ReadbackRepairDriftRewritesAHandEdit) {
  // memory.max edited by hand away from the allocated 256Mi: a drift. With
  // readback.repair_drift: true podshimd writes the allocated value again
  // (once the allocation is 2 s old); by default it only reports the drift.
  auto def = daemon("default", "readback:\n  interval_ms: 100\n");
  auto d = daemon("d", "readback:\n  interval_ms: 100\n  repair_drift: true\n");
  for (auto* p : {def.get(), d.get()}) {
    ASSERT_TRUE(p->start()) << p->log();
    ASSERT_EQ(p->add("c1"), 201);
    std::ofstream(p->cg("c1") + "/memory.max") << "max\n";
  }
  EXPECT_TRUE(wait_for([&] { return read_file(d->cg("c1") + "/memory.max") == std::to_string(256 * kMi); }, 6000ms))
      << read_file(d->cg("c1") + "/memory.max");
  EXPECT_TRUE(wait_for([&] { return !def->container("c1")["drift"].empty(); }, 6000ms));
  EXPECT_EQ(read_file(def->cg("c1") + "/memory.max"), "max\n");
}

}  // namespace
}  // namespace podshim::testing
