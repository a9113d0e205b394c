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
#include <filesystem>
#include <fstream>
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

class Daemon {
 public:
  explicit Daemon(std::string dir, std::vector<std::string> extra = {}) : dir_(std::move(dir)) {
    extra_ = std::move(extra);
  }
  // The fake cgroup root elsewhere than <dir>/cg (the benchmark puts it on a
  // tmpfs, as cgroupfs is in memory); set before start().
  void set_cgroot(std::string root) { cgroot_ = std::move(root); }
  // The podshimd to run instead of $PODSHIMD (the benchmark's baseline).
  void set_binary(std::string bin) { bin_ = std::move(bin); }
  ~Daemon() { stop(SIGKILL); }

  std::string socket() const { return dir_ + "/s.sock"; }
  std::string state() const { return dir_ + "/state"; }
  std::string cgroot() const { return cgroot_.empty() ? dir_ + "/cg" : cgroot_; }
  std::string log() const { return dir_ + "/daemon.log"; }
  pid_t pid() const { return pid_; }

  // Starts podshimd and waits (bounded) until /healthz answers.
  bool start() {
    std::filesystem::create_directories(cgroot());
    const char* env = getenv("PODSHIMD");
    const std::string bin = !bin_.empty() ? bin_ : env ? env : "";
    if (bin.empty()) return false;
    std::vector<std::string> args = {bin, "--nri=off", "--socket", socket(), "--state-dir", state(),
                                      "--cgroup-root", cgroot()};
    // Without --config podshimd reads /etc/podshim/config.yaml, which a machine where the
    // package was ever installed has: the tests would then depend on the host. An empty file
    // means built-in defaults; a test that brings its own --config wins.
    if (std::find(extra_.begin(), extra_.end(), "--config") == extra_.end()) {
      std::ofstream(dir_ + "/empty-config.yaml").flush();
      args.insert(args.end(), {"--config", dir_ + "/empty-config.yaml"});
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      dup2(fd, 2);
      dup2(fd, 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      unsetenv("NOTIFY_SOCKET");
      execv(argv[0], argv.data());
      _exit(127);
    }
    status::ClientOptions o;
    o.socket_path = socket();
    o.timeout = std::chrono::seconds(2);
    for (int i = 0; i < 600; ++i) {  // up to ~30 s under load
      auto r = status::http_request(o, "GET", "/healthz");
      if (r && r->status == 200) return true;
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

  status::HttpResponse req(std::string_view method, std::string_view target, std::string_view body = {}) {
    status::ClientOptions o;
    o.socket_path = socket();
    o.timeout = std::chrono::seconds(30);
    auto r = status::http_request(o, method, target, body);
    return r ? *r : status::HttpResponse{};
  }

 private:
  std::string dir_;
  std::string cgroot_;
  std::string bin_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

}  // namespace podshim::testing
