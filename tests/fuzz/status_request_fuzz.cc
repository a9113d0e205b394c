// Fuzzes the whole request path of the status socket: bytes on a real unix
// socket -> podshimd's Server (shim/status/server.cc) -> the HTTP reader
// (shim/status/http.cc) -> access control -> the router and handlers
// (shim/status/api.cc) -> the resize manager -> the cgroup engine on a fake
// cgroup tree. Everything but the kernel is the daemon's own code, on one
// sd-event loop run from this thread.
//
// Input: byte 0 picks how the rest is cut into writes (1 to 4 pieces, at
// points derived from the input), the rest is what a client sends; the
// client then half-closes and reads until the server closes.
//
// Oracles, each a crash (__builtin_trap) for libFuzzer:
//  - every answer begins "HTTP/1.1 NNN " (or the server closed without one,
//    for a request it never saw complete);
//  - no 5xx except 503 (connection limits);
//  - the server answers /healthz afterwards;
//  - the container's cgroup files change only after a 2xx answer.
// ASan/UBSan/LSan (tools/fuzz) catch the rest.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "base/log.h"
#include "cgroup/engine.h"
#include "shim/core/engine_actuator.h"
#include "shim/core/metrics.h"
#include "shim/core/resize.h"
#include "shim/core/state.h"
#include "shim/status/server.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/testutil/files.h"

using namespace podshim;

namespace {

struct World {
  sd_event* loop = nullptr;
  cgroup::testing::FakeTree* tree = nullptr;
  std::unique_ptr<core::Store> store;
  std::unique_ptr<core::EngineActuator> actuator;
  std::unique_ptr<core::ResizeManager> resize;
  core::Metrics metrics;
  std::unique_ptr<status::Server> server;
  std::string sock;
};
World* world = nullptr;

std::string cgroup_state() {
  const std::string d = world->tree->cg_root() + "/kubepods/burstable/podp1/c1/";
  using testutil::read_file;
  return read_file(d + "memory.max") + read_file(d + "cpu.max") + read_file(d + "cpu.weight") +
         read_file(d + "memory.high");
}

int connect_client() {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, world->sock.c_str(), world->sock.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) __builtin_trap();
  return fd;
}

// Sends the pieces (running the server's loop between them), half-closes,
// and reads until the server closes; returns what was read.
std::string exchange(const std::string_view* pieces, size_t n) {
  int fd = connect_client();
  std::string out;
  char buf[65536];
  auto pump = [&] {
    sd_event_run(world->loop, 0);
    for (;;) {
      ssize_t r = recv(fd, buf, sizeof(buf), 0);
      if (r > 0) {
        out.append(buf, static_cast<size_t>(r));
        continue;
      }
      return r == 0;  // closed
    }
  };
  bool closed = false;
  for (size_t i = 0; i < n && !closed; ++i) {
    std::string_view p = pieces[i];
    for (int spins = 0; !p.empty() && spins < 10000; ++spins) {
      ssize_t w = send(fd, p.data(), p.size(), MSG_NOSIGNAL);
      if (w > 0) p.remove_prefix(static_cast<size_t>(w));
      else if (w < 0 && errno != EAGAIN) break;
      if ((closed = pump())) break;
    }
    if (!closed) closed = pump();
  }
  shutdown(fd, SHUT_WR);
  // The server closes at once after an answer or on EOF; the bound only
  // stops a bug from hanging the fuzzer (it is then a timeout finding).
  for (int spins = 0; !closed && spins < 100000; ++spins) {
    sd_event_run(world->loop, 1000);
    closed = pump();
  }
  close(fd);
  return out;
}

void setup() {
  log::init(log::Target::Null, log::Level::Err);
  world = new World();
  if (sd_event_new(&world->loop) < 0) __builtin_trap();
  world->tree = new cgroup::testing::FakeTree();
  world->tree->add("kubepods");
  world->tree->add("kubepods/burstable");
  world->tree->add("kubepods/burstable/podp1");
  world->tree->add("kubepods/burstable/podp1/c1");
  cgroup::EngineOptions eo;
  eo.cgroup_root = world->tree->cg_root();
  eo.state_dir = world->tree->state();
  eo.driver = cgroup::DriverKind::Cgroupfs;
  eo.shrink_timeout = std::chrono::milliseconds(1);
  auto e = cgroup::Engine::create(eo);
  if (!e) __builtin_trap();
  world->actuator = std::make_unique<core::EngineActuator>(std::move(*e));
  world->store = core::Store::in_memory();
  world->resize = std::make_unique<core::ResizeManager>(*world->store, *world->actuator,
                                                        core::NodeAllocatable{8000, 16LL << 30}, &world->metrics);
  status::ServerOptions o;
  world->sock = world->tree->state() + "/s.sock";
  o.socket_path = world->sock;
  o.policy = *status::AccessPolicy::create(core::default_access_rules(), "", "");
  o.timeout = std::chrono::seconds(2);
  o.max_body_bytes = 64 << 10;
  status::ServerDeps deps;
  deps.store = world->store.get();
  deps.resize = world->resize.get();
  deps.metrics = &world->metrics;
  deps.cgroup_root = world->tree->cg_root();
  deps.cgroup_driver = cgroup::DriverKind::Cgroupfs;
  auto srv = status::Server::start(world->loop, o, deps);
  if (!srv) __builtin_trap();
  world->server = std::move(*srv);
}

// A known container to resize, registered again before every input (an
// input may have deleted it).
void register_c1() {
  static const std::string body =
      R"({"id":"c1","podUid":"p1","cgroupPath":"/kubepods/burstable/podp1/c1",)"
      R"("resources":{"requests":{"cpu":"500m","memory":"64Mi"},"limits":{"cpu":"1","memory":"256Mi"}}})";
  static const std::string req = "POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\n\r\n" + body;
  std::string_view p = req;
  std::string r = exchange(&p, 1);
  if (r.rfind("HTTP/1.1 20", 0) != 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!world) setup();
  if (size < 2) return 0;
  register_c1();
  const std::string before = cgroup_state();
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t pieces = 1 + data[0] % 4;
  std::string_view parts[4];
  size_t n = 0, off = 0;
  for (size_t i = 0; i < pieces; ++i) {
    size_t len = i + 1 == pieces ? in.size() - off : (in.size() - off) / (pieces - i) + (data[0] >> 2) % 3;
    len = std::min(len, in.size() - off);
    parts[n++] = in.substr(off, len);
    off += len;
  }
  const std::string out = exchange(parts, n);
  bool any_2xx = false;
  for (size_t p = out.find("HTTP/1."); p != std::string::npos; p = out.find("HTTP/1.1 ", p + 1)) {
    if (out.compare(p, 9, "HTTP/1.1 ") != 0 || p + 12 > out.size()) __builtin_trap();
    const int status = std::atoi(out.substr(p + 9, 3).c_str());
    if (status < 100 || status > 599) __builtin_trap();
    // 5xx only where it is a refusal of the request's kind: 501 (a
    // Transfer-Encoding other than chunked), 503 (no slot), 505 (HTTP/2.0
    // and the like); 500 and the rest would be podshimd's own failure.
    if (status >= 500 && status != 501 && status != 503 && status != 505) __builtin_trap();
    if (status >= 200 && status < 300) any_2xx = true;
    break;  // later "HTTP/1.1 " may be inside a body; the first is the framing
  }
  if (!out.empty() && out.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
  if (out.find("HTTP/1.1 2") != std::string::npos) any_2xx = true;
  // Settle any resize still in flight, then compare.
  for (int i = 0; i < 100 && sd_event_run(world->loop, 0) > 0; ++i) {
  }
  if (!any_2xx && cgroup_state() != before) __builtin_trap();
  static const std::string health = "GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n";
  std::string_view h = health;
  if (exchange(&h, 1).rfind("HTTP/1.1 200", 0) != 0) __builtin_trap();
  return 0;
}
