// The resize engine against a real cgroup v2 kernel (tests/vm/vm-run), with
// real processes: shrink refused below anonymous usage with no OOM kill,
// shrink applied over reclaimable page cache, values read back equal, and the
// pod ≥ Σ containers invariant at every step. Skips outside the VM.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cgroup/engine.h"
#include "tests/kernel/kernel_env.h"
#include "tests/kernel/pagecache_fs.h"

namespace podshim::cgroup {
namespace {

using podshim::kernel_test::slurp;

constexpr int64_t kMi = 1 << 20;
const std::string kRoot = "/sys/fs/cgroup";

void must_put(const std::string& p, const std::string& v) {
  ASSERT_TRUE(podshim::kernel_test::put(p, v)) << "writing " << v << " to " << p;
}
uint64_t events(const std::string& rel, const std::string& key) {
  return podshim::kernel_test::keyed(kRoot + "/" + rel + "/memory.events", key);
}

// A child process in a cgroup that touches `anon` bytes of anonymous memory
// and, when `file_path` is set, writes then re-reads `file_bytes` of it (page
// cache charged to the cgroup), then waits to be killed.
struct Hog {
  pid_t pid = -1;
  Hog(const std::string& rel, size_t anon, const std::string& file_path = "", size_t file_bytes = 0) {
    int go[2], ready[2];
    if (pipe(go) != 0 || pipe(ready) != 0) abort();
    pid = fork();
    if (pid == 0) {
      char c;
      if (read(go[0], &c, 1) != 1) _exit(3);
      if (anon) {
        char* p = static_cast<char*>(mmap(nullptr, anon, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (p == MAP_FAILED) _exit(4);
        for (size_t i = 0; i < anon; i += 4096) p[i] = 1;
      }
      if (!file_path.empty()) {
        int fd = open(file_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) _exit(5);
        std::string chunk(1 << 20, 'x');
        for (size_t done = 0; done < file_bytes; done += chunk.size())
          if (write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) _exit(6);
        fsync(fd);  // clean pages: reclaimable without writeback
        close(fd);
      }
      if (write(ready[1], "r", 1) != 1) _exit(7);
      for (;;) pause();
    }
    // The child's ends are closed first: a child that dies before getting
    // ready must make the read below see end-of-file, not wait forever on a
    // write end the parent itself still holds.
    close(go[0]);
    close(ready[1]);
    must_put(kRoot + "/" + rel + "/cgroup.procs", std::to_string(pid));
    if (write(go[1], "g", 1) != 1) abort();
    char c;
    if (read(ready[0], &c, 1) != 1) pid = -1;  // the child died before getting ready
    close(go[1]);
    close(ready[0]);
  }
  bool alive() const {
    int st;
    return pid > 0 && waitpid(pid, &st, WNOHANG) == 0;
  }
  ~Hog() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// A state directory of this test's own: a fixed name would let one test's journal (or one left
// by another binary in the same guest boot) reach the next test's Engine::recover().
std::string fresh_state_dir() {
  char tmpl[] = "/tmp/podshim-state-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "/tmp/podshim-state-mkdtemp-failed";
}

class CgroupKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS();
    base = "podshim-kt-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    mk(base, true);
    mk(base + "/pod", true);
    mk(base + "/pod/c1", false);
    mk(base + "/pod/c2", false);
    EngineOptions o;
    o.driver = DriverKind::Cgroupfs;
    o.state_dir = fresh_state_dir();
    auto e = Engine::create(o);
    ASSERT_TRUE(e) << e.error().message;
    engine = std::move(*e);
  }
  void TearDown() override {
    for (const auto& d : {base + "/pod/c2", base + "/pod/c1", base + "/pod", base})
      rmdir((kRoot + "/" + d).c_str());
  }
  void mk(const std::string& rel, bool has_children) {
    ASSERT_EQ(mkdir((kRoot + "/" + rel).c_str(), 0755), 0) << rel << ": " << strerror(errno);
    // Delegate cpu and memory to the children; a leaf must not enable them
    // or it could hold no processes ("no internal processes").
    if (has_children) must_put(kRoot + "/" + rel + "/cgroup.subtree_control", "+cpu +memory");
  }
  ResizeTarget target(const std::string& id, const std::string& rel, K8sResources r) {
    return ResizeTarget{id, "/" + rel, r};
  }
  std::string base;
  std::unique_ptr<Engine> engine;
};

TEST_F(CgroupKernel, ShrinkBelowAnonymousUsageIsRefusedWithoutOomKill) {
  const std::string c1 = base + "/pod/c1";
  must_put(kRoot + "/" + c1 + "/memory.max", std::to_string(256 * kMi));
  Hog hog(c1, 64 * kMi);
  ASSERT_TRUE(hog.alive());
  uint64_t kills_before = events(c1, "oom_kill");
  PodResizeRequest req;
  req.containers.push_back(target("c1", c1, {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  auto r = engine->resize(req);
  ASSERT_FALSE(r) << "a shrink below 64 MiB of anon was applied";
  EXPECT_EQ(r.error().kind, ErrorKind::ShrinkRefused) << r.error().message;
  EXPECT_NE(r.error().message.find("memory limit (33554432) below current usage ("), std::string::npos)
      << r.error().message;
  EXPECT_TRUE(hog.alive());
  EXPECT_EQ(events(c1, "oom_kill"), kills_before);
  EXPECT_EQ(slurp(kRoot + "/" + c1 + "/memory.max"), std::to_string(256 * kMi));
  EXPECT_EQ(slurp(kRoot + "/" + c1 + "/memory.high"), "max");
}

TEST_F(CgroupKernel, ShrinkOverReclaimablePageCacheIsApplied) {
  ASSERT_NO_FATAL_FAILURE(kernel_test::mount_pagecache_fs(/*reuse_mounted=*/true));
  const std::string c1 = base + "/pod/c1";
  must_put(kRoot + "/" + c1 + "/memory.max", std::to_string(256 * kMi));
  uint64_t usage_before = 0;
  {
    Hog hog(c1, 4 * kMi, "/mnt/pc/cache", 96 * kMi);
    ASSERT_TRUE(hog.alive());
    usage_before = std::stoull(slurp(kRoot + "/" + c1 + "/memory.current"));
    ASSERT_GT(usage_before, static_cast<uint64_t>(64 * kMi)) << "page cache was not charged";
    PodResizeRequest req;
    req.containers.push_back(target("c1", c1, {std::nullopt, std::nullopt, std::nullopt, 24 * kMi}));
    auto t0 = std::chrono::steady_clock::now();
    auto r = engine->resize(req);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_GT(r->bytes_reclaimed, 0u);
    EXPECT_TRUE(hog.alive());
    EXPECT_EQ(events(c1, "oom_kill"), 0u);
    EXPECT_EQ(slurp(kRoot + "/" + c1 + "/memory.max"), std::to_string(24 * kMi));
    EXPECT_EQ(slurp(kRoot + "/" + c1 + "/memory.high"), "max");
    EXPECT_LE(std::stoull(slurp(kRoot + "/" + c1 + "/memory.current")), static_cast<uint64_t>(24 * kMi));
    printf("page-cache shrink: usage %llu → limit %lld, reclaimed %llu in %lld ms (TCG)\n",
           static_cast<unsigned long long>(usage_before), static_cast<long long>(24 * kMi),
           static_cast<unsigned long long>(r->bytes_reclaimed), static_cast<long long>(ms.count()));
  }
  umount("/mnt/pc");
}

// memory.stat's value of `key` in `rel` (0 when absent).
uint64_t stat_of(const std::string& rel, const std::string& key) {
  std::istringstream in(slurp(kRoot + "/" + rel + "/memory.stat"));
  std::string k;
  uint64_t v;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

TEST_F(CgroupKernel, AppliedValuesReadBackEqual) {
  const std::string c1 = base + "/pod/c1";
  Hog hog(c1, 1 * kMi);
  ASSERT_TRUE(hog.alive());
  // memory.current is exact at once.
  EXPECT_GE(std::stoull(slurp(kRoot + "/" + c1 + "/memory.current")), static_cast<uint64_t>(kMi));
  // memory.stat is flushed lazily (mm/memcontrol.c, since Linux 6.8 per
  // cgroup): 1 MiB is below MEMCG_CHARGE_BATCH pages x online CPUs on a
  // node with more than a few CPUs, and stays out of memory.stat until the
  // periodic flush (every 2 s, deferrable). Nothing a test can do forces
  // it: reading memory.stat, this cgroup's or a parent's, flushes only past
  // that threshold, and a parent in this otherwise idle tree has seen no
  // more updates than the child. So wait for it, then compare exactly.
  auto t0 = std::chrono::steady_clock::now();
  while (stat_of(c1, "anon") < static_cast<uint64_t>(kMi) &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    usleep(50 * 1000);
  const auto flush_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GE(stat_of(c1, "anon"), static_cast<uint64_t>(kMi))
      << "memory.stat never listed the hog's 1 MiB of anon in 10 s:\n" << slurp(kRoot + "/" + c1 + "/memory.stat");
  printf("memory.stat listed 1 MiB of anon after %lld ms\n", static_cast<long long>(flush_ms));
  for (auto f : {WeightFormula::Quadratic, WeightFormula::Linear}) {
    EngineOptions o;
    o.driver = DriverKind::Cgroupfs;
    o.state_dir = fresh_state_dir();
    o.formula = f;
    auto e = Engine::create(o);
    ASSERT_TRUE(e);
    for (K8sResources want : {K8sResources{250, 500, std::nullopt, 128 * kMi},
                              K8sResources{1500, 2000, std::nullopt, 300 * kMi},
                              K8sResources{100, std::nullopt, std::nullopt, std::nullopt},
                              K8sResources{std::nullopt, 7, std::nullopt, 64 * kMi + 123}}) {
      PodResizeRequest req;
      req.containers.push_back(target("c1", c1, want));
      auto r = (*e)->resize(req);
      ASSERT_TRUE(r) << r.error().message;
      auto a = (*e)->read_actual("/" + c1);
      ASSERT_TRUE(a) << a.error().message;
      AttrValues v = attr_values(want, f);
      EXPECT_EQ(a->cpu_weight, std::stoull(*v.cpu_weight));
      EXPECT_EQ(a->cpu_max_raw, v.cpu_max);
      EXPECT_EQ(milli_cpu_to_weight(*a->cpu_request_milli, f), std::stoull(*v.cpu_weight));
      if (want.cpu_limit_milli) {
        EXPECT_EQ(a->cpu_limit_milli, std::max<int64_t>(*want.cpu_limit_milli, 10));
      } else {
        EXPECT_FALSE(a->cpu_limit_milli);
      }
      if (want.memory_limit_bytes) {
        EXPECT_EQ(a->memory_limit_bytes, static_cast<int64_t>(page_round_down(*want.memory_limit_bytes)));
      } else {
        EXPECT_FALSE(a->memory_limit_bytes);
      }
      EXPECT_GE(a->memory_current, static_cast<uint64_t>(kMi));
      EXPECT_GE(a->anon, static_cast<uint64_t>(kMi));  // read from memory.stat, flushed above
      // The kernel's values re-planned are a no-op.
      auto again = (*e)->resize(req);
      ASSERT_TRUE(again);
      EXPECT_TRUE(again->steps.empty());
    }
  }
}

TEST_F(CgroupKernel, PodLimitNeverBelowSumOfContainers) {
  const std::string pod = base + "/pod", c1 = pod + "/c1", c2 = pod + "/c2";
  auto read_max = [&](const std::string& rel) -> long double {
    std::string v = slurp(kRoot + "/" + rel + "/memory.max");
    return v == "max" ? std::numeric_limits<long double>::infinity() : std::stold(v);
  };
  auto read_quota = [&](const std::string& rel) -> long double {
    std::string v = slurp(kRoot + "/" + rel + "/cpu.max");
    return v.rfind("max", 0) == 0 ? std::numeric_limits<long double>::infinity() : std::stold(v);
  };
  int steps = 0, violations = 0;
  EngineOptions o;
  o.driver = DriverKind::Cgroupfs;
  o.state_dir = fresh_state_dir();
  o.after_step = [&](const std::vector<StepReport>&) {
    ++steps;
    if (read_max(pod) < read_max(c1) + read_max(c2)) ++violations;
    if (read_quota(pod) < read_quota(c1) + read_quota(c2)) ++violations;
  };
  auto e = Engine::create(o);
  ASSERT_TRUE(e);
  Hog h1(c1, 8 * kMi), h2(c2, 8 * kMi);
  auto apply = [&](int64_t pod_mem, int64_t a_mem, int64_t b_mem, int64_t pod_cpu, int64_t a_cpu, int64_t b_cpu) {
    PodResizeRequest req;
    req.pod = target("pod", pod, {std::nullopt, pod_cpu, std::nullopt, pod_mem});
    req.containers.push_back(target("c1", c1, {a_cpu, a_cpu, std::nullopt, a_mem}));
    req.containers.push_back(target("c2", c2, {b_cpu, b_cpu, std::nullopt, b_mem}));
    auto r = (*e)->resize(req);
    ASSERT_TRUE(r) << r.error().message;
  };
  apply(512 * kMi, 256 * kMi, 256 * kMi, 2000, 1000, 1000);  // from "max": growing
  apply(256 * kMi, 128 * kMi, 128 * kMi, 1000, 500, 500);    // all shrink
  apply(320 * kMi, 64 * kMi, 256 * kMi, 1500, 250, 1250);    // mixed: c1 shrinks, c2 grows
  apply(192 * kMi, 96 * kMi, 96 * kMi, 600, 300, 300);       // shrink again
  EXPECT_GE(steps, 12);
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(slurp(kRoot + "/" + pod + "/memory.max"), std::to_string(192 * kMi));
  EXPECT_TRUE(h1.alive());
  EXPECT_TRUE(h2.alive());
}

}  // namespace
}  // namespace podshim::cgroup
