// A real podshimd --nri=off for the kernel tests that drive one through its
// status socket (crash and restart, read-back and drift): the binaries the
// test runner names, one pod cgroup laid out as the kubelet's cgroupfs driver
// lays it out, the daemon started with its stderr kept in a log, and requests
// and registrations as podshim-hook sends them.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shim/status/client.h"
#include "tests/kernel/kernel_env.h"

namespace podshim::kernel_test {

constexpr int64_t kMi = 1 << 20;
inline const std::string kCg = "/sys/fs/cgroup";

class PodshimdUnderTest {
 public:
  // The binaries from PODSHIM_PODSHIMD (required) and PODSHIM_PODSHIMCTL
  // (optional: "" when not built). Each test gets its own directory,
  // BASE/<test name>, for the socket, state, config and log, and its own pod
  // uid, `uid_prefix` (the first 24 characters of a UUID) and a counter: the
  // tests do not share a daemon or a pod.
  ::testing::AssertionResult init(const std::string& base, const std::string& uid_prefix) {
    const char* d = std::getenv("PODSHIM_PODSHIMD");
    if (!d || access(d, X_OK) != 0)
      return ::testing::AssertionFailure() << "PODSHIM_PODSHIMD must name the podshimd binary";
    podshimd_ = d;
    if (const char* c = std::getenv("PODSHIM_PODSHIMCTL")) podshimctl_ = c;
    static int counter = 0;
    uid_ = uid_prefix + fmt::format("{:012d}", ++counter);
    dir_ = base + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    sock_ = dir_ + "/podshim.sock";
    if (std::system(("mkdir -p " + dir_ + "/state").c_str()) != 0)
      return ::testing::AssertionFailure() << "cannot make " << dir_ << "/state";
    return ::testing::AssertionSuccess();
  }

  // Writes `config` (YAML) to DIR/config.yaml, starts podshimd --nri=off on
  // it and waits (60 s at most) until /readyz answers 200.
  ::testing::AssertionResult start(const std::string& config) {
    if (!put(dir_ + "/config.yaml", config)) return ::testing::AssertionFailure() << "cannot write the config";
    pid_ = fork();
    if (pid_ == 0) {
      int log = open((dir_ + "/podshimd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (log >= 0) dup2(log, STDERR_FILENO);
      execl(podshimd_.c_str(), "podshimd", "--nri=off", "--config", (dir_ + "/config.yaml").c_str(), nullptr);
      _exit(127);
    }
    if (pid_ < 0) return ::testing::AssertionFailure() << "fork failed";
    const bool up = wait_for([&] {
      auto r = request("GET", "/readyz");
      return r && r->status == 200;
    }, std::chrono::seconds(60));
    if (!up) return ::testing::AssertionFailure() << "podshimd did not become ready on " << sock_;
    return ::testing::AssertionSuccess();
  }

  // Sends `sig` and reaps the daemon; nothing when none runs.
  void stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  Result<status::HttpResponse> request(std::string_view method, std::string_view target, std::string_view body = {},
                                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    status::ClientOptions o;
    o.socket_path = sock_;
    o.timeout = timeout;
    return status::http_request(o, method, target, body);
  }

  // POST /v1/containers for container `id` of pod `pod_uid` whose cgroup is
  // POD_REL/ID, as podshim-hook registers it: requests 250m / 32Mi, limits
  // 500m / 256Mi; `pid` only when > 0.
  ::testing::AssertionResult register_container(const std::string& id, const std::string& pod_uid,
                                                const std::string& pod_rel, const std::string& pod_name,
                                                pid_t pid = 0) const {
    nlohmann::json body{{"id", id},
                        {"podUid", pod_uid},
                        {"name", id},
                        {"cgroupPath", "/" + pod_rel + "/" + id},
                        {"podCgroupPath", "/" + pod_rel},
                        {"podName", pod_name},
                        {"podNamespace", "default"},
                        {"state", "running"},
                        {"resources",
                         {{"requests", {{"cpu", "250m"}, {"memory", "32Mi"}}},
                          {"limits", {{"cpu", "500m"}, {"memory", "256Mi"}}}}}};
    if (pid > 0) body["pid"] = pid;
    auto r = request("POST", "/v1/containers", body.dump());
    if (!r) return ::testing::AssertionFailure() << r.error().message;
    if (r->status != 201) return ::testing::AssertionFailure() << r->status << " " << r->body;
    return ::testing::AssertionSuccess();
  }

  // The daemon's log, for a failing test's output.
  std::string log() const { return slurp(dir_ + "/podshimd.log"); }

  const std::string& podshimctl() const { return podshimctl_; }
  const std::string& dir() const { return dir_; }
  const std::string& uid() const { return uid_; }
  const std::string& socket() const { return sock_; }

 private:
  std::string podshimd_, podshimctl_, uid_, dir_, sock_;
  pid_t pid_ = -1;
};

// Makes kubepods/burstable/pod<UID> under /sys/fs/cgroup with cpu and memory
// enabled for the children of each level (the kubelet's cgroupfs layout);
// `*rel` gets the pod's path relative to the root.
inline ::testing::AssertionResult make_pod_cgroup(const std::string& uid, std::string* rel) {
  rel->clear();
  for (const std::string& part : {std::string("kubepods"), std::string("burstable"), "pod" + uid}) {
    *rel += (rel->empty() ? "" : "/") + part;
    mkdir((kCg + "/" + *rel).c_str(), 0755);
    if (!put(kCg + "/" + *rel + "/cgroup.subtree_control", "+cpu +memory"))
      return ::testing::AssertionFailure() << "cannot enable cpu and memory in " << *rel;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace podshim::kernel_test
