// The hostile-input table: inputs that a confused or malicious
// peer can hand podshim on each of its interfaces, each with the clear
// error it must get. Three kinds of row:
//
//   daemon  — sent to a real `podshimd --nri=off` over its status socket;
//             the daemon runs on a fake cgroup tree in a temp dir (never
//             /sys/fs/cgroup) and must answer GET /healthz after every row;
//   nri     — raw bytes written by the runtime simulator into a real plugin
//             connection; the plugin must drop the connection with a reason
//             (or answer), then reconnect and be synchronized again;
//   library — the parsers and checks the daemon and the hook call (hook
//             state/config, CDI, SELinux mount options, quantities, the
//             cgroup engine), called directly; the error names the input.
//
// The table is data: a row is (interface, input, what the error must say).
// A row fails when the input is accepted, when the error does not say what
// it must, or when the daemon or the plugin stops serving afterwards.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/quantity.h"
#include "cdi/edits.h"
#include "cdi/name.h"
#include "cdi/spec.h"
#include "cgroup/engine.h"
#include "selinux/mounts.h"
#include "shim/hook/devices.h"
#include "shim/hook/hook.h"
#include "shim/hook/labeler.h"
#include "shim/hook/oci.h"
#include "shim/nri/plugin.h"
#include "shim/nri/simulator.h"
#include "shim/nri/wire.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/hostile/slow_clients.h"

namespace podshim {
namespace {

using nlohmann::json;
namespace fsys = std::filesystem;

// What a row observed: whether the input was refused and the error text
// (an API error message, an HTTP status line + body, a close reason).
struct Outcome {
  bool refused = false;
  std::string message;
};

template <typename T>
Outcome of(const Result<T>& r) {
  if (r) return {false, "accepted"};
  return {true, r.error().message};
}

enum class Kind { Daemon, Nri, Library };

struct Row {
  Kind kind;
  std::string name;
  std::function<Outcome()> run;
  // Substrings the error must contain (the offending input, usually).
  std::vector<std::string> must_say;
};

// ---- a real podshimd ---------------------------------------------------------------

struct HttpReply {
  int status = 0;  // 0: the server closed without a reply
  std::string body;
};

class Daemon {
 public:
  Daemon() {
    const char* exe = std::getenv("PODSHIM_PODSHIMD");
    if (!exe) return;
    dir_ = tree_.state() + "/daemon";
    fsys::create_directories(dir_ + "/state");
    // The read-only member (uid/gid 65534) of the slow-client rows must reach
    // the socket; the socket itself is 0660 root:65534.
    for (const std::string& d : {tree_.state() + "/..", tree_.state(), dir_}) ::chmod(d.c_str(), 0755);
    sock_ = dir_ + "/s.sock";
    tree_.add("kubepods");
    tree_.add("kubepods/burstable");
    tree_.add("kubepods/burstable/podp1");
    tree_.add("kubepods/burstable/podp1/c1");
    // A directory outside the cgroup root that looks like a cgroup, and a
    // symlink to it inside: writes through the link must never land.
    outside_ = tree_.state() + "/outside";
    fsys::create_directories(outside_);
    std::ofstream(outside_ + "/memory.max") << "max\n";
    std::ofstream(outside_ + "/cpu.max") << "max 100000\n";
    fsys::create_directory_symlink(outside_, tree_.cg_root() + "/kubepods/burstable/podevil");
    const std::string cfg = dir_ + "/config.yaml";
    std::ofstream(cfg) << "socket:\n  path: " << sock_ << "\n  group: \"65534\"\n"
                       << "state_dir: " << dir_ << "/state\n"
                       << "cgroup:\n  root: " << tree_.cg_root()
                       << "\n  driver: cgroupfs\n  shrink_timeout_ms: 20\n"
                       << "http:\n  timeout_seconds: 3\n  max_body_bytes: 1048576\n  max_connections: 64\n"
                       << "node:\n  allocatable:\n    cpu: \"8\"\n    memory: 16Gi\n"
                       // The first matching rule decides: reads for the read-only
                       // group, POST for the writer group, everything for us.
                       << "access:\n  - methods: [\"GET\"]\n    uids: [" << ::getuid() << "]\n    groups: [\"65534\"]\n"
                       << "  - methods: [\"POST\"]\n    uids: [" << ::getuid() << "]\n    groups: [\"65533\"]\n"
                       << "  - methods: [\"*\"]\n    uids: [" << ::getuid() << "]\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0 && !std::getenv("PODSHIM_HOSTILE_DAEMON_LOG")) ::dup2(devnull, 2);
      ::execl(exe, exe, "--nri=off", "--config", cfg.c_str(), "--log-level", "debug",
              static_cast<char*>(nullptr));
      _exit(127);
    }
    // Readiness: the socket answers /healthz (bounded wait, not a timing assertion).
    for (int i = 0; i < 500 && !healthy(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~Daemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  bool available() const { return pid_ > 0; }
  bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  const std::string& outside() const { return outside_; }
  cgroup::testing::FakeTree& tree() { return tree_; }

  int connect_fd() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, sock_.c_str(), sizeof(a.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Sends `raw` (possibly in pieces), reads until the server closes.
  HttpReply exchange(const std::string& raw) const {
    HttpReply out;
    const int fd = connect_fd();
    if (fd < 0) return out;
    size_t off = 0;
    while (off < raw.size()) {
      const ssize_t n = ::send(fd, raw.data() + off, raw.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server stopped reading: fine, read its answer
      off += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    std::string in = read_all(fd);
    ::close(fd);
    return parse(in);
  }

  // Sends `raw` and returns everything the server wrote until it closed.
  std::string exchange_text(const std::string& raw) const {
    const int fd = connect_fd();
    if (fd < 0) return "";
    size_t off = 0;
    while (off < raw.size()) {
      const ssize_t n = ::send(fd, raw.data() + off, raw.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    std::string in = read_all(fd);
    ::close(fd);
    return in;
  }
  const std::string& socket() const { return sock_; }

  HttpReply request(const std::string& method, const std::string& path, const std::string& body = "") const {
    std::string raw = method + " " + path + " HTTP/1.1\r\nHost: podshim\r\nConnection: close\r\n";
    if (!body.empty() || method == "POST") raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    raw += "\r\n" + body;
    return exchange(raw);
  }

  bool healthy() const {
    if (pid_ <= 0) return false;
    auto r = request("GET", "/healthz");
    return r.status == 200 && r.body == "ok\n";
  }

  static std::string read_all(int fd) {
    std::string in;
    char buf[65536];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      // Generous: only a hung daemon gets here, and that row then fails.
      if (::poll(&p, 1, 20'000) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    return in;
  }

  static HttpReply parse(const std::string& in) {
    HttpReply r;
    if (in.rfind("HTTP/1.", 0) != 0 || in.size() < 12) return r;
    r.status = std::atoi(in.c_str() + 9);
    const size_t b = in.find("\r\n\r\n");
    if (b != std::string::npos) r.body = in.substr(b + 4);
    return r;
  }

 private:
  cgroup::testing::FakeTree tree_;
  std::string dir_, sock_, outside_;
  pid_t pid_ = -1;
};

Daemon* daemon_ = nullptr;

// A reply is a refusal when it is a 4xx with a JSON error (or the server
// hung up, which is how MHD refuses what is not HTTP at all).
Outcome http_outcome(const HttpReply& r, bool close_ok = false) {
  if (r.status == 0) return {close_ok, "connection closed without a reply"};
  std::string msg = std::to_string(r.status) + " " + r.body;
  bool refused = r.status >= 400 && r.status < 500;
  // A resize the cgroup engine refused is answered 200 with result "error" and
  // the engine's message (the kubelet's PodResizeInProgress/Error).
  if (r.status == 200) {
    auto j = json::parse(r.body, nullptr, false);
    if (j.is_object() && j.value("result", "") == "error") {
      refused = true;
      msg = "200 Error: " + j.value("message", "");
    }
  }
  return {refused, msg};
}

// A refusal with exactly this status (5xx rows: 501, 503, 505).
Outcome status_outcome(const HttpReply& r, int want) {
  if (r.status == 0) return {false, "connection closed without a reply"};
  return {r.status == want, std::to_string(r.status) + " " + r.body};
}

// The status codes of every response in a raw reply stream, in order.
std::vector<int> statuses(const std::string& text) {
  std::vector<int> out;
  for (size_t p = text.find("HTTP/1.1 "); p != std::string::npos; p = text.find("HTTP/1.1 ", p + 1)) {
    if (p == 0 || text.compare(p - 2, 2, "\r\n") == 0 || text[p - 1] == '\n' || text[p - 1] == '}') {
      out.push_back(std::atoi(text.c_str() + p + 9));
    }
  }
  return out;
}

std::string joined(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// A pipelined exchange refused as it must be: the statuses come back in
// order and match `want` exactly (a bad request closes the connection, so
// nothing after it is answered).
Outcome pipelined(const std::string& raw, const std::vector<int>& want) {
  std::string text = daemon_->exchange_text(raw);
  auto got = statuses(text);
  std::string msg = "statuses [" + joined(got) + "]";
  auto last = text.rfind("{\"error\"");
  if (last != std::string::npos) msg += " " + text.substr(last, text.find('\n', last) - last);
  return {got == want, msg};
}

// Slow clients of uid 65534 (more than http.max_connections) while root's
// /healthz and the hook's registrations go on: none of those may fail.
Outcome under_slow_clients(bool body, int clients) {
  if (::geteuid() != 0) return {false, "needs root to fork a client as uid 65534"};
  testing::SlowOptions o;
  o.socket = daemon_->socket();
  o.clients = clients;
  o.body = body;
  if (body) {
    // Only writers may send a body (a read-only member is refused 403 before
    // any of it is read): uid/gid 65533, in the socket's group 65534.
    o.uid = 65533;
    o.gid = 65533;
    o.groups = {65534};
  }
  o.duration = std::chrono::milliseconds(5000);
  o.drip = std::chrono::milliseconds(400);
  testing::SlowClients slow(o);
  if (!slow.start()) return {false, "the slow clients did not start (fork failed or no connect in 10 s)"};
  auto good = testing::good_stream(daemon_->socket(), "/kubepods/burstable/podp1/c1",
                                   std::chrono::milliseconds(4000), std::chrono::milliseconds(20));
  auto r = slow.finish();
  std::string msg = fmt::format(
      "{} good requests, {} failed{}; slow clients: {} connects, {} refused 503 ({}), {} timed out 408, "
      "longest {} ms",
      good.root_ms.size() + good.hook_ms.size(), good.failed,
      good.first_failure.empty() ? "" : " (" + good.first_failure + ")", r.connects, r.refused_503, r.sample,
      r.timed_out, r.longest_ms);
  // Functional bounds only (the latency figures are the slow-load benchmark's):
  // nothing good failed, the surplus clients were told why, and no slow
  // connection outlived the 3 s deadline by more than a generous margin.
  bool ok = good.failed == 0 && !good.root_ms.empty() && !good.hook_ms.empty() && r.refused_503 > 0 &&
            r.timed_out > 0 && r.longest_ms < 4500;
  return {ok, msg};
}

std::string registration(const json& fields) {
  json j = {{"id", "c-ok"}, {"podUid", "p-ok"}, {"cgroupPath", "/kubepods/burstable/podp1/c1"}};
  for (auto& [k, v] : fields.items()) j[k] = v;
  return j.dump();
}

Outcome post_registration(const json& fields) {
  return http_outcome(daemon_->request("POST", "/v1/containers", registration(fields)));
}

Outcome post_resize(const std::string& id, const std::string& body) {
  return http_outcome(daemon_->request("POST", "/v1/containers/" + id + "/resize", body));
}

// Stays Burstable (a QoS change would be Infeasible before the cgroup is touched).
const std::string kGrowCpu = R"({"resources":{"requests":{"cpu":"2"}}})";

std::string resize_body(const std::string& cpu, const std::string& memory) {
  return json{{"resources", {{"requests", {{"cpu", cpu}, {"memory", memory}}},
                             {"limits", {{"cpu", cpu}, {"memory", memory}}}}}}.dump();
}

// ---- a real NRI plugin against the simulator --------------------------------------

class RecordingHandlers : public nri::Handlers {
 public:
  // A plugin must handle some event (Plugin::start); this one takes
  // RunPodSandbox and ignores it.
  RecordingHandlers() { events.on<nri::api::RUN_POD_SANDBOX>() = [](const nri::pb::PodSandboxView&) {}; }
  std::vector<std::string> errors;
  void on_connection_error(const Error& why, bool) override { errors.push_back(why.message); }
};

class NriRig {
 public:
  NriRig() {
    sd_event_new(&loop_);
    char tmpl[] = "/tmp/podshim-hostile-nri.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    sock_ = dir_ + "/nri.sock";
    sim_ = std::make_unique<nri::Simulator>(loop_, nri::SimOptions{});
    if (!sim_->listen(sock_)) return;
    nri::PluginOptions po;
    po.socket_path = sock_;
    po.reconnect_min_usec = 10'000;
    po.reconnect_max_usec = 50'000;
    plugin_ = std::make_unique<nri::Plugin>(loop_, h_, po);
    (void)plugin_->start();
  }
  ~NriRig() {
    plugin_.reset();
    sim_.reset();
    sd_event_unref(loop_);
    fsys::remove_all(dir_);
  }

  bool run_until(const std::function<bool()>& pred) {
    // Bounded so a broken plugin fails the row instead of hanging the suite.
    for (int i = 0; i < 3000 && !pred(); i++) sd_event_run(loop_, 10'000);
    return pred();
  }
  bool ready() {
    return run_until([&] {
      return sim_->connected() && sim_->synchronized() && plugin_->state() == nri::PluginState::Ready;
    });
  }

  // Writes raw bytes (then closes the runtime's end when `then_close`), and
  // reports the reason the plugin gave for dropping the connection. The row
  // holds only if the plugin then reconnects and is synchronized again.
  Outcome inject(const std::string& bytes, bool then_close) {
    if (!ready()) return {false, "plugin not ready before the row"};
    const uint64_t before = sim_->accepted();
    const size_t errs = h_.errors.size();
    sim_->write_raw(bytes);
    if (then_close) {
      // Let the bytes reach the plugin before the runtime's end goes away.
      for (int i = 0; i < 5; i++) sd_event_run(loop_, 10'000);
      sim_->close_plugin();
    }
    if (!run_until([&] { return h_.errors.size() > errs; })) return {false, "plugin kept the connection"};
    std::string why = h_.errors.back();
    if (!run_until([&] { return sim_->accepted() > before && ready(); })) {
      return {false, "plugin did not reconnect after: " + why};
    }
    return {true, why};
  }

  // Calls a Plugin method with a raw payload; the plugin must answer (any
  // error code with a message) and keep the connection.
  Outcome call(const std::string& method, const std::string& payload) {
    if (!ready()) return {false, "plugin not ready before the row"};
    const uint64_t before = sim_->accepted();
    bool done = false;
    nri::CallResult got;
    sim_->call(method, payload, [&](nri::CallResult r) {
      got = std::move(r);
      done = true;
    });
    if (!run_until([&] { return done; })) return {false, "no reply"};
    if (sim_->accepted() != before || !sim_->connected()) return {false, "connection dropped"};
    if (got.status.ok()) return {false, "accepted"};
    return {true, fmt::format("code {}: {}", got.status.code, got.status.message)};
  }

  nri::Plugin* plugin() { return plugin_.get(); }

 private:
  sd_event* loop_ = nullptr;
  std::string dir_, sock_;
  RecordingHandlers h_;
  std::unique_ptr<nri::Simulator> sim_;
  std::unique_ptr<nri::Plugin> plugin_;
};

NriRig* nri_ = nullptr;

std::string mux(uint32_t conn, const std::string& payload) {
  std::string out;
  nri::put_u32be(out, conn);
  nri::put_u32be(out, static_cast<uint32_t>(payload.size()));
  return out + payload;
}

std::string ttrpc_header(uint32_t length, uint32_t stream, uint8_t type) {
  std::string h;
  nri::put_u32be(h, length);
  nri::put_u32be(h, stream);
  h.push_back(static_cast<char>(type));
  h.push_back(0);
  return h;
}

// ---- library helpers ---------------------------------------------------------------

json good_state() {
  return {{"ociVersion", "1.0.2"}, {"id", "ctr1"}, {"status", "creating"}, {"pid", 4242},
          {"bundle", "/run/bundle/ctr1"}, {"annotations", json::object()}};
}

Outcome state_with(const std::string& key, const json& v) {
  json s = good_state();
  if (v.is_null()) s.erase(key); else s[key] = v;
  return of(hook::parse_state(s.dump()));
}

json good_config() {
  return {{"ociVersion", "1.0.2"},
          {"mounts", json::array({{{"destination", "/data"}, {"type", "bind"},
                                   {"source", "/srv/data"}, {"options", {"rbind"}}}})},
          {"linux", {{"cgroupsPath", "/kubepods/pod1/ctr1"},
                     {"devices", json::array({{{"path", "/dev/gpu0"}, {"type", "c"},
                                               {"major", 1}, {"minor", 3}}})}}}};
}

Outcome annotations_with(const std::string& key, const std::string& value) {
  json c = good_config();
  c["annotations"] = {{key, value}};
  auto cfg = hook::parse_config(c.dump());
  if (!cfg) return of(cfg);
  if (key == std::string(hook::kInjectedMountsAnnotation)) return of(hook::injected_mounts(*cfg, {}));
  return of(hook::injected_devices({}, cfg->annotations));
}

// A temp dir used as "/" for the hook's device check.
class HostRoot {
 public:
  HostRoot() {
    char tmpl[] = "/tmp/podshim-hostile-root.XXXXXX";
    path_ = ::mkdtemp(tmpl);
    fsys::create_directories(path_ + "/dev");
    std::ofstream(path_ + "/dev/fake") << "not a device\n";
    ::symlink("/dev/null", (path_ + "/dev/link").c_str());
    ::mkfifo((path_ + "/dev/fifo").c_str(), 0600);
    fd_ = ::open(path_.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  }
  ~HostRoot() {
    ::close(fd_);
    fsys::remove_all(path_);
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

Outcome hook_device_check(const std::string& host_path, const std::string& type) {
  static HostRoot root;
  std::vector<hook::InjectedDevice> inj{{"/dev/gpu0", host_path}};
  std::vector<hook::OciDevice> spec{{"/dev/gpu0", type, 1, 3}};
  return of(hook::check_devices(root.fd(), inj, spec));
}

Outcome cdi_node(const std::string& host_path, const std::string& type = "") {
  static HostRoot root;
  cdi::ContainerEdits e;
  cdi::DeviceNode n;
  n.path = "/dev/gpu0";
  n.host_path = host_path.rfind("@root", 0) == 0 ? root.path() + host_path.substr(5) : host_path;
  n.type = type;
  e.device_nodes.push_back(n);
  return of(cdi::resolve_edits(e, cdi::ProcessIds{}));
}

// A spec is refused by parsing or by validation.
Outcome spec_outcome(const Result<cdi::Spec>& s) {
  if (!s) return of(s);
  return of(cdi::validate_spec(*s));
}

Outcome mount_options(std::vector<std::string> options, std::string type = "bind") {
  selinux::MountEntry m{"/srv/data", "/data", std::move(type), std::move(options)};
  return of(selinux::check_no_security_options(m));
}

Outcome engine_resize(const std::string& cgroup_path) {
  static cgroup::testing::FakeTree tree;
  static std::unique_ptr<cgroup::Engine> engine = [] {
    tree.add("kubepods");
    tree.add("kubepods/podp1");
    // A cgroup-looking directory outside the root, linked from inside it.
    const std::string outside = tree.state() + "/outside";
    fsys::create_directories(outside);
    for (const char* f : {"memory.max", "memory.high", "cpu.max", "cpu.weight"})
      std::ofstream(outside + "/" + f) << "max\n";
    fsys::create_directory_symlink(outside, tree.cg_root() + "/kubepods/podlink");
    cgroup::EngineOptions o;
    o.cgroup_root = tree.cg_root();
    o.state_dir = tree.state();
    o.driver = cgroup::DriverKind::Cgroupfs;
    o.shrink_timeout = std::chrono::milliseconds(10);
    auto e = cgroup::Engine::create(o);
    return e ? std::move(*e) : nullptr;
  }();
  if (!engine) return {false, "engine did not start"};
  cgroup::PodResizeRequest req;
  cgroup::ResizeTarget t;
  t.id = "c1";
  t.cgroup_path = cgroup_path;
  t.desired.cpu_request_milli = 500;
  t.desired.cpu_limit_milli = 1000;
  t.desired.memory_limit_bytes = 256 << 20;
  req.containers.push_back(t);
  return of(engine->resize(req));
}

// ---- the table ---------------------------------------------------------------------

std::vector<Row> table() {
  std::vector<Row> t;
  auto D = [&](std::string name, std::function<Outcome()> f, std::vector<std::string> say) {
    t.push_back({Kind::Daemon, std::move(name), std::move(f), std::move(say)});
  };
  auto N = [&](std::string name, std::function<Outcome()> f, std::vector<std::string> say) {
    t.push_back({Kind::Nri, std::move(name), std::move(f), std::move(say)});
  };
  auto L = [&](std::string name, std::function<Outcome()> f, std::vector<std::string> say) {
    t.push_back({Kind::Library, std::move(name), std::move(f), std::move(say)});
  };

  // -- status socket: registration (what podshim-hook POSTs) --
  D("container id with ../", [] { return post_registration({{"id", "../../etc"}}); }, {"400", "../../etc"});
  D("container id with /", [] { return post_registration({{"id", "a/b"}}); }, {"400", "a/b"});
  D("empty container id", [] { return post_registration({{"id", ""}}); }, {"400", "container id"});
  D("container id with NUL", [] { return post_registration({{"id", std::string("a\0b", 3)}}); }, {"400"});
  D("container id of 4096 bytes", [] { return post_registration({{"id", std::string(4096, 'a')}}); },
    {"400", "container id"});
  D("pod uid with /", [] { return post_registration({{"podUid", "p/1"}}); }, {"400", "p/1"});
  D("pod uid ..", [] { return post_registration({{"podUid", ".."}}); }, {"400", "pod uid"});
  D("id is a number", [] { return post_registration({{"id", 42}}); }, {"400", "id"});
  D("unknown field", [] { return post_registration({{"privileged", true}}); }, {"400", "privileged"});
  D("negative pid", [] { return post_registration({{"pid", -1}}); }, {"400", "pid"});
  D("pid above int32", [] { return post_registration({{"pid", 1LL << 40}}); }, {"400", "pid"});
  D("annotation value not a string", [] { return post_registration({{"annotations", {{"k", 1}}}}); },
    {"400", "'k'"});
  D("body is not JSON", [] { return http_outcome(daemon_->request("POST", "/v1/containers", "{\"id\":")); },
    {"400"});
  D("body is a JSON array", [] { return http_outcome(daemon_->request("POST", "/v1/containers", "[1,2]")); },
    {"400"});
  D("JSON nested 100000 deep", [] {
      return http_outcome(daemon_->request("POST", "/v1/containers", std::string(100000, '[')));
    }, {"400"});
  D("path segment ..", [] { return http_outcome(daemon_->request("GET", "/v1/containers/..")); },
    {"4"});
  D("percent-encoded ../ in the id", [] {
      return http_outcome(daemon_->request("DELETE", "/v1/containers/..%2F..%2Fetc"));
    }, {"4"});
  // -- status socket: resize bodies (quantities) --
  D("negative cpu", [] { return post_resize("c-ok", resize_body("-1", "128Mi")); }, {"400", "-1"});
  D("negative memory", [] { return post_resize("c-ok", resize_body("1", "-128Mi")); }, {"400", "-128Mi"});
  D("memory beyond int64", [] { return post_resize("c-ok", resize_body("1", "99999999999999999999Ei")); },
    {"400", "99999999999999999999Ei"});
  D("cpu 1e400", [] { return post_resize("c-ok", resize_body("1e400", "1Gi")); }, {"400", "1e400"});
  D("garbage quantity", [] { return post_resize("c-ok", resize_body("lots", "1Gi")); }, {"400", "lots"});
  D("unknown suffix", [] { return post_resize("c-ok", resize_body("1", "12Qi")); }, {"400", "12Qi"});
  D("hex quantity", [] { return post_resize("c-ok", resize_body("0x10", "1Gi")); }, {"400", "0x10"});
  D("empty quantity", [] { return post_resize("c-ok", resize_body("", "1Gi")); }, {"400"});
  D("quantity is an object", [] {
      return post_resize("c-ok", R"({"resources":{"requests":{"cpu":{"$gt":1}}}})");
    }, {"400", "cpu"});
  D("unknown resize policy", [] {
      return post_resize("c-ok", R"({"resources":{"requests":{"cpu":"1"}},)"
                                 R"("resizePolicy":[{"resourceName":"cpu","restartPolicy":"Maybe"}]})");
    }, {"400", "Maybe"});
  // -- status socket: cgroup paths the daemon would write through --
  D("cgroup path through a symlink", [] {
      auto reg = post_registration({{"id", "c-evil"}, {"podUid", "pevil"},
                                    {"cgroupPath", "/kubepods/burstable/podevil"},
                                    {"resources", {{"requests", {{"cpu", "1"}}}}}});
      if (reg.refused) return reg;
      auto r = http_outcome(daemon_->request("POST", "/v1/containers/c-evil/resize", kGrowCpu));
      // Refused or not, nothing outside the cgroup root changed.
      std::ifstream in(daemon_->outside() + "/memory.max");
      std::string v;
      std::getline(in, v);
      if (v != "max") return Outcome{false, "wrote through the symlink: memory.max=" + v};
      return r;
    }, {"podevil"});
  D("cgroup path with ..", [] {
      auto reg = post_registration({{"id", "c-dots"}, {"podUid", "pdots"},
                                    {"cgroupPath", "/kubepods/../../outside"},
                                    {"resources", {{"requests", {{"cpu", "1"}}}}}});
      if (reg.refused) return reg;
      return http_outcome(daemon_->request("POST", "/v1/containers/c-dots/resize", kGrowCpu));
    }, {".."});
  // -- status socket: the transport itself --
  D("100 MB body", [] {
      std::string raw = "POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 104857600\r\n\r\n";
      raw += std::string(100u << 20, 'x');
      return http_outcome(daemon_->exchange(raw), /*close_ok=*/true);
    }, {});
  D("100 MB chunked body", [] {
      std::string raw = "POST /v1/containers HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n\r\n";
      const std::string chunk = "100000\r\n" + std::string(0x100000, 'y') + "\r\n";
      for (int i = 0; i < 100; i++) raw += chunk;
      raw += "0\r\n\r\n";
      return http_outcome(daemon_->exchange(raw), true);
    }, {});
  D("Content-Length larger than 2^64", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\n"
                                            "Content-Length: 99999999999999999999999\r\n\r\n{}"), true);
    }, {});
  D("negative Content-Length", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\n"
                                            "Content-Length: -5\r\n\r\n{}"), true);
    }, {});
  D("not HTTP at all", [] {
      return http_outcome(daemon_->exchange(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) +
                                            std::string(4000, '\xff')), true);
    }, {});
  D("1 MB header line", [] {
      return http_outcome(daemon_->exchange("GET /healthz HTTP/1.1\r\nHost: p\r\nX-A: " + std::string(1 << 20, 'a') +
                                            "\r\n\r\n"), true);
    }, {});
  D("client connects and never sends", [] {
      const int fd = daemon_->connect_fd();
      if (fd < 0) return Outcome{false, "cannot connect"};
      // While it idles, others are served.
      const bool ok = daemon_->healthy();
      ::close(fd);
      return ok ? Outcome{true, "idle client did not block /healthz"} : Outcome{false, "blocked"};
    }, {"idle"});
  D("200 idle clients of one read-only uid at once", [] {
      if (::geteuid() != 0) return Outcome{false, "needs root to fork a client as uid 65534"};
      testing::SlowOptions o;
      o.socket = daemon_->socket();
      o.clients = 200;
      o.duration = std::chrono::milliseconds(1500);
      o.drip = std::chrono::milliseconds(10000);  // connect, send half a head, then idle
      testing::SlowClients idle(o);
      if (!idle.start()) return Outcome{false, "the idle clients did not start (fork failed or no connect in 10 s)"};
      const bool ok = daemon_->healthy();
      auto r = idle.finish();
      return ok ? Outcome{true, fmt::format("idle clients did not block /healthz ({} refused: {})", r.refused_503,
                                            r.sample)}
                : Outcome{false, "blocked"};
    }, {"idle", "uid 65534"});
  D("half-written request, then silence", [] {
      const int fd = daemon_->connect_fd();
      if (fd < 0) return Outcome{false, "cannot connect"};
      const std::string half = "POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 100\r\n\r\n{\"id\":";
      (void)::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
      const bool ok = daemon_->healthy();
      // The daemon times the client out (http.timeout_seconds) and hangs up.
      const std::string rest = Daemon::read_all(fd);
      ::close(fd);
      if (!ok) return Outcome{false, "blocked"};
      return Outcome{true, "half request timed out: " + (rest.empty() ? "closed" : rest.substr(0, 12))};
    }, {"timed out"});
  D("client vanishes mid-body", [] {
      const int fd = daemon_->connect_fd();
      if (fd < 0) return Outcome{false, "cannot connect"};
      const std::string half = "POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 100000\r\n\r\n{\"id\":\"";
      (void)::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
      ::close(fd);
      return Outcome{true, "closed mid-body"};
    }, {"closed"});
  D("unknown method", [] { return http_outcome(daemon_->request("BREW", "/v1/containers")); }, {"4"});

  // -- lockout by slow clients --
  D("header dripped one line per 500 ms", [] {
      const int fd = daemon_->connect_fd();
      if (fd < 0) return Outcome{false, "cannot connect"};
      const auto t0 = std::chrono::steady_clock::now();
      std::string got;
      (void)::send(fd, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL);
      // Up to 8 s of dripping against a 3 s deadline: an idle timer never fires.
      for (int i = 0; i < 16 && got.empty(); i++) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 500) > 0) {
          got = Daemon::read_all(fd);
          break;
        }
        (void)::send(fd, "X-Drip: 1\r\n", 11, MSG_NOSIGNAL);
      }
      ::close(fd);
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      auto r = Daemon::parse(got);
      return Outcome{r.status == 408 && ms < 4500, fmt::format("{} {} after {} ms", r.status, r.body, ms)};
    }, {"408", "head", "3000 ms"});
  D("body dripped one byte per 500 ms", [] {
      const int fd = daemon_->connect_fd();
      if (fd < 0) return Outcome{false, "cannot connect"};
      const auto t0 = std::chrono::steady_clock::now();
      std::string head = "POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 100\r\n\r\n";
      (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
      std::string got;
      for (int i = 0; i < 16 && got.empty(); i++) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 500) > 0) {
          got = Daemon::read_all(fd);
          break;
        }
        (void)::send(fd, " ", 1, MSG_NOSIGNAL);
      }
      ::close(fd);
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      auto r = Daemon::parse(got);
      return Outcome{r.status == 408 && ms < 4500, fmt::format("{} {} after {} ms", r.status, r.body, ms)};
    }, {"408", "body"});
  D("70 slow header clients of a read-only uid (max_connections 64)", [] { return under_slow_clients(false, 70); },
    {"0 failed", "uid 65534"});
  D("70 slow body clients of a writer uid", [] { return under_slow_clients(true, 70); },
    {"0 failed", "uid 65533"});

  // -- NUL and non-canonical paths --
  D("percent-encoded NUL in a GET id", [] { return http_outcome(daemon_->request("GET", "/v1/containers/c-ok%00x")); },
    {"400", "c-ok%00x", "NUL"});
  D("percent-encoded NUL in a resize path", [] {
      return http_outcome(daemon_->request("POST", "/v1/containers/c-ok%00junk/resize", kGrowCpu));
    }, {"400", "c-ok%00junk", "NUL"});
  D("raw NUL in the request line", [] {
      return http_outcome(daemon_->exchange(std::string("GET /v1/containers/c-ok\0x HTTP/1.1\r\nHost: p\r\n\r\n", 47)));
    }, {"400", "NUL", "/v1/containers/c-ok"});
  D("percent-encoded dot segment", [] { return http_outcome(daemon_->request("GET", "/v1/containers/%2e%2e")); },
    {"400", "%2e%2e", "'..'"});
  D("percent-encoded slash", [] { return http_outcome(daemon_->request("GET", "/v1/containers/a%2Fb")); },
    {"400", "a%2Fb", "'/'"});
  D("double slash", [] { return http_outcome(daemon_->request("GET", "/v1//containers")); },
    {"400", "/v1//containers", "empty segment"});
  D("trailing slash", [] { return http_outcome(daemon_->request("GET", "/v1/containers/c-ok/")); },
    {"400", "c-ok/"});
  D("malformed percent-escape", [] { return http_outcome(daemon_->request("GET", "/v1/containers/c%zz")); },
    {"400", "c%zz"});
  D("absolute-form target", [] { return http_outcome(daemon_->request("GET", "http://podshim/healthz")); },
    {"400", "http://podshim/healthz"});
  D("Cyrillic look-alike in a path id", [] { return http_outcome(daemon_->request("GET", "/v1/containers/c-%D0%BEk")); },
    {"400", "container id"});
  D("fullwidth look-alike in a registered id", [] { return post_registration({{"id", "c\xef\xbc\x8dok"}}); },
    {"400", "container id"});
  D("container id of 129 characters", [] { return post_registration({{"id", std::string(129, 'a')}}); },
    {"400", "longer than 128"});

  // -- ambiguous requests --
  D("duplicate JSON key in a resize", [] {
      return post_resize("c-ok", R"({"resources":{"limits":{"memory":"128Mi","memory":"200Mi"}}})");
    }, {"400", "'memory'"});
  D("duplicate JSON key in a registration", [] {
      return http_outcome(daemon_->request("POST", "/v1/containers",
                                           R"({"id":"c-ok","id":"c-other","cgroupPath":"/kubepods/burstable/podp1/c1"})"));
    }, {"400", "'id'"});
  D("two conflicting Content-Length", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n"
                                            "Content-Length: 40\r\n\r\n{}"));
    }, {"400", "Content-Length"});
  D("repeated equal Content-Length", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n"
                                            "Content-Length: 2\r\n\r\n{}"));
    }, {"400", "repeated Content-Length"});
  D("Content-Length list", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 2, 2\r\n\r\n{}"));
    }, {"400", "2, 2"});
  D("Content-Length and chunked together", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n"
                                            "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"));
    }, {"400", "Content-Length", "Transfer-Encoding"});
  D("Transfer-Encoding gzip", [] {
      return status_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: gzip\r\n\r\nxx"),
                            501);
    }, {"501", "gzip"});
  D("Transfer-Encoding gzip, chunked", [] {
      return status_outcome(
          daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"), 501);
    }, {"501", "gzip, chunked"});
  D("unknown method BREW answers 405 with Allow", [] {
      std::string t = daemon_->exchange_text("BREW /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
      auto r = Daemon::parse(t);
      bool allow = t.find("\r\nAllow: GET, HEAD\r\n") != std::string::npos;
      return Outcome{r.status == 405 && allow, t.substr(0, 300)};
    }, {"405", "BREW", "Allow: GET, HEAD"});
  D("lower-case method", [] {
      std::string t = daemon_->exchange_text("get /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
      auto r = Daemon::parse(t);
      return Outcome{r.status == 405 && t.find("\r\nAllow: ") != std::string::npos, t.substr(0, 300)};
    }, {"405", "'get'"});
  D("HTTP/2.0 request line", [] { return status_outcome(daemon_->exchange("GET /healthz HTTP/2.0\r\n\r\n"), 505); },
    {"505", "HTTP/2.0"});
  D("bare LF line ends", [] { return http_outcome(daemon_->exchange("GET /healthz HTTP/1.1\nHost: p\n\n\r\n\r\n")); },
    {"400", "LF"});
  D("folded header line", [] {
      return http_outcome(daemon_->exchange("GET /healthz HTTP/1.1\r\nHost: p\r\nX-A: 1\r\n  continued\r\n\r\n"));
    }, {"400", "folded"});
  D("space before the header colon", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length : 2\r\n\r\n{}"));
    }, {"400", "Content-Length "});
  D("unsupported Expect", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}"));
    }, {"417", "200-ok"});

  // -- header and body limits per method --
  D("GET with a 20 KB header", [] {
      return http_outcome(daemon_->exchange("GET /healthz HTTP/1.1\r\nHost: p\r\nX-A: " + std::string(20 << 10, 'a') + "\r\n\r\n"));
    }, {"431", "16384"});
  D("POST with a 20 KB header", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nX-A: " + std::string(20 << 10, 'a') +
                                            "\r\nContent-Length: 2\r\n\r\n{}"));
    }, {"431"});
  D("GET with a body", [] {
      return http_outcome(daemon_->exchange("GET /healthz HTTP/1.1\r\nHost: p\r\nContent-Length: 5\r\n\r\nhello"));
    }, {"413", "GET requests take no body"});
  D("DELETE with a chunked body", [] {
      return http_outcome(daemon_->exchange("DELETE /v1/containers/c-x HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n\r\n"
                                            "1\r\nx\r\n0\r\n\r\n"));
    }, {"413", "DELETE"});
  D("POST body one byte over max_body_bytes", [] {
      return http_outcome(daemon_->exchange("POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 1048577\r\n\r\n{"));
    }, {"413", "1048576"});

  // -- pipelining and disconnects --
  D("pipelined good, NUL path, good", [] {
      return pipelined("GET /healthz HTTP/1.1\r\nHost: p\r\n\r\nGET /v1/containers/c-ok%00x HTTP/1.1\r\nHost: p\r\n\r\n"
                       "GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n", {200, 400});
    }, {"[200,400]", "NUL"});
  D("pipelined good, unknown id, duplicate key, good", [] {
      return pipelined("GET /healthz HTTP/1.1\r\nHost: p\r\n\r\nGET /v1/containers/nope HTTP/1.1\r\nHost: p\r\n\r\n"
                       "POST /v1/containers/c-ok/resize HTTP/1.1\r\nHost: p\r\nContent-Length: 31\r\n\r\n"
                       "{\"resources\":{},\"resources\":{}}"
                       "GET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n", {200, 404, 400, 200});
    }, {"[200,404,400,200]"});
  D("pipelined good then a smuggled second Content-Length", [] {
      return pipelined("GET /healthz HTTP/1.1\r\nHost: p\r\n\r\nPOST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 0\r\n"
                       "Content-Length: 30\r\n\r\nGET /v1/containers HTTP/1.1\r\nHost: p\r\n\r\n", {200, 400});
    }, {"[200,400]", "Content-Length"});
  D("client vanishes mid-chunk", [] {
      const int fd = daemon_->connect_fd();
      if (fd < 0) return Outcome{false, "cannot connect"};
      const std::string half = "POST /v1/containers HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n{\"id\":";
      (void)::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
      ::close(fd);
      return Outcome{true, "closed mid-chunk"};
    }, {"closed"});

  // -- registration checks the cgroup path when it is registered --
  D("registered cgroup path with ..", [] {
      return post_registration({{"id", "c-dots2"}, {"cgroupPath", "/kubepods/../../../../etc"}});
    }, {"400", "/kubepods/../../../../etc", "'..'"});
  D("registered cgroup path relative", [] { return post_registration({{"id", "c-rel"}, {"cgroupPath", "kubepods/x"}}); },
    {"400", "kubepods/x"});
  D("registered cgroup path with NUL", [] {
      return post_registration({{"id", "c-nul"}, {"cgroupPath", std::string("/kubepods/a\0b", 13)}});
    }, {"400", "NUL"});
  D("registered cgroup path through a symlink", [] {
      return post_registration({{"id", "c-link"}, {"cgroupPath", "/kubepods/burstable/podevil"}});
    }, {"400", "podevil", "symlink"});
  D("registered cgroup that does not exist", [] {
      return post_registration({{"id", "c-none"}, {"cgroupPath", "/kubepods/burstable/podp1/nope"}});
    }, {"400", "nope", "does not exist"});
  D("registered cgroup path that is a file", [] {
      return post_registration({{"id", "c-file"}, {"cgroupPath", "/kubepods/burstable/podp1/c1/cpu.max"}});
    }, {"400", "cpu.max", "not a directory"});
  D("registered pod cgroup path with ..", [] {
      return post_registration({{"id", "c-pod"}, {"podUid", "p-new"}, {"podCgroupPath", "/kubepods/../x"}});
    }, {"400", "podCgroupPath", "'..'"});

  // -- NRI: bytes on the plugin's socket --
  N("half-written mux header, then close", [] { return nri_->inject(std::string("\0\0\0", 3), true); },
    {});
  N("half-written ttrpc frame, then close", [] {
      return nri_->inject(mux(1, ttrpc_header(200, 1001, 1) + "partial"), true);
    }, {});
  N("unknown mux connection id", [] { return nri_->inject(mux(7, "hello"), false); },
    {"unknown connection id 7"});
  N("mux frame claiming 4 GiB, then close", [] {
      std::string h;
      nri::put_u32be(h, 1);
      nri::put_u32be(h, 0xFFFFFFFFu);
      struct rusage before{};
      ::getrusage(RUSAGE_SELF, &before);
      auto o = nri_->inject(h + std::string(64 << 10, 'z'), true);
      struct rusage after{};
      ::getrusage(RUSAGE_SELF, &after);
      if (after.ru_maxrss - before.ru_maxrss > 256 * 1024) return Outcome{false, "allocated the claim"};
      return o;
    }, {});
  N("ttrpc length claim of 4 GiB", [] {
      struct rusage before{};
      ::getrusage(RUSAGE_SELF, &before);
      auto o = nri_->inject(mux(1, ttrpc_header(0xFFFFFFF0u, 1001, 1) + std::string(3000, 'q')), true);
      struct rusage after{};
      ::getrusage(RUSAGE_SELF, &after);
      if (after.ru_maxrss - before.ru_maxrss > 256 * 1024) return Outcome{false, "allocated the claim"};
      return o;
    }, {});
  N("unknown ttrpc message type", [] { return nri_->inject(mux(1, ttrpc_header(0, 1001, 9)), false); },
    {"unknown message type 9"});
  N("HTTP request on the NRI socket", [] {
      return nri_->inject("GET / HTTP/1.1\r\nHost: nri\r\n\r\n", false);
    }, {"unknown connection id"});
  N("request payload that is not protobuf", [] { return nri_->call("CreateContainer", "\xff\xff\xff\xff"); },
    {"CreateContainer"});
  N("unknown method", [] { return nri_->call("DeleteEverything", ""); }, {"DeleteEverything"});

  // -- hook: OCI state on stdin --
  L("state is not JSON", [] { return of(hook::parse_state("{\"id\": ")); }, {});
  L("state is a JSON string", [] { return of(hook::parse_state("\"ctr1\"")); }, {});
  L("state id empty", [] { return state_with("id", ""); }, {"id"});
  L("state without id", [] { return state_with("id", nullptr); }, {"id"});
  L("state id with control bytes", [] { return state_with("id", "a\nb"); }, {"id"});
  L("state bundle relative", [] { return state_with("bundle", "run/bundle"); }, {"run/bundle"});
  L("state bundle with ..", [] { return state_with("bundle", "/run/../etc"); }, {"/run/../etc"});
  L("state status unknown", [] { return state_with("status", "pwned"); }, {"pwned"});
  L("state pid negative", [] { return state_with("pid", -7); }, {"pid"});
  L("state pid a string", [] { return state_with("pid", "7"); }, {"pid"});
  L("state annotations not strings", [] { return state_with("annotations", json{{"a", json::array()}}); },
    {"a"});
  L("state of 2 MiB", [] {
      json s = good_state();
      s["annotations"] = {{"big", std::string(2 << 20, 'x')}};
      hook::Options o;
      return of(hook::run(o, s.dump(), hook::Deps{}));
    }, {});
  // -- hook: config.json and podshim's annotations (hooks.d-style garbage) --
  L("config device type unknown", [] {
      json c = good_config();
      c["linux"]["devices"][0]["type"] = "x";
      return of(hook::parse_config(c.dump()));
    }, {"x"});
  L("config mounts not an array", [] {
      json c = good_config();
      c["mounts"] = "all";
      return of(hook::parse_config(c.dump()));
    }, {"mounts"});
  L("injected-devices annotation garbage", [] {
      return annotations_with(std::string(hook::kInjectedDevicesAnnotation), "gpu0;rm -rf /");
    }, {std::string(hook::kInjectedDevicesAnnotation)});
  L("injected-devices host path relative", [] {
      return annotations_with(std::string(hook::kInjectedDevicesAnnotation),
                              R"([{"path":"/dev/gpu0","hostPath":"dev/null"}])");
    }, {"dev/null"});
  L("injected-mounts annotation not an array", [] {
      return annotations_with(std::string(hook::kInjectedMountsAnnotation), R"({"/data":1})");
    }, {std::string(hook::kInjectedMountsAnnotation)});
  L("injected-mounts names a mount config.json lacks", [] {
      return annotations_with(std::string(hook::kInjectedMountsAnnotation), R"(["/etc"])");
    }, {"/etc"});
  L("kube identity pod uid with /", [] {
      return of(hook::kube_identity({{"io.kubernetes.pod.uid", "../../x"}}));
    }, {"../../x"});
  L("hook arguments unknown stage", [] { return of(hook::parse_args({"poststart-now"})); },
    {"poststart-now"});
  // -- device nodes: CDI specs and the hook's check --
  L("hook: host device is a regular file", [] { return hook_device_check("/dev/fake", "c"); },
    {"/dev/fake"});
  L("hook: host device through a symlink", [] { return hook_device_check("/dev/link", "c"); },
    {"/dev/link"});
  L("hook: host device with ..", [] { return hook_device_check("/dev/../dev/fake", "c"); },
    {"/dev/../dev/fake"});
  L("hook: host device is a FIFO for a char device", [] { return hook_device_check("/dev/fifo", "c"); },
    {"/dev/fifo"});
  L("CDI: device node at a regular file", [] { return cdi_node("@root/dev/fake"); }, {"/dev/fake"});
  L("CDI: device node through a symlink", [] { return cdi_node("@root/dev/link"); }, {"/dev/link"});
  L("CDI: device node that does not exist", [] { return cdi_node("/dev/podshim-no-such-node"); },
    {"/dev/podshim-no-such-node"});
  L("CDI: spec with device path ..", [] {
      return spec_outcome(cdi::parse_spec(
          R"({"cdiVersion":"0.6.0","kind":"vendor.com/cls","devices":[{"name":"d",)"
          R"("containerEdits":{"deviceNodes":[{"path":"../../dev/sda"}]}}]})", cdi::Format::Json));
    }, {"../../dev/sda"});
  L("CDI: qualified name with ../", [] { return of(cdi::parse_qualified_name("vendor.com/gpu=../x")); },
    {"../x"});
  L("CDI: YAML bomb of aliases", [] {
      std::string y = "a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n";
      for (char c = 'b'; c <= 'k'; c++)
        y += std::string(1, c) + ": &" + c + " [*" + char(c - 1) + ",*" + char(c - 1) + ",*" + char(c - 1) +
             ",*" + char(c - 1) + ",*" + char(c - 1) + ",*" + char(c - 1) + "]\n";
      y += "cdiVersion: 0.6.0\nkind: vendor.com/cls\ndevices: *k\n";
      return spec_outcome(cdi::parse_spec(y, cdi::Format::Yaml));
    }, {});
  // -- mount options smuggling SELinux contexts --
  L("mount option context=", [] { return mount_options({"rbind", "context=\"system_u:object_r:shadow_t:s0\""}); },
    {"context="});
  L("context= hidden in a comma list", [] { return mount_options({"ro,context=system_u:object_r:etc_t:s0"}); },
    {"context="});
  L("upper-case FSCONTEXT=", [] { return mount_options({" FSCONTEXT=x:y:z:s0"}, "tmpfs"); },
    {"FSCONTEXT="});
  L("rootcontext= on tmpfs", [] { return mount_options({"rootcontext=x:y:z:s0"}, "tmpfs"); },
    {"rootcontext="});
  L("defcontext=", [] { return mount_options({"nosuid", "defcontext=x:y:z:s0"}); }, {"defcontext="});
  // -- quantities --
  L("hook: container id of 300 characters", [] { return state_with("id", std::string(300, 'a')); },
    {"longer than 128"});
  L("hook: Cyrillic look-alike in the id", [] { return state_with("id", "\xd1\x81tr1"); }, {"[A-Za-z0-9_.-]"});
  L("hook: id starting with '.'", [] { return state_with("id", ".x"); }, {"'.x'"});
  L("cpu -1", [] { return of(quantity::parse_cpu_milli("-1")); }, {"-1"});
  L("memory 1e999", [] { return of(quantity::parse_memory_bytes("1e999")); }, {"1e999"});
  L("memory 9223372036854775808", [] { return of(quantity::parse_memory_bytes("9223372036854775808")); },
    {"9223372036854775808"});
  L("memory 1.5.5Gi", [] { return of(quantity::parse_memory_bytes("1.5.5Gi")); }, {"1.5.5Gi"});
  L("cpu with NUL", [] { return of(quantity::parse_cpu_milli(std::string("1\0m", 3))); }, {});
  L("cpu infinity", [] { return of(quantity::parse_cpu_milli("Inf")); }, {"Inf"});
  // -- the cgroup engine on a fake tree --
  L("engine: cgroup path ../..", [] { return engine_resize("../../etc"); }, {"../../etc"});
  L("engine: cgroup path with .. inside", [] { return engine_resize("kubepods/../../x"); },
    {"kubepods/../../x"});
  L("engine: cgroup path through a symlink", [] { return engine_resize("kubepods/podlink"); },
    {"kubepods/podlink"});
  // Absolute paths are taken beneath the cgroup root, as runc's cgroupfs
  // driver does: "/etc" is <root>/etc, which does not exist.
  L("engine: absolute cgroup path", [] { return engine_resize("/etc"); }, {"'etc'"});
  return t;
}

void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

class Hostile : public ::testing::TestWithParam<Row> {};

TEST_P(Hostile, RefusedWithAClearError) {
  const Row& row = GetParam();
  if (row.kind == Kind::Daemon && !daemon_->available()) GTEST_SKIP() << "PODSHIM_PODSHIMD not set";
  Outcome o = row.run();
  EXPECT_TRUE(o.refused) << row.name << ": " << o.message;
  EXPECT_FALSE(o.message.empty()) << row.name;
  for (const auto& s : row.must_say) {
    EXPECT_NE(o.message.find(s), std::string::npos)
        << row.name << ": the error should mention '" << s << "': " << o.message;
  }
  if (row.kind == Kind::Daemon) {
    ASSERT_TRUE(daemon_->alive()) << "podshimd exited after: " << row.name;
    EXPECT_TRUE(daemon_->healthy()) << "podshimd stopped serving after: " << row.name;
  }
  if (row.kind == Kind::Nri) {
    EXPECT_TRUE(nri_->ready()) << "plugin not ready after: " << row.name;
  }
}

std::string row_name(const ::testing::TestParamInfo<Row>& info) {
  std::string n = std::to_string(info.index) + "_";
  for (char c : info.param.name) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Table, Hostile, ::testing::ValuesIn(table()), row_name);

TEST(HostileTable, HasAtLeastFiftyRowsAcrossEveryInterface) {
  auto t = table();
  EXPECT_GE(t.size(), 50u);
  size_t d = 0, n = 0, l = 0;
  for (const auto& r : t) (r.kind == Kind::Daemon ? d : r.kind == Kind::Nri ? n : l)++;
  EXPECT_GE(d, 10u);
  EXPECT_GE(n, 5u);
  EXPECT_GE(l, 10u);
}

class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    log::init(log::Target::Null, log::Level::Err);
    signal(SIGPIPE, SIG_IGN);
    daemon_ = new Daemon();
    // c-ok exists, so a path that is truncated to it would be answered 200.
    if (daemon_->available()) (void)daemon_->request("POST", "/v1/containers", registration({}));
    nri_ = new NriRig();
  }
  void TearDown() override {
    delete nri_;
    delete daemon_;
  }
};

const auto* env_ = ::testing::AddGlobalTestEnvironment(new Env);

}  // namespace
}  // namespace podshim
