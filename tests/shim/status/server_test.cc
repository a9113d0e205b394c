// The status socket over a real unix socket: the server runs in-process on its
// own sd-event loop in a thread; requests go through the client library.
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <future>
#include <grp.h>
#include <thread>

#include "base/fs.h"
#include "base/log.h"
#include "shim/core/json_writer.h"
#include "shim/core/metrics.h"
#include "shim/core/resize.h"
#include "shim/status/api.h"
#include "shim/status/client.h"
#include "shim/status/http.h"
#include "shim/status/server.h"
#include "tests/shim/status/loop_thread.h"
#include "tests/testutil/peer.h"

namespace podshim::status {
namespace {

using testutil::request_as_nobody;

using nlohmann::json;

class FakeActuator : public core::Actuator {
 public:
  void apply(const core::Actuation&, Done done) override {
    if (!fail_with.empty()) return done(Unexpected(Error{EBUSY, fail_with, ErrorKind::ShrinkRefused, {}}));
    done(cgroup::ResizeReport{});
  }
  std::string fail_with;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/podshim-status-XXXXXX";
    dir = mkdtemp(tmpl);
    chmod(dir.c_str(), 0755);  // the unprivileged peer must reach the socket
    sock = dir + "/s.sock";
    store = core::Store::in_memory();
    resize = std::make_unique<core::ResizeManager>(*store, act, core::NodeAllocatable{4000, 8LL << 30}, &metrics);
  }
  void TearDown() override {
    stop();
    std::filesystem::remove_all(dir);
  }

  void start(ServerOptions o) {
    o.socket_path = sock;
    std::string err = loop.start([this, o = std::move(o)](sd_event* l, const auto& started) mutable {
      ServerDeps deps;
      deps.store = store.get();
      deps.resize = resize.get();
      deps.metrics = &metrics;
      deps.cgroup_root = cgroup_root;
      auto srv = Server::start(l, std::move(o), deps);
      server = srv ? srv->get() : nullptr;
      started(srv ? "" : srv.error().message);
      if (srv) {
        sd_event_loop(l);
        srv->reset();
      }
    });
    ASSERT_EQ(err, "");
  }
  void stop() { loop.stop(); }
  ServerOptions opts() {
    ServerOptions o;
    auto p = AccessPolicy::create(core::default_access_rules(), "", "");
    EXPECT_TRUE(p);
    o.policy = *p;
    o.timeout = std::chrono::seconds(1);
    o.max_body_bytes = 64 << 10;
    return o;
  }
  // Starts the server with opts() but these watch limits; returns the options.
  ServerOptions start_with_watch_limits(size_t backlog_bytes, size_t total_bytes) {
    auto o = opts();
    o.max_watch_backlog_bytes = backlog_bytes;
    o.max_watch_total_bytes = total_bytes;
    start(o);
    return o;
  }
  HttpResponse req(std::string_view method, std::string_view target, std::string_view body = {}) {
    ClientOptions o;
    o.socket_path = sock;
    o.timeout = std::chrono::seconds(20);
    auto r = http_request(o, method, target, body);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : HttpResponse{};
  }
  // A fresh connection to the status socket (-1, and a failure, if none).
  int connect_raw() {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, sock.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
    ADD_FAILURE() << "connecting to " << sock << ": " << strerror(errno);
    close(fd);
    return -1;
  }
  // Raw bytes on a fresh connection; returns everything read until close.
  std::string raw(std::string_view bytes, bool read_reply = true) {
    int fd = connect_raw();
    timeval tv{30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string out;
    if (read_reply) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return out;
  }
  void healthy() {
    auto h = req("GET", "/healthz");
    EXPECT_EQ(h.status, 200);
    EXPECT_EQ(h.body, "ok\n");
  }
  void register_c(const std::string& id, const std::string& pod = "pod1") {
    auto r = req("POST", "/v1/containers",
                 json{{"id", id}, {"podUid", pod}, {"cgroupPath", "/kubepods/" + pod + "/" + id},
                      {"resources", {{"requests", {{"cpu", "250m"}, {"memory", "64Mi"}}},
                                     {"limits", {{"memory", "128Mi"}}}}}}.dump());
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r.body;
  }

  std::string dir, sock;
  std::string cgroup_root;  // set before start(): registered cgroup paths are then checked under it
  std::unique_ptr<core::Store> store;
  core::Metrics metrics;
  FakeActuator act;
  std::unique_ptr<core::ResizeManager> resize;
  Server* server = nullptr;  // while running; its watch counters are thread-safe
  testing::LoopThread loop;
};

TEST_F(ServerTest, SocketModeAndEndpoints) {
  start(opts());
  struct stat st {};
  ASSERT_EQ(stat(sock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  healthy();
  EXPECT_EQ(req("GET", "/readyz").status, 200);
  register_c("c1");
  // Registration is idempotent.
  auto again = req("POST", "/v1/containers", R"({"id":"c1","pid":42})");
  EXPECT_EQ(again.status, 200) << again.body;
  auto c = req("GET", "/v1/containers/c1");
  ASSERT_EQ(c.status, 200);
  json j = json::parse(c.body);
  EXPECT_EQ(j["allocated"]["cpuRequestMilli"], 250);
  EXPECT_EQ(j["pid"], 42);
  EXPECT_EQ(j["podUid"], "pod1");
  auto list = json::parse(req("GET", "/v1/containers").body);
  EXPECT_EQ(list["items"].size(), 1u);
  auto pods = json::parse(req("GET", "/v1/pods").body);
  ASSERT_EQ(pods["items"].size(), 1u);
  EXPECT_EQ(pods["items"][0]["qosClass"], "Burstable");
  EXPECT_EQ(req("GET", "/v1/pods/pod1").status, 200);
  EXPECT_EQ(req("GET", "/v1/containers/nope").status, 404);
  EXPECT_EQ(req("GET", "/v1/pods/nope").status, 404);
  EXPECT_EQ(req("GET", "/v1/containers/..").status, 400);
  EXPECT_EQ(req("GET", "/v2/x").status, 404);
  EXPECT_EQ(req("PUT", "/v1/containers/c1").status, 405);

  auto rz = req("POST", "/v1/containers/c1/resize", R"({"resources":{"limits":{"memory":"256Mi","cpu":"1"}}})");
  ASSERT_EQ(rz.status, 200) << rz.body;
  json rj = json::parse(rz.body);
  EXPECT_EQ(rj["result"], "applied");
  EXPECT_EQ(rj["container"]["allocated"]["memoryLimitBytes"], 256 << 20);
  EXPECT_EQ(rj["container"]["generation"], 1);
  // What the engine saw comes back with the result.
  ASSERT_TRUE(rj.contains("report")) << rz.body;
  EXPECT_TRUE(rj["report"].contains("bytesReclaimed")) << rz.body;
  EXPECT_TRUE(rj["report"]["pressure"].contains("someAvg10")) << rz.body;
  EXPECT_TRUE(rj["report"].contains("memoryEvents")) << rz.body;

  act.fail_with = "memory limit (1048576) below current usage (9999999)";
  rz = req("POST", "/v1/containers/c1/resize", R"({"resources":{"requests":{"memory":"1Mi"},"limits":{"memory":"1Mi"}}})");
  rj = json::parse(rz.body);
  EXPECT_EQ(rj["result"], "error");
  EXPECT_EQ(rj["container"]["conditions"][0]["type"], "PodResizeInProgress");
  EXPECT_EQ(rj["container"]["conditions"][0]["reason"], "Error");
  EXPECT_EQ(rj["container"]["conditions"][0]["message"], act.fail_with);
  EXPECT_EQ(rj["container"]["conditions"][0]["observedGeneration"], 2);

  rz = req("POST", "/v1/containers/c1/resize", R"({"resources":{"requests":{"cpu":"100"},"limits":{"cpu":"100"}}})");
  EXPECT_EQ(json::parse(rz.body)["result"], "infeasible");

  auto m = req("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.content_type.find("text/plain"), std::string::npos);
  EXPECT_NE(m.body.find("podshim_resize_requests_total{result=\"applied\"} 1"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("podshim_memory_shrinks_refused_total 1"), std::string::npos);
  EXPECT_NE(m.body.find("podshim_containers 1"), std::string::npos);

  auto del = req("DELETE", "/v1/containers/c1");
  EXPECT_EQ(del.status, 200);
  EXPECT_EQ(json::parse(del.body)["removed"], true);
  del = req("DELETE", "/v1/containers/c1");  // idempotent
  EXPECT_EQ(del.status, 200);
  EXPECT_EQ(json::parse(del.body)["removed"], false);
  EXPECT_EQ(json::parse(req("GET", "/v1/pods").body)["items"].size(), 0u);  // hook pod went with it
  stop();
  EXPECT_NE(access(sock.c_str(), F_OK), 0) << "socket removed on shutdown";
}

// A registered cgroup path must be a directory beneath the cgroup root reached
// without symlinks, whether the kernel has openat2 or not (before 5.6, or a
// seccomp filter refusing it: the O_NOFOLLOW walk). Once this check called
// openat2 alone and refused every registration there with ENOSYS.
TEST_F(ServerTest, RegisteredCgroupPathIsCheckedWithAndWithoutOpenat2) {
  cgroup_root = dir + "/cg";
  namespace fsys = std::filesystem;
  fsys::create_directories(cgroup_root + "/kubepods/pod1/real");
  fsys::create_directories(dir + "/outside");
  fsys::create_directory_symlink(dir + "/outside", cgroup_root + "/kubepods/pod1/link");
  fsys::create_directory_symlink(cgroup_root + "/kubepods/pod1", cgroup_root + "/kubepods/via");
  fsys::create_directories(cgroup_root + "/kubepods/via-target");
  std::ofstream(cgroup_root + "/kubepods/pod1/file").flush();
  start(opts());
  auto reg = [&](const std::string& id, const std::string& path) {
    return req("POST", "/v1/containers", json{{"id", id}, {"podUid", "pod1"}, {"cgroupPath", path}}.dump());
  };
  for (bool walk : {false, true}) {
    SCOPED_TRACE(walk ? "O_NOFOLLOW walk (no openat2)" : "openat2");
    fs::set_force_walk_for_testing(walk);
    const std::string n = walk ? "w" : "o";
    auto ok = reg("real" + n, "/kubepods/pod1/real");
    EXPECT_EQ(ok.status, 201) << ok.body;
    struct Refused {
      const char* id;
      const char* path;
      const char* why;
    };
    for (const Refused& r : {Refused{"link", "/kubepods/pod1/link", "symlink"},
                             Refused{"via", "/kubepods/via/real", "symlink"},
                             Refused{"nope", "/kubepods/pod1/nope", "does not exist"},
                             Refused{"file", "/kubepods/pod1/file", "not a directory"}}) {
      auto got = reg(r.id + n, r.path);
      EXPECT_EQ(got.status, 400) << r.path;
      EXPECT_NE(got.body.find(r.why), std::string::npos) << got.body;
    }
  }
  fs::set_force_walk_for_testing(false);
  EXPECT_TRUE(store->container("realo"));
  EXPECT_TRUE(store->container("realw"));
  EXPECT_FALSE(store->container("linkw"));
  EXPECT_FALSE(store->container("viaw"));
}

// The same on a kernel whose openat2 answers ENOSYS, made real with a seccomp
// filter in a child process (the filter cannot be removed again).
TEST_F(ServerTest, RegistrationWorksWhereOpenat2IsMissing) {
  const std::string root = dir + "/cg";
  namespace fsys = std::filesystem;
  fsys::create_directories(root + "/kubepods/pod1/real");
  fsys::create_directories(dir + "/outside");
  fsys::create_directory_symlink(dir + "/outside", root + "/kubepods/pod1/link");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(out[0]);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) != 0 || seccomp_load(ctx) != 0)
      _exit(3);
    ServerDeps deps;
    deps.store = store.get();
    deps.resize = resize.get();
    deps.cgroup_root = root;
    Api api(deps);
    std::string answers;
    for (const char* c : {"real", "link", "nope"}) {
      auto r = api.handle("POST", "/v1/containers",
                          json{{"id", c}, {"podUid", "pod1"}, {"cgroupPath", std::string("/kubepods/pod1/") + c}}.dump());
      answers += std::to_string(r.status) + " " + std::string(r.text());
    }
    (void)!write(out[1], answers.data(), answers.size());
    _exit(0);
  }
  close(out[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  std::istringstream lines(got);
  std::string real, link, nope;
  std::getline(lines, real);
  std::getline(lines, link);
  std::getline(lines, nope);
  EXPECT_EQ(real.substr(0, 4), "201 ") << real;
  EXPECT_EQ(link.substr(0, 4), "400 ") << link;
  EXPECT_NE(link.find("symlink"), std::string::npos) << link;
  EXPECT_EQ(nope.substr(0, 4), "400 ") << nope;
  EXPECT_NE(nope.find("does not exist"), std::string::npos) << nope;
}

TEST_F(ServerTest, AnnotationsPastKubernetesLimitAreRefused) {
  ServerOptions o = opts();
  o.max_body_bytes = 1 << 20;
  start(o);
  // Annotations past Kubernetes' 256 KiB: refused, nothing kept.
  const std::string pad(200 << 10, 'a');
  auto fat = req("POST", "/v1/containers", R"({"id":"fat","annotations":{"a":")" + pad + R"(","b":")" + pad + "\"}}");
  EXPECT_EQ(fat.status, 400) << fat.body.substr(0, 200);
  EXPECT_NE(fat.body.find("field 'annotations' holds 409602 bytes; Kubernetes allows at most 262144"),
            std::string::npos)
      << fat.body.substr(0, 200);
  EXPECT_FALSE(store->container("fat"));
  auto lean = req("POST", "/v1/containers", R"({"id":"lean","annotations":{"a":")" + pad + "\"}}");
  EXPECT_EQ(lean.status, 201) << lean.body.substr(0, 200);
}

TEST_F(ServerTest, MalformedRequestsAreRefusedAndServerStaysUp) {
  start(opts());
  struct Case { const char* body; const char* want; };
  for (auto& c : {Case{"{not json", "not valid JSON"}, Case{"[]", "must be a JSON object"},
                  Case{R"({"id":"x","colour":"red"})", "unknown field 'colour'"},
                  Case{R"({"id":"../../etc"})", "container id"}, Case{R"({"id":5})", "must be a string"},
                  Case{"", "empty"}}) {
    auto r = req("POST", "/v1/containers", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_NE(r.body.find(c.want), std::string::npos) << c.body << " -> " << r.body;
  }
  // A registration carrying a value the kernel cannot take records nothing.
  auto big = req("POST", "/v1/containers", R"({"id":"big","resources":{"limits":{"memory":"100"}}})");
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_NE(big.body.find("below one page"), std::string::npos) << big.body;
  EXPECT_FALSE(store->container("big"));
  register_c("c1");
  // Re-registering a known container with a body whose resources are wrong
  // is refused as a first registration is (the answer does not depend on
  // whether the container was known), and changes nothing.
  const auto before = store->container("c1");
  for (auto& c : {Case{R"({"id":"c1","resources":{",imits":{"cpu":"1"}}})", "unknown field 'resources.,imits'"},
                  Case{R"({"id":"c1","resources":{"limits":{"memory":"100"}}})", "below one page"}}) {
    auto r = req("POST", "/v1/containers", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_NE(r.body.find(c.want), std::string::npos) << c.body << " -> " << r.body;
  }
  EXPECT_TRUE(store->container("c1") == before);
  for (auto& c : {Case{R"({"resources":{"limits":{"gpu":"1"}}})", "unknown field 'resources.limits.gpu'"},
                  Case{R"({"resources":{"limits":{"memory":"lots"}}})", "lots"},
                  Case{R"({"resizePolicy":[{"resourceName":"cpu","restartPolicy":"Sometimes"}]})", "Sometimes"},
                  Case{R"({"resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}})", "less than or equal"},
                  Case{R"({"resources":{"limits":{"cpu":"10000000000000"}}})", "(max_cfs_runtime"}}) {
    auto r = req("POST", "/v1/containers/c1/resize", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_NE(r.body.find(c.want), std::string::npos) << c.body << " -> " << r.body;
  }
  // A declared body over the cap: 413 before any of it is read.
  std::string head = "POST /v1/containers HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n";
  std::string reply = raw(head);
  EXPECT_NE(reply.find(" 413 "), std::string::npos) << reply;
  // A chunked body that grows past the cap.
  std::string chunked = "POST /v1/containers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string chunk(16384, 'a');
  for (int i = 0; i < 8; ++i) chunked += fmt::format("{:x}\r\n{}\r\n", chunk.size(), chunk);
  chunked += "0\r\n\r\n";
  reply = raw(chunked);
  EXPECT_NE(reply.find(" 413 "), std::string::npos) << "[" << reply.substr(0, 200) << "]";
  // Garbage instead of HTTP.
  reply = raw(std::string("\x16\x03\x01\x00\xff garbage\r\n\r\n", 20));
  EXPECT_EQ(reply.find(" 200 "), std::string::npos);
  // A vanishing client: half a request, then gone.
  raw("GET /v1/contai", false);
  // A slow client: half a request, then silence; the server (timeout 1 s)
  // closes the connection — recv returns 0 rather than blocking forever.
  reply = raw("GET /v1/containers HTTP/1.1\r\nHost:");
  EXPECT_EQ(reply.find(" 200 "), std::string::npos);
  healthy();
}

TEST_F(ServerTest, WatchDeliversEveryEventInOrder) {
  start(opts());
  ClientOptions co;
  co.socket_path = sock;
  std::vector<json> lines;
  std::promise<void> got_bookmark;
  constexpr int kN = 40;
  std::thread watcher([&] {
    bool first = true;
    auto r = http_stream_lines(co, "/v1/watch", [&](std::string_view l) {
      lines.push_back(json::parse(l));
      if (first) {
        first = false;
        got_bookmark.set_value();
      }
      return lines.size() < 1 + 2 * kN;
    });
    EXPECT_TRUE(r) << r.error().message;
  });
  got_bookmark.get_future().wait();
  for (int i = 0; i < kN; ++i) {
    register_c(fmt::format("w{}", i), fmt::format("p{}", i));
    ASSERT_EQ(req("DELETE", fmt::format("/v1/containers/w{}", i)).status, 200);
  }
  watcher.join();
  ASSERT_EQ(lines.size(), 1u + 2 * kN);
  EXPECT_EQ(lines[0]["type"], "Bookmark");
  uint64_t seq = lines[0]["seq"];
  int added = 0, removed = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["seq"].get<uint64_t>(), seq + 1) << "gap or reorder at line " << i;
    seq = lines[i]["seq"];
    std::string t = lines[i]["type"];
    if (t == "ContainerUpserted") ++added;
    if (t == "ContainerRemoved") ++removed;
  }
  EXPECT_GT(added, 0);
  EXPECT_GT(removed, 0);
  healthy();
}

// ---- /v1/watch memory bounds and HTTP/1.0 ------------------------------------------

// A raw /v1/watch connection. The head and the first line (the Bookmark) are
// read, so the server has it as a watcher; after that, nothing is read.
struct RawWatch {
  int fd = -1;
  std::string head, body;  // what was read: the head, and the body bytes after it
  bool eof = false;        // the server closed it while we read
  ~RawWatch() { close_fd(); }
  void close_fd() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  bool open(const std::string& sock, bool http10) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, sock.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return false;
    std::string r = http10 ? "GET /v1/watch HTTP/1.0\r\n\r\n" : "GET /v1/watch HTTP/1.1\r\nHost: x\r\n\r\n";
    if (send(fd, r.data(), r.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(r.size())) return false;
    return read_until([&] { return body.find('\n') != std::string::npos; });
  }
  // Reads until `done()` or 10 s pass.
  template <typename F>
  bool read_until(F done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::string in = head + body;
    while (!done()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        eof = n == 0;
        return false;
      }
      in.append(buf, static_cast<size_t>(n));
      auto e = in.find("\r\n\r\n");
      if (e == std::string::npos) continue;
      head = in.substr(0, e + 4);
      body = in.substr(e + 4);
    }
    return true;
  }
  // The server has closed the connection (seen without reading what is queued).
  bool closed_by_server() const {
    pollfd p{fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
  }
};

// A watcher that reads everything: counts ContainerUpserted lines and checks
// that the seq numbers have no gap; ends at the container "final".
struct ReadingWatch {
  std::atomic<int> upserts{0};
  std::atomic<bool> bookmark{false}, gap{false}, finished{false};
  std::thread t;
  void start(const std::string& sock) {
    t = std::thread([this, sock] {
      ClientOptions co;
      co.socket_path = sock;
      uint64_t seq = 0;
      auto r = http_stream_lines(co, "/v1/watch", [&](std::string_view l) {
        json j = json::parse(l);
        uint64_t s = j["seq"];
        if (!bookmark) {
          bookmark = true;
        } else if (s != seq + 1) {
          gap = true;
        }
        seq = s;
        if (j["type"] == "ContainerUpserted") {
          ++upserts;
          if (j["container"]["id"] == "final") return false;
        }
        return true;
      });
      EXPECT_TRUE(r) << r.error().message;
      finished = true;
    });
    wait_for([&] { return bookmark.load(); });
  }
  void join() {
    if (t.joinable()) t.join();
  }
  ~ReadingWatch() { join(); }
  template <typename F>
  static bool wait_for(F cond, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!cond()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling a condition, bounded
    }
    return true;
  }
};

// A registration whose ContainerUpserted line is about `bytes` long (a new
// annotation value each time, so the store always has a change to tell).
std::string big_registration(const std::string& id, int gen, size_t bytes) {
  return json{{"id", id},
              {"podUid", "pod1"},
              {"cgroupPath", "/kubepods/pod1/" + id},
              {"annotations", {{"gen", std::to_string(gen)}, {"blob", std::string(bytes, static_cast<char>('a' + gen % 26))}}}}
      .dump();
}

// Two watchers that never read and one that does, the ceiling across watchers
// (384 KiB) far below one watcher's own limit: the watcher furthest behind
// goes first, the reader never loses a line, the running total never passes
// the ceiling and comes back to zero.
TEST_F(ServerTest, WatchCeilingDropsTheWatcherFurthestBehindFirst) {
  const ServerOptions o = start_with_watch_limits(1 << 20, 384 << 10);
  ReadingWatch reader;
  reader.start(sock);
  RawWatch a, b;
  ASSERT_TRUE(a.open(sock, false));
  int produced = 0;
  size_t peak = 0;
  auto produce = [&](const std::string& id) {
    auto r = req("POST", "/v1/containers", big_registration(id, produced, 16 << 10));
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.body;
    ++produced;
    // In step with the reader, so its own backlog never counts.
    ASSERT_TRUE(ReadingWatch::wait_for([&] { return reader.upserts >= produced; })) << "reader stalled at " << produced;
    peak = std::max(peak, server->watch_backlog_bytes());
  };
  // A falls 128 KiB behind (past what its socket's buffer takes) before B comes.
  while (server->watch_backlog_bytes() < (128u << 10) && produced < 2000) produce("c" + std::to_string(produced % 3));
  ASSERT_GE(server->watch_backlog_bytes(), 128u << 10);
  ASSERT_TRUE(b.open(sock, false));
  while (!a.closed_by_server() && produced < 4000) produce("c" + std::to_string(produced % 3));
  ASSERT_TRUE(a.closed_by_server()) << "after " << produced << " events";
  EXPECT_FALSE(b.closed_by_server()) << "B was less far behind than A and must keep streaming";
  EXPECT_EQ(metrics.watch_dropped.value({{"reason", "total"}}), 1);
  while (!b.closed_by_server() && produced < 8000) produce("c" + std::to_string(produced % 3));
  ASSERT_TRUE(b.closed_by_server());
  EXPECT_EQ(metrics.watch_dropped.value({{"reason", "total"}}), 2);
  EXPECT_EQ(metrics.watch_dropped.value({{"reason", "backlog"}}), 0);
  for (int i = 0; i < 5; ++i) produce("c" + std::to_string(i));
  produce("final");
  reader.join();
  EXPECT_FALSE(reader.gap) << "the reader lost or reordered a line";
  EXPECT_EQ(reader.upserts, produced);
  EXPECT_LE(peak, o.max_watch_total_bytes);
  // Every watcher gone: the running total is back to zero.
  a.close_fd();
  b.close_fd();
  ASSERT_TRUE(ReadingWatch::wait_for([&] { return server->watch_backlog_bytes() == 0; }))
      << server->watch_backlog_bytes() << " bytes still counted";
  healthy();
}

// A watcher over its own limit is dropped; the reader goes on.
TEST_F(ServerTest, WatcherOverItsOwnLimitIsDropped) {
  const ServerOptions o = start_with_watch_limits(64 << 10, 8 << 20);
  ReadingWatch reader;
  reader.start(sock);
  RawWatch a;
  ASSERT_TRUE(a.open(sock, false));
  int produced = 0;
  while (!a.closed_by_server() && produced < 4000) {
    auto r = req("POST", "/v1/containers", big_registration("c1", produced, 8 << 10));
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.body;
    ++produced;
    ASSERT_TRUE(ReadingWatch::wait_for([&] { return reader.upserts >= produced; }));
    EXPECT_LE(server->watch_backlog_bytes(), 2 * o.max_watch_backlog_bytes);
  }
  ASSERT_TRUE(a.closed_by_server());
  EXPECT_EQ(metrics.watch_dropped.value({{"reason", "backlog"}}), 1);
  auto r = req("POST", "/v1/containers", big_registration("final", produced++, 100));
  ASSERT_TRUE(r.status == 200 || r.status == 201) << r.body;
  reader.join();
  EXPECT_FALSE(reader.gap);
  EXPECT_EQ(reader.upserts, produced);
}

// HTTP/1.0 has no chunked coding: the stream is NDJSON lines, unframed,
// ended by the close. HTTP/1.1 stays chunked.
TEST_F(ServerTest, WatchOverHttp10IsUnframedAndCloseDelimited) {
  start(opts());
  RawWatch w10, w11;
  ASSERT_TRUE(w10.open(sock, true));
  ASSERT_TRUE(w11.open(sock, false));
  EXPECT_EQ(w10.head.rfind("HTTP/1.1 200 ", 0), 0u) << w10.head;
  EXPECT_EQ(w10.head.find("Transfer-Encoding"), std::string::npos) << w10.head;
  EXPECT_EQ(w10.head.find("Content-Length"), std::string::npos) << w10.head;
  EXPECT_NE(w10.head.find("Connection: close\r\n"), std::string::npos) << w10.head;
  EXPECT_NE(w10.head.find("Content-Type: application/x-ndjson\r\n"), std::string::npos) << w10.head;
  EXPECT_NE(w11.head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << w11.head;
  // The first body line is the Bookmark itself, not a chunk size.
  std::string first = w10.body.substr(0, w10.body.find('\n'));
  json bm = json::parse(first, nullptr, false);
  ASSERT_TRUE(bm.is_object()) << first;
  EXPECT_EQ(bm["type"], "Bookmark");
  register_c("h1");
  register_c("h2");
  ASSERT_TRUE(w10.read_until([&] {
    return std::count(w10.body.begin(), w10.body.end(), '\n') >= 3;
  })) << w10.body;
  uint64_t seq = bm["seq"];
  std::vector<std::string> ids;
  std::string_view rest = w10.body;
  for (int i = 0; i < 3; ++i) {
    auto nl = rest.find('\n');
    json j = json::parse(rest.substr(0, nl), nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not one JSON object per line: " << rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    if (i == 0) continue;
    EXPECT_EQ(j["seq"].get<uint64_t>(), ++seq);
    if (j["type"] == "ContainerUpserted") ids.push_back(j["container"]["id"]);
  }
  EXPECT_FALSE(ids.empty());
  // The server ends the stream by closing it.
  stop();
  EXPECT_FALSE(w10.read_until([] { return false; }));
  EXPECT_TRUE(w10.eof) << "the stream was not closed";
}

TEST_F(ServerTest, AccessControlFromPeerCredentials) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to fork a peer that drops to uid 65534";
  // Capture the denial log lines.
  std::string logfile = dir + "/log";
  int saved = dup(2);
  int lf = open(logfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  dup2(lf, 2);
  log::init(log::Target::Stderr, log::Level::Info, "test");

  auto o = opts();
  o.socket_gid = 65534;  // the peer can connect; the rules decide
  // Reads for gid 65534, writes for root only.
  std::vector<core::AccessRule> rules = {{"*", {"GET"}, {0}, {"65534"}}, {"*", {"POST", "DELETE"}, {0}, {}}};
  auto pol = AccessPolicy::create(rules, "", "");
  ASSERT_TRUE(pol);
  o.policy = *pol;
  start(std::move(o));
  register_c("c1");
  EXPECT_EQ(request_as_nobody(sock, "GET", "/v1/containers", ""), 200);
  EXPECT_EQ(request_as_nobody(sock, "POST", "/v1/containers/c1/resize", R"({"resources":{"limits":{"cpu":"1"}}})"), 403);
  EXPECT_EQ(request_as_nobody(sock, "DELETE", "/v1/containers/c1", ""), 403);
  EXPECT_TRUE(store->container("c1")) << "a denied DELETE must not delete";
  EXPECT_EQ(store->container("c1")->generation, 0) << "a denied resize must not bump the generation";
  // Admitted by a supplementary group only: the server fetches the groups
  // (SO_PEERGROUPS) when the rule needs them, not at accept.
  EXPECT_EQ(request_as_nobody(sock, "GET", "/v1/containers", "", 4242, {65534}), 200);

  // Default rules with no socket group: only root.
  auto def = AccessPolicy::create(core::default_access_rules(), "", "");
  ASSERT_TRUE(def);
  stop();
  o = opts();
  o.socket_gid = 65534;
  start(std::move(o));
  EXPECT_EQ(request_as_nobody(sock, "GET", "/healthz", ""), 403);
  EXPECT_EQ(req("GET", "/healthz").status, 200);  // root still served
  stop();

  dup2(saved, 2);
  close(saved);
  close(lf);
  log::init(log::Target::Stderr, log::Level::Info, "test");
  std::ifstream in(logfile);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  EXPECT_NE(text.find("denied POST /v1/containers/c1/resize to uid 65534 pid "), std::string::npos) << text;
  EXPECT_NE(text.find("denied DELETE /v1/containers/c1 to uid 65534"), std::string::npos) << text;
  EXPECT_NE(text.find("denied GET /healthz to uid 65534"), std::string::npos) << text;
  EXPECT_EQ(metrics.http_denied.value(), 3);
}

TEST_F(ServerTest, DeadlineIsATotalNotAnIdleTimer) {
  start(opts());  // timeout 1 s
  int fd = connect_raw();
  ASSERT_GE(fd, 0);
  (void)!send(fd, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
  std::string got;
  // A header line every 200 ms for up to 10 s: an idle timer would never fire.
  for (int i = 0; i < 50 && got.empty(); ++i) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) > 0) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
      break;
    }
    (void)!send(fd, "X-A: 1\r\n", 8, MSG_NOSIGNAL);
  }
  close(fd);
  EXPECT_NE(got.find(" 408 "), std::string::npos) << got;
  EXPECT_NE(got.find("request head not complete within 1000 ms"), std::string::npos) << got;
  healthy();
}

// Each request on a kept-alive connection pushes its deadline later; the
// timer armed for an earlier deadline fires and is armed again, it does not
// close the connection. Idle past its latest deadline, the connection is
// closed. (The waits are the timing under test: 1 s deadlines.)
TEST_F(ServerTest, AKeptAliveConnectionLivesUntilItsLatestDeadline) {
  start(opts());  // timeout 1 s
  int fd = connect_raw();
  ASSERT_GE(fd, 0);
  // One request, then its whole reply; "" when the connection was closed.
  auto ask = [&] {
    constexpr std::string_view kReq = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    if (send(fd, kReq.data(), kReq.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(kReq.size())) return std::string();
    std::string got;
    while (got.find("\r\n\r\nok\n") == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5000) <= 0) break;
      char buf[512];
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  };
  using Clock = std::chrono::steady_clock;
  ASSERT_NE(ask().find(" 200 "), std::string::npos);
  // 0.6 s and 1.3 s after the first reply: the second outlives the first
  // request's deadline, the timer armed for it fires in between.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  ASSERT_NE(ask().find(" 200 "), std::string::npos) << "closed before its deadline";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_NE(ask().find(" 200 "), std::string::npos) << "closed at a deadline an answered request had pushed later";
  const auto last = Clock::now();
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1) << "an idle connection was not closed";
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0);
  const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last).count();
  EXPECT_GE(idle, 900) << "closed before its latest deadline";
  EXPECT_LE(idle, 2500) << "closed long after its latest deadline";
  close(fd);
}

// A connection answered at once (its request was there when it was
// accepted) never joins the loop; one that must wait does, for the rest of
// its request, for the socket to take a large reply, or for its next
// request. Every kind frees its slot: with max_connections 4, a leaked slot
// shows as a 503 within a few requests.
TEST_F(ServerTest, ConnectionsAnsweredAtOnceOrLaterAllFreeTheirSlots) {
  auto o = opts();
  o.max_connections = 4;
  start(o);
  for (int i = 0; i < 40; ++i) register_c("c" + std::to_string(i), "pod" + std::to_string(i % 4));
  for (int i = 0; i < 12; ++i) healthy();
  // A reply larger than the socket buffer, read slowly: the rest goes out
  // when the socket has room (EPOLLOUT), on a connection accepted with its
  // request already there.
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(store->update_container("c" + std::to_string(i), [](core::Container& c) {
      c.annotations.set("pad", std::string(16 << 10, 'x'));
    }));
  int fd = connect_raw();
  ASSERT_GE(fd, 0);
  const std::string get = "GET /v1/containers HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  close(fd);
  ASSERT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got.substr(0, 200);
  EXPECT_GT(got.size(), 40u * (16 << 10));
  EXPECT_EQ(got.substr(got.size() - 3), "]}\n") << "the reply was cut short";
  // A request sent in two parts, and a kept-alive connection's two requests.
  for (int i = 0; i < 6; ++i) {
    std::string r = raw(i % 2 ? "GET /healthz HTTP/1.1\r\nHost: p\r\n\r\nGET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"
                              : "GET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
    EXPECT_NE(r.find("HTTP/1.1 200 OK"), std::string::npos) << r;
  }
  for (int i = 0; i < 6; ++i) {
    fd = connect_raw();
    ASSERT_GE(fd, 0);
    (void)!send(fd, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (void)!send(fd, "Host: p\r\nConnection: close\r\n\r\n", 30, MSG_NOSIGNAL);
    std::string r;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) r.append(buf, static_cast<size_t>(n));
    close(fd);
    EXPECT_NE(r.find("HTTP/1.1 200 OK"), std::string::npos) << r;
  }
  for (int i = 0; i < 12; ++i) healthy();
}

TEST_F(ServerTest, PipelinedRequestsAnsweredInOrderAndStrictHeaders) {
  start(opts());
  register_c("c1");
  std::string r = raw("GET /healthz HTTP/1.1\r\nHost: p\r\n\r\nHEAD /v1/containers/c1 HTTP/1.1\r\nHost: p\r\n\r\n"
                      "GET /v1/containers/nope HTTP/1.1\r\nHost: p\r\n\r\nBREW /v1/containers/c1 HTTP/1.1\r\nHost: p\r\n\r\n"
                      "GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n");
  auto p1 = r.find("HTTP/1.1 200 OK"), p2 = r.find("HTTP/1.1 200 OK", p1 + 1), p3 = r.find("HTTP/1.1 404"),
       p4 = r.find("HTTP/1.1 405");
  ASSERT_NE(p1, std::string::npos) << r;
  ASSERT_NE(p2, std::string::npos) << r;
  ASSERT_NE(p3, std::string::npos) << r;
  ASSERT_NE(p4, std::string::npos) << r;
  EXPECT_TRUE(p1 < p2 && p2 < p3 && p3 < p4) << r;
  EXPECT_NE(r.find("Allow: GET, HEAD, DELETE\r\n"), std::string::npos) << r;
  // HEAD: the length of the GET body, but no body (the next thing is the 404).
  EXPECT_EQ(r.substr(r.find("\r\n\r\n", p2) + 4, 12), "HTTP/1.1 404") << r;
  // The 405 closed the connection: the last /healthz was not answered.
  EXPECT_EQ(r.find("HTTP/1.1", p4 + 1), std::string::npos) << r;

  struct Case { std::string req; const char* want; };
  for (const auto& c : {Case{"GET /v1/containers/c1%00x HTTP/1.1\r\nHost: p\r\n\r\n", " 400 "},
                        Case{std::string("GET /v1/containers/c1\0 HTTP/1.1\r\nHost: p\r\n\r\n", 36), " 400 "},
                        Case{"POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", " 400 "},
                        Case{"POST /v1/containers HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: gzip\r\n\r\n", " 501 "},
                        Case{"get /healthz HTTP/1.1\r\nHost: p\r\n\r\n", " 405 "},
                        Case{"GET /healthz HTTP/3\r\n\r\n", " 400 "},
                        Case{"GET /healthz HTTP/1.1\r\nHost: p\r\nContent-Length: 1\r\n\r\nx", " 413 "}}) {
    std::string out = raw(c.req);
    EXPECT_NE(out.find(c.want), std::string::npos) << c.req << " -> " << out;
  }
  healthy();
}

// The container list is reused while the store is unchanged: every change,
// through the API or straight into the store from another thread (as the NRI
// handlers and the read-back do), shows in the next list, byte for byte what
// a rebuild gives.
TEST_F(ServerTest, RepeatedListFollowsEveryChange) {
  start(opts());
  register_c("a1");
  auto first = req("GET", "/v1/containers");
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(req("GET", "/v1/containers").body, first.body);
  register_c("a2");
  auto second = req("GET", "/v1/containers");
  EXPECT_NE(second.body.find("\"id\":\"a2\""), std::string::npos) << second.body;
  auto c = store->container("a1");
  ASSERT_TRUE(c);
  c->state = "stopped-by-test";
  ASSERT_TRUE(store->upsert_container(*c));
  auto third = req("GET", "/v1/containers");
  EXPECT_NE(third.body.find("stopped-by-test"), std::string::npos) << third.body;
  // The list written again from the store: every container's JSON, in the
  // store's order, comma-separated.
  std::string items;
  store->for_each_container(
      [&](const core::Container& x) { items += (items.empty() ? "" : ",") + core::json_string(x); });
  EXPECT_EQ(third.body, "{\"items\":[" + items + "]}\n");
  ASSERT_TRUE(store->remove_container("a2"));
  EXPECT_EQ(req("GET", "/v1/containers").body.find("\"id\":\"a2\""), std::string::npos);
}

// The cached list is one body shared by every reply that sends it (no copy
// per request): pipelined behind each other and behind a HEAD on one
// connection, larger than the socket buffer, each reply is whole and in
// order, and a HEAD sends only its head.
TEST_F(ServerTest, TheSharedListBodyGoesOutWholeAndInOrder) {
  start(opts());
  for (int i = 0; i < 20; ++i) register_c("c" + std::to_string(i));
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(store->update_container("c" + std::to_string(i), [](core::Container& c) {
      c.annotations.set("pad", std::string(16 << 10, 'x'));
    }));
  const std::string list = req("GET", "/v1/containers").body;  // now cached
  ASSERT_GT(list.size(), 20u * (16 << 10));
  const std::string get = "GET /v1/containers HTTP/1.1\r\nHost: p\r\n\r\n";
  std::string r = raw(get + "HEAD /v1/containers HTTP/1.1\r\nHost: p\r\n\r\n" + get +
                      "GET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
  const std::string len = "Content-Length: " + std::to_string(list.size()) + "\r\n";
  size_t at = 0;
  for (int i = 0; i < 3; ++i) {  // GET, HEAD, GET
    ASSERT_EQ(r.compare(at, 15, "HTTP/1.1 200 OK"), 0) << "reply " << i << " at " << at;
    const size_t body = r.find("\r\n\r\n", at) + 4;
    EXPECT_NE(r.substr(at, body - at).find(len), std::string::npos) << r.substr(at, body - at);
    at = body;
    if (i == 1) continue;  // HEAD: no body
    EXPECT_EQ(r.compare(at, list.size(), list), 0) << "reply " << i << " is not the whole list";
    at += list.size();
  }
  EXPECT_EQ(r.compare(at, 15, "HTTP/1.1 200 OK"), 0) << r.substr(at, 200);
  EXPECT_EQ(r.substr(r.size() - 3), "ok\n");
}

TEST(CanonicalPath, OneFormOrAnErrorNamingTheTarget) {
  EXPECT_EQ(*canonical_path("/healthz"), "/healthz");
  EXPECT_EQ(*canonical_path("/"), "/");
  EXPECT_EQ(*canonical_path("/v1/containers?x=1"), "/v1/containers");
  EXPECT_EQ(*canonical_path("/v1/contain%65rs/c1"), "/v1/containers/c1");
  for (std::string bad : std::vector<std::string>{"/v1/containers/c1%00x", std::string("/v1/c\0x", 8), "/v1/%2e%2e", "/v1/a%2Fb", "/v1//x",
                          "/v1/x/", "/v1/x%zz", "/v1/x%4", "http://h/x", "*", "/v1/x%25", "/v1/x#f", "/v1/./x",
                          "/v1/x%0a"}) {
    auto r = canonical_path(bad);
    ASSERT_FALSE(r) << bad;
    std::string shown = bad.substr(0, bad.find('\0'));
    if (auto q = shown.find('?'); q != std::string::npos) shown = shown.substr(0, q);
    EXPECT_NE(r.error().message.find(shown), std::string::npos) << r.error().message;
  }
}

TEST(ParseJsonObject, DuplicateKeysAreNamed) {
  auto a = parse_json_object(R"({"memory":"128Mi","memory":"200Mi"})");
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("'memory'"), std::string::npos) << a.error().message;
  auto b = parse_json_object(R"({"resources":{"limits":{"cpu":"1","cpu":"2"}}})");
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("'cpu'"), std::string::npos) << b.error().message;
  // The same key in sibling objects is no duplicate.
  EXPECT_TRUE(parse_json_object(R"({"a":{"cpu":"1"},"b":{"cpu":"1"},"c":[{"x":1},{"x":2}]})"));
  EXPECT_EQ(allowed_methods("/v1/containers/x/resize"), "POST");
  EXPECT_EQ(allowed_methods("/v1/containers"), "GET, HEAD, POST");
}

TEST(AccessPolicy, FirstMatchingRuleDecides) {
  std::vector<core::AccessRule> rules = {{"/metrics", {"GET"}, {1000}, {}}, {"*", {"*"}, {0}, {}}};
  auto p = AccessPolicy::create(rules, "", "");
  ASSERT_TRUE(p);
  Peer u1000{1, 1000, 1000, {}};
  Peer root{1, 0, 0, {}};
  EXPECT_TRUE(p->allowed(u1000, "GET", "/metrics"));
  EXPECT_FALSE(p->allowed(u1000, "GET", "/v1/containers"));
  EXPECT_FALSE(p->allowed(root, "GET", "/metrics"));  // the first match excludes root
  EXPECT_TRUE(p->allowed(root, "DELETE", "/v1/containers/x"));
  Peer supp{1, 2000, 2000, {4242}};
  auto g = AccessPolicy::create({{"*", {"GET"}, {}, {"4242"}}}, "", "");
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->allowed(supp, "GET", "/x"));
  EXPECT_FALSE(g->allowed(supp, "POST", "/x"));
  auto bad = AccessPolicy::create({{"*", {"GET"}, {}, {"no-such-group-xyz"}}}, "", "");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("no-such-group-xyz"), std::string::npos);
}

TEST(ParseResize, NullRemovesAndPolicies) {
  auto r = parse_container_resize(
      R"({"resources":{"requests":{"cpu":"250m"},"limits":{"memory":null}},
          "resizePolicy":[{"resourceName":"memory","restartPolicy":"RestartContainer"}]})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->resources.cpu_request_milli, 250);
  EXPECT_TRUE(r->remove.memory_limit);
  EXPECT_EQ(r->memory_policy, core::ResizePolicy::RestartContainer);
  EXPECT_FALSE(r->cpu_policy);
  auto p = parse_pod_resize(R"({"resources":{"limits":{"cpu":"2"}},"containers":[{"id":"a","resources":{}}]})");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->pod_resources->cpu_limit_milli, 2000);
  EXPECT_EQ(p->containers.at(0).container_id, "a");
  EXPECT_FALSE(parse_pod_resize("{}"));
}

// What a container resize body reads as, or the error it gets: the one-pass
// reader and the tree must agree on every body (the one-pass reader hands
// everything it does not take to the tree).
std::string reading(const Result<core::ContainerResize>& r) {
  if (!r) return "error: " + r.error().message;
  auto q = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("-"); };
  auto pol = [](const std::optional<core::ResizePolicy>& p) {
    return p ? std::to_string(static_cast<int>(*p)) : std::string("-");
  };
  const auto& x = r->resources;
  const auto& rm = r->remove;
  return fmt::format("req {}/{} lim {}/{} rm {}{}{}{} pol {}/{} id '{}'", q(x.cpu_request_milli),
                     q(x.memory_request_bytes), q(x.cpu_limit_milli), q(x.memory_limit_bytes), rm.cpu_request,
                     rm.memory_request, rm.cpu_limit, rm.memory_limit, pol(r->cpu_policy), pol(r->memory_policy),
                     r->container_id);
}

TEST(ParseResize, OnePassReaderAgreesWithTheTreeOnEveryBody) {
  const std::vector<std::string> bodies = {
      R"({"resources":{"limits":{"memory":"128Mi","cpu":"200m"}}})",
      R"({"resources":{"requests":{"cpu":"250m","memory":"64Mi"},"limits":{"cpu":"1","memory":"1Gi"}}})",
      R"({"resources":{"limits":{"memory":null,"cpu":null},"requests":{"cpu":null}}})",
      R"({"resources":{"requests":null,"limits":{"cpu":"2"}}})",
      R"({"resizePolicy":[{"resourceName":"cpu","restartPolicy":"NotRequired"},
                          {"restartPolicy":"RestartContainer","resourceName":"memory"},
                          {"resourceName":"cpu","restartPolicy":"RestartContainer"}]})",
      R"({"resizePolicy":[]})",
      R"({})",
      " \n\t{ \"resources\" : { \"limits\" : { \"cpu\" : \"\\u0031\\u0030\\u0030m\" } } } \n",
      R"({"resources":{"limits":{"cpu":1.5,"memory":134217728}}})",
      R"({"resources":{"limits":{"cpu":2}}})",
      R"({"resources":{"limits":{"cpu":true}}})",
      R"({"resources":{"limits":{"cpu":"lots"}}})",
      R"({"resources":{"limits":{"memory":"-1"}}})",
      R"({"resources":{"limits":{"cpu":"1","cpu":"2"}}})",
      R"({"resources":{"limits":{}},"resources":{}})",
      R"({"resources":{"limits":{"gpu":"1"}}})",
      R"({"resources":{"limit":{"cpu":"1"}}})",
      R"({"resource":{}})",
      R"({"resources":null})",
      R"({"resources":[]})",
      R"({"resources":"1"})",
      R"({"resources":{"limits":"1"}})",
      R"({"resources":{"limits":[]}})",
      R"({"resources":{"limits":{"cpu":{}}}})",
      R"({"resources":{"limits":{"cpu":["1"]}}})",
      R"({"resizePolicy":null})",
      R"({"resizePolicy":{}})",
      R"({"resizePolicy":["cpu"]})",
      R"({"resizePolicy":[{"resourceName":"cpu"}]})",
      R"({"resizePolicy":[{"restartPolicy":"NotRequired"}]})",
      R"({"resizePolicy":[{"resourceName":"gpu","restartPolicy":"NotRequired"}]})",
      R"({"resizePolicy":[{"resourceName":"cpu","restartPolicy":"Sometimes"}]})",
      R"({"resizePolicy":[{"resourceName":"cpu","restartPolicy":"NotRequired","x":1}]})",
      R"({"resizePolicy":[{"resourceName":1,"restartPolicy":"NotRequired"}]})",
      R"({"resizePolicy":[[]]})",
      R"({"resources":{"limits":{"cpu":"1"}}} x)",
      R"({"resources":{"limits":{"cpu":"1"}})",
      R"({"resources":{"limits":{"cpu":"1"}}}})",
      R"([{"resources":{}}])",
      R"("resources")",
      "null",
      "",
      "   ",
      "{\"resources\":{\"limits\":{\"cpu\":\"1\\u0000\"}}}",
      std::string("{\"resources\":{\"limits\":{\"cpu\":\"1\"}}}\0", 37),
      R"({"resources":{"limits":{"cpu":"1"}},"x":{"deep":[[[[[[{}]]]]]]}})",
  };
  for (const auto& b : bodies) {
    EXPECT_EQ(reading(parse_container_resize(b)), reading(parse_container_resize_tree(b))) << b;
  }
  // The valid ones above are read, not all refused alike.
  EXPECT_EQ(reading(parse_container_resize(bodies[0])), "req -/- lim 200/134217728 rm falsefalsefalsefalse pol -/- id ''");
  EXPECT_EQ(reading(parse_container_resize(bodies[2])), "req -/- lim -/- rm truefalsetruetrue pol -/- id ''");
  EXPECT_EQ(reading(parse_container_resize(bodies[7])), "req -/- lim 100/- rm falsefalsefalsefalse pol -/- id ''");
}

}  // namespace
}  // namespace podshim::status

namespace podshim::status {
namespace {

// The resize answer writes its report without nlohmann nodes; it must be
// byte-for-byte what nlohmann's dump gives (the pod answer still uses it).
TEST(ReportJson, WriterMatchesNlohmannsDump) {
  std::vector<cgroup::ResizeReport> reports(4);
  reports[1].bytes_reclaimed = 123456789;
  reports[1].duration = std::chrono::milliseconds(1750);
  reports[1].growth_bytes_per_sec = -4096;
  reports[1].psi_some_avg10 = 12.34;
  reports[1].psi_full_avg10 = 100;
  reports[1].events["c1"] = cgroup::MemoryEvents{1, 2, 3, 4};
  reports[1].events["a \"quoted\" id"] = cgroup::MemoryEvents{0, 0, 0, 18446744073709551615u};
  reports[2].psi_some_avg10 = 0.1 + 0.2;
  reports[2].psi_full_avg10 = 1e-7;
  reports[3].psi_some_avg10 = 1e300;
  reports[3].psi_full_avg10 = std::numeric_limits<double>::quiet_NaN();
  for (const auto& r : reports) {
    std::string mine;
    append_report_json(mine, r);
    EXPECT_EQ(mine, report_json(r).dump());
  }
}

}  // namespace
}  // namespace podshim::status
