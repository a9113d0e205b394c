// Crash and restart safety of podshimd on a real cgroup v2
// kernel, inside the qemu guest (tests/vm/vm-run): podshimd --nri=off owns the
// guest's /sys/fs/cgroup; real processes run in a pod's container cgroups;
// podshimd is killed with SIGKILL at a known point of a resize (the engine's
// test_pause_after_* seams, set through the debug: config section, hold
// the window open), restarted, and the
// kernel's files and podshimd's journal and state are checked:
//   (a) killed while memory.high is clamped mid-shrink → the clamp is
//       repaired and memory.max is the value the journal implies;
//   (b) killed after the first step of a pod + 2 containers plan → restart
//       leaves the partly applied plan as it is (no plan journal: each step
//       of the kubelet's order is safe on its own, pod ≥ Σ containers), and
//       the retried resize completes it;
//   (c) the containers podshimd knew are still listed after each restart.
// Skips outside the VM.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/str.h"
#include "shim/status/client.h"
#include "tests/kernel/kernel_env.h"
#include "tests/kernel/podshimd_under_test.h"
#include "tests/testutil/shell.h"

namespace {

// put, slurp, wait_for, PodshimdUnderTest, kMi, kCg, ...
using namespace podshim::kernel_test;
using nlohmann::json;
using namespace std::chrono_literals;
namespace status = podshim::status;
// Long enough that the test, not the pause, decides when podshimd dies; the
// pause ending early would show up as a finished resize, which fails (a)/(b).
constexpr const char* kPauseMs = "120000";

uint64_t u64(const std::string& s) {
  auto v = podshim::str::parse_u64(s);
  return v ? *v : 0;
}
// cpu.max quota in µs ("max" → UINT64_MAX).
uint64_t quota(const std::string& cpu_max) {
  auto sp = cpu_max.find(' ');
  std::string q = cpu_max.substr(0, sp);
  return q == "max" ? UINT64_MAX : u64(q);
}

// The cgroups whose memory.high clamp podshimd's journal (clamps.log) holds
// in force: "C <len> <relpath> <high>" records without a later
// "D <len> <relpath>".
std::set<std::string> clamps_in_force(const std::string& dir) {
  std::ifstream in(dir + "/clamps.log");
  std::set<std::string> live;
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 4 || (line[0] != 'C' && line[0] != 'D')) continue;
    const size_t sp = line.find(' ', 2);
    if (sp == std::string::npos) continue;
    const std::string rel = line.substr(sp + 1, std::stoul(line.substr(2, sp - 2)));
    if (line[0] == 'C')
      live.insert(rel);
    else
      live.erase(rel);
  }
  return live;
}

std::vector<std::string> list_dir(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

// Clean page cache charged to the reader: a raw read of the brd RAM disk
// (tmpfs/initramfs pages would be shmem, which cannot be reclaimed). The fd
// stays open: the last close of a block device drops its page cache
// (blkdev_put → kill_bdev), which would leave nothing to reclaim.
void read_block_device(const char* dev, size_t bytes) {
  int fd = open(dev, O_RDONLY | O_CLOEXEC);
  if (fd < 0) _exit(3);
  std::vector<char> buf(1 << 20);
  for (size_t done = 0; done < bytes;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

class CrashRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS();
    ASSERT_TRUE(d_.init("/run/podshim-crash", "c7a5b0e1-0000-4000-8000-"));
    state_ = d_.dir() + "/state";
    config_ = "log_level: debug\n"
              "state_dir: " + state_ + "\n"
              "socket:\n  path: " + d_.socket() + "\n"
              "cgroup:\n  root: /sys/fs/cgroup\n  driver: cgroupfs\n  shrink_timeout_ms: 1500\n";
    ASSERT_TRUE(make_pod_cgroup(d_.uid(), &pod_));
    for (const char* c : {"c1", "c2"}) ASSERT_EQ(mkdir((kCg + "/" + pod_ + "/" + c).c_str(), 0755), 0) << c;
    // As the kubelet and runc set them at creation: containers 250m request,
    // 500m / 256 MiB limits, the pod their sum.
    ASSERT_TRUE(put(kCg + "/" + pod_ + "/memory.max", std::to_string(512 * kMi)));
    ASSERT_TRUE(put(kCg + "/" + pod_ + "/cpu.max", "100000 100000"));
    for (const char* c : {"c1", "c2"}) {
      ASSERT_TRUE(put(kCg + "/" + pod_ + "/" + c + "/memory.max", std::to_string(256 * kMi)));
      ASSERT_TRUE(put(kCg + "/" + pod_ + "/" + c + "/cpu.max", "50000 100000"));
      ASSERT_TRUE(put(kCg + "/" + pod_ + "/" + c + "/cpu.weight", "39"));
    }
  }

  void TearDown() override {
    d_.stop(SIGKILL);
    for (pid_t p : workloads_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    if (!pod_.empty()) {
      for (const char* c : {"c1", "c2"}) rmdir((kCg + "/" + pod_ + "/" + c).c_str());
      rmdir((kCg + "/" + pod_).c_str());
    }
    if (::testing::Test::HasFailure() && !d_.dir().empty())
      std::printf("---- podshimd log (%s/podshimd.log) ----\n%s\n----\n", d_.dir().c_str(), d_.log().c_str());
  }

  // Starts podshimd --nri=off; `pause` sets the engine's crash-window seam,
  // which goes through podshimd's configuration.
  void start_daemon(bool pause) {
    ASSERT_TRUE(d_.start(config_ + (pause ? std::string("debug:\n  test_pause_after_clamp_ms: ") + kPauseMs +
                                                "\n  test_pause_after_step_ms: " + kPauseMs + "\n"
                                          : std::string())));
  }
  void stop_daemon(int sig) { d_.stop(sig); }

  // A resize with a shrink completes later (the engine's timer-driven
  // shrink on podshimd's loop): the API answers in_progress and the outcome
  // follows in lastResizeOutcome, as podshimctl waits for it.
  void wait_settled(const std::vector<std::string>& ids) {
    for (const auto& id : ids) {
      bool done = wait_for([&] {
        auto g = request("GET", "/v1/containers/" + id, "", std::chrono::seconds(10));
        return g && g->status == 200 && g->body.find("\"lastResizeOutcome\":\"in_progress\"") == std::string::npos;
      }, std::chrono::seconds(60));
      EXPECT_TRUE(done) << id << "'s resize still in progress";
    }
  }
  podshim::Result<status::HttpResponse> request(std::string_view method, std::string_view target,
                                                std::string_view body = {}, std::chrono::milliseconds t = 5s) {
    return d_.request(method, target, body, t);
  }
  void register_container(const std::string& id, pid_t pid) {
    ASSERT_TRUE(d_.register_container(id, d_.uid(), pod_, "crash", pid));
  }

  // Issues a resize on a thread: podshimd answers only after the pause, which
  // the test cuts short with SIGKILL, so the answer is a dropped connection.
  std::thread resize_async(const std::string& target, const std::string& body) {
    return std::thread([this, target, body] { (void)request("POST", target, body, 200s); });
  }

  std::vector<std::string> known_containers() {
    std::vector<std::string> ids;
    auto r = request("GET", "/v1/containers");
    if (!r || r->status != 200) return ids;
    json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return ids;
    for (const auto& c : j.value("items", json::array())) ids.push_back(c.value("id", ""));
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  // (c) The containers podshimd knew survive the restart, also as an operator
  // sees them through podshimctl.
  void expect_state_survived() {
    EXPECT_EQ(known_containers(), (std::vector<std::string>{"c1", "c2"}));
    if (!d_.podshimctl().empty()) {
      const std::string out =
          podshim::testutil::run_shell(d_.podshimctl() + " --socket " + d_.socket() + " get containers 2>&1");
      std::printf("podshimctl get containers after the restart:\n%s", out.c_str());
      EXPECT_NE(out.find("c1"), std::string::npos) << out;
      EXPECT_NE(out.find("c2"), std::string::npos) << out;
    }
  }

  std::string journal_dir() const { return state_ + "/cgroup"; }
  std::string file(const std::string& ctr, const std::string& f) const {
    return slurp(kCg + "/" + pod_ + (ctr.empty() ? "" : "/" + ctr) + "/" + f);
  }
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> m;
    for (const std::string c : {"", "c1", "c2"})
      for (const char* f : {"cpu.weight", "cpu.max", "memory.max", "memory.high"})
        m[(c.empty() ? "pod" : c) + "/" + f] = file(c, f);
    return m;
  }

  PodshimdUnderTest d_;
  std::string state_, pod_, config_;
  std::vector<pid_t> workloads_;
};

// (a) + (c): SIGKILL while memory.high is clamped in the middle of a shrink.
TEST_F(CrashRestart, KilledWhileMemoryHighClampedIsRepairedOnRestart) {
  if (access("/dev/ram0", F_OK) != 0) {
    const char* ko = std::getenv("PODSHIM_BRD_KO");
    ASSERT_TRUE(ko && *ko) << "no /dev/ram0 and no PODSHIM_BRD_KO to load brd from";
    ASSERT_EQ(system((std::string("insmod ") + ko + " rd_nr=1 rd_size=262144").c_str()), 0);
  }
  // c1 fills ~160 MiB of page cache; c2 just runs.
  pid_t cache = start_in_cgroup(kCg + "/" + pod_ + "/c1", [] { read_block_device("/dev/ram0", 160 * kMi); });
  pid_t idle = start_in_cgroup(kCg + "/" + pod_ + "/c2", [] {});
  workloads_ = {cache, idle};
  ASSERT_TRUE(wait_for([&] { return keyed(kCg + "/" + pod_ + "/c1/memory.stat", "file") >= 150 * kMi; }, 120s))
      << "c1 never held 150 MiB of page cache: " << slurp(kCg + "/" + pod_ + "/c1/memory.stat");
  const uint64_t usage = u64(file("c1", "memory.current"));
  const uint64_t oom_before = keyed(kCg + "/" + pod_ + "/c1/memory.events", "oom_kill");
  const std::string old_max = file("c1", "memory.max"), old_high = file("c1", "memory.high");
  ASSERT_EQ(old_high, "max");

  ASSERT_NO_FATAL_FAILURE(start_daemon(true));
  ASSERT_NO_FATAL_FAILURE(register_container("c1", cache));
  ASSERT_NO_FATAL_FAILURE(register_container("c2", idle));

  // Shrink c1 to 64 MiB, well below its usage: the engine must clamp
  // memory.high and reclaim before it writes memory.max.
  const std::string target = std::to_string(64 * kMi);
  std::printf("c1 before the shrink: memory.current=%s, file=%llu\n", file("c1", "memory.current").c_str(),
              static_cast<unsigned long long>(keyed(kCg + "/" + pod_ + "/c1/memory.stat", "file")));
  auto th = resize_async("/v1/containers/c1/resize", R"({"resources":{"limits":{"memory":"64Mi"}}})");
  bool clamped = wait_for([&] {
    return file("c1", "memory.high") != "max" && !clamps_in_force(journal_dir()).empty();
  }, 120s);
  const auto plans_at_kill = list_dir(journal_dir(), "plan-");
  const std::string high_at_kill = file("c1", "memory.high"), max_at_kill = file("c1", "memory.max");
  stop_daemon(SIGKILL);
  th.join();
  std::printf("c1 usage %.1f MiB; at SIGKILL: memory.high=%s memory.max=%s, %zu plan journal(s)\n",
              static_cast<double>(usage) / kMi, high_at_kill.c_str(), max_at_kill.c_str(), plans_at_kill.size());
  ASSERT_TRUE(clamped) << "podshimd never clamped memory.high (seam or shrink path not taken); memory.high="
                       << file("c1", "memory.high");
  EXPECT_EQ(high_at_kill, target) << "the clamp holds memory.high at the target";
  EXPECT_EQ(max_at_kill, old_max) << "memory.max must not move before the clamp did its work";
  // The crash really left the clamp behind; only a restart can repair it.
  EXPECT_EQ(file("c1", "memory.high"), target);
  EXPECT_FALSE(clamps_in_force(journal_dir()).empty());

  ASSERT_NO_FATAL_FAILURE(start_daemon(false));
  EXPECT_EQ(file("c1", "memory.high"), old_high) << "restart did not repair the memory.high clamp";
  EXPECT_TRUE(clamps_in_force(journal_dir()).empty()) << "clamp journal left after recovery";
  EXPECT_TRUE(plans_at_kill.empty()) << "podshimd journals only memory.high clamps, not plans";
  // The shrink never reached memory.max: the limit is still the old one.
  const std::string max_now = file("c1", "memory.max");
  EXPECT_EQ(max_now, old_max) << max_now;
  EXPECT_EQ(keyed(kCg + "/" + pod_ + "/c1/memory.events", "oom_kill"), oom_before) << "an OOM kill happened";
  int st;
  EXPECT_EQ(waitpid(cache, &st, WNOHANG), 0) << "c1's process died";
  expect_state_survived();

  // Afterwards the same shrink goes through normally (nothing half-applied
  // stands in its way).
  auto r = request("POST", "/v1/containers/c1/resize", R"({"resources":{"limits":{"memory":"64Mi"}}})", 60s);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;
  wait_settled({"c1"});
  EXPECT_EQ(file("c1", "memory.max"), target) << r->body;
  EXPECT_EQ(file("c1", "memory.high"), "max");
}

// (b) + (c): SIGKILL after the first step of a pod + 2 containers plan.
TEST_F(CrashRestart, KilledAfterFirstStepOfPodResizeIsRolledBackOnRestart) {
  pid_t a = start_in_cgroup(kCg + "/" + pod_ + "/c1", [] {}), b = start_in_cgroup(kCg + "/" + pod_ + "/c2", [] {});
  workloads_ = {a, b};
  ASSERT_NO_FATAL_FAILURE(start_daemon(true));
  ASSERT_NO_FATAL_FAILURE(register_container("c1", a));
  ASSERT_NO_FATAL_FAILURE(register_container("c2", b));
  const auto before = snapshot();

  // c1 grows, c2 shrinks, the pod grows: memory pod↑ c2↓ c1↑, then cpu the
  // same way (KEP-1287 order) — six steps; the first is the pod's memory.max.
  const std::string body = R"({"containers":[
      {"id":"c1","resources":{"limits":{"cpu":"700m","memory":"384Mi"}}},
      {"id":"c2","resources":{"limits":{"cpu":"400m","memory":"192Mi"}}}]})";
  auto th = resize_async("/v1/pods/" + d_.uid() + "/resize", body);
  const std::string pod_new_mem = std::to_string(576 * kMi);
  bool first_step = wait_for([&] {
    return file("", "memory.max") == pod_new_mem;
  }, 120s);
  const auto at_kill = snapshot();
  stop_daemon(SIGKILL);
  th.join();
  for (const auto& [k, v] : at_kill)
    std::printf("  %-16s before=%-12s at SIGKILL=%s\n", k.c_str(), before.at(k).c_str(), v.c_str());
  ASSERT_TRUE(first_step) << "the pod's memory.max never reached 576 MiB";
  // Half-applied at the crash: the pod moved, the containers did not.
  EXPECT_EQ(at_kill.at("c1/memory.max"), before.at("c1/memory.max"));
  EXPECT_EQ(at_kill.at("c2/memory.max"), before.at("c2/memory.max"));
  EXPECT_EQ(at_kill.at("pod/cpu.max"), before.at("pod/cpu.max"));

  ASSERT_NO_FATAL_FAILURE(start_daemon(false));
  const auto after = snapshot();
  // Left as the crash left it: a restart does not replay or undo a plan
  // (only clamps are journaled), and the partial state is a safe one.
  EXPECT_EQ(after, at_kill) << "restart changed a partly applied resize";
  EXPECT_TRUE(list_dir(journal_dir(), "plan-").empty()) << "podshimd journals only memory.high clamps";
  EXPECT_GE(u64(after.at("pod/memory.max")), u64(after.at("c1/memory.max")) + u64(after.at("c2/memory.max")));
  EXPECT_GE(quota(after.at("pod/cpu.max")), quota(after.at("c1/cpu.max")) + quota(after.at("c2/cpu.max")));
  expect_state_survived();

  // The kubelet retries; the retried resize finishes, with the invariant.
  auto r = request("POST", "/v1/pods/" + d_.uid() + "/resize", body, 60s);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;
  wait_settled({"c1", "c2"});
  EXPECT_EQ(file("", "memory.max"), pod_new_mem) << r->body;
  EXPECT_EQ(file("c1", "memory.max"), std::to_string(384 * kMi));
  EXPECT_EQ(file("c2", "memory.max"), std::to_string(192 * kMi));
  EXPECT_EQ(file("c1", "cpu.max"), "70000 100000");
  EXPECT_EQ(file("c2", "cpu.max"), "40000 100000");
  EXPECT_EQ(file("", "cpu.max"), "110000 100000");
}

}  // namespace
