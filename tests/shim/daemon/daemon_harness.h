// Spawns podshimd --nri=off with a temp state dir, socket and a fake cgroup
// root (never /sys/fs/cgroup), for the daemon tests and the benchmark.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "shim/status/client.h"

namespace podshim::testing {

inline std::string make_temp_dir() {
  char tmpl[] = "/tmp/podshimd-test-XXXXXX";
  return mkdtemp(tmpl);
}

// Seeds a fake cgroup v2 directory with the files the engine reads and
// writes. memory.high holds what the kernel's does until someone writes it
// ("max"): a memory decrease clamps it and restores what it read, and an
// empty file made every decrease an error.
inline void fake_cgroup(const std::string& root, const std::string& rel) {
  std::string d = root + rel;
  std::filesystem::create_directories(d);
  auto put = [&](const char* f, const char* v) { std::ofstream(d + "/" + f) << v; };
  put("cpu.weight", "");
  put("cpu.max", "");
  put("memory.max", "");
  put("memory.high", "max\n");
  put("memory.min", "");
  put("memory.low", "");
  put("memory.current", "1000\n");
  put("memory.stat", "anon 0\nfile 0\nshmem 0\n");
  put("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
}

// podshimd as the daemon tests, the config-effect tests and the benchmark
// run it: --nri=off, --socket, --state-dir and --cgroup-root all under
// `dir` unless a test turns one off (to test the config key that replaces
// it), a config file (built-in defaults unless given), its log in
// <dir>/daemon.log.
class Daemon {
 public:
  explicit Daemon(std::string dir, std::vector<std::string> extra = {})
      : dir_(std::move(dir)), extra_(std::move(extra)) {}
  ~Daemon() { stop(SIGKILL); }

  // Set before start(). The config file's text (<dir>/config.yaml), unless
  // `extra` brings its own --config.
  void set_config(std::string yaml) { yaml_ = std::move(yaml); }
  // The fake cgroup root elsewhere than <dir>/cg (the benchmark puts it on a
  // tmpfs, as cgroupfs is in memory).
  void set_cgroot(std::string root) { cgroot_ = std::move(root); }
  void set_socket(std::string path) { socket_ = std::move(path); }
  void set_state(std::string dir) { state_ = std::move(dir); }
  // The podshimd to run instead of $PODSHIMD (the benchmark's baseline).
  void set_binary(std::string bin) { bin_ = std::move(bin); }
  bool flag_socket = true, flag_state = true, flag_cgroot = true, flag_nri_off = true;
  std::vector<std::string> env;  // NAME=VALUE, for podshimd only

  std::string socket() const { return socket_.empty() ? dir_ + "/s.sock" : socket_; }
  std::string state() const { return state_.empty() ? dir_ + "/state" : state_; }
  std::string cgroot() const { return cgroot_.empty() ? dir_ + "/cg" : cgroot_; }
  std::string log_path() const { return dir_ + "/daemon.log"; }
  std::string log() const {
    std::ifstream in(log_path());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  pid_t pid() const { return pid_; }

  // Starts podshimd and waits (bounded) until /healthz answers; false when
  // it exited or did not answer within ~30 s.
  bool start() {
    const char* env_bin = getenv("PODSHIMD");
    const std::string bin = !bin_.empty() ? bin_ : env_bin ? env_bin : "";
    if (bin.empty()) return false;
    std::filesystem::create_directories(dir_);
    std::filesystem::create_directories(cgroot());
    pid_ = fork();
    if (pid_ == 0) exec(bin);
    for (int i = 0; i < 600; ++i) {
      if (req("GET", "/healthz", {}, std::chrono::seconds(2)).status == 200) return true;
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Sends `sig` and waits for the exit; returns the wait status.
  int stop(int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return st;
  }

  status::HttpResponse req(std::string_view method, std::string_view target, std::string_view body = {},
                           std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    status::ClientOptions o;
    o.socket_path = socket();
    o.timeout = timeout;
    auto r = status::http_request(o, method, target, body);
    return r ? *r : status::HttpResponse{};
  }

 private:
  // In the child: the arguments, the log as stdout and stderr, then exec.
  [[noreturn]] void exec(const std::string& bin) {
    std::vector<std::string> args = {bin};
    // Without --config podshimd reads /etc/podshim/config.yaml, which a
    // machine where the package was ever installed has: the tests would then
    // depend on the host. No config given means an empty file, built-in
    // defaults.
    if (std::find(extra_.begin(), extra_.end(), "--config") == extra_.end()) {
      std::ofstream(dir_ + "/config.yaml") << yaml_;
      args.insert(args.end(), {"--config", dir_ + "/config.yaml"});
    }
    if (flag_nri_off) args.push_back("--nri=off");
    if (flag_socket) args.insert(args.end(), {"--socket", socket()});
    if (flag_state) args.insert(args.end(), {"--state-dir", state()});
    if (flag_cgroot) args.insert(args.end(), {"--cgroup-root", cgroot()});
    args.insert(args.end(), extra_.begin(), extra_.end());
    int fd = open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    dup2(fd, 2);
    dup2(fd, 1);
    unsetenv("NOTIFY_SOCKET");
    for (auto& e : env) putenv(e.data());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }

  std::string dir_, yaml_, cgroot_, socket_, state_, bin_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

}  // namespace podshim::testing
