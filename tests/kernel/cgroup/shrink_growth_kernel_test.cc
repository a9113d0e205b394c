// Memory shrinks against workloads that keep changing while podshim shrinks
// them, on a real cgroup v2 kernel inside the qemu guest
// (tests/vm/vm-run). Cases: anon growing at +1, +5 and +20 MiB per 100 ms,
// page cache re-read in a loop, shmem (memfd) growing. Several runs each.
// Claims checked on every run:
//   - a run reported applied has no oom_kill in memory.events over the op
//     and its settle (the engine's own events deltas agree with the kernel);
//   - a refusal names its reason: the rate ("usage grows"), the pressure
//     ("memory pressure"), or usage ("below current usage");
//   - a growing anon or shmem workload whose real rate during the op (a
//     counter shared with the test) reaches the limit within the growth
//     window is never reported applied.
// Prints a table: runs, applied, refused by why, kills per case. Skips
// outside the VM.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cgroup/engine.h"
#include "cgroup/usage_history.h"
#include "tests/kernel/kernel_env.h"
#include "tests/kernel/pagecache_fs.h"

namespace podshim::cgroup {
namespace {

using podshim::kernel_test::put;
using podshim::kernel_test::slurp;

constexpr size_t kMi = 1 << 20;
const std::string kRoot = "/sys/fs/cgroup";

uint64_t event(const std::string& rel, const std::string& key) {
  return podshim::kernel_test::keyed(kRoot + "/" + rel + "/memory.events", key);
}

enum class Kind { Anon, PageCache, Shmem };
struct Case {
  const char* name;
  Kind kind;
  size_t base_mib, step_mib;  // start size; growth per 100 ms (0: none)
  size_t target_mib;
  bool must_refuse;  // a growing unreclaimable workload
};

// The workload: a child in `rel` that reaches base_mib, says so, then every
// 100 ms grows by step_mib (anon: mmap + touch; shmem: a memfd written to),
// or for page cache re-reads a file of base_mib on ext2 in a loop. Capped
// at 320 MiB so a refused run cannot take the guest with it.
// `*mib` counts what the workload holds, shared with the test, so the test
// knows the rate the workload really grew at during the op (under TCG it
// can fall far behind its nominal rate).
pid_t start_workload(const std::string& rel, const Case& c, std::atomic<size_t>* mib) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    if (!put(kRoot + "/" + rel + "/cgroup.procs", std::to_string(getpid()))) _exit(2);
    std::vector<char> chunk(kMi, 'x');
    size_t have = 0;
    int fd = -1;
    if (c.kind == Kind::Shmem) fd = memfd_create("podshim-kt-shmem", 0);
    if (c.kind == Kind::PageCache) fd = open("/mnt/pc/cache", O_RDWR | O_CREAT | O_TRUNC, 0600);
    auto grow = [&](size_t n) {
      for (size_t i = 0; i < n && have < 320; ++i, mib->store(++have)) {
        if (c.kind == Kind::Anon) {
          char* p = static_cast<char*>(mmap(nullptr, kMi, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
          if (p == MAP_FAILED) _exit(4);
          for (size_t o = 0; o < kMi; o += 4096) p[o] = 1;
        } else if (write(fd, chunk.data(), kMi) != static_cast<ssize_t>(kMi)) {
          _exit(5);
        }
      }
    };
    grow(c.base_mib);
    if (c.kind == Kind::PageCache) fsync(fd);  // clean pages: reclaimable without writeback
    if (write(ready[1], "r", 1) != 1) _exit(6);
    for (;;) {
      auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      if (c.kind == Kind::PageCache) {
        // Re-read the whole file once per tick: a working set in page cache.
        for (off_t off = 0; off < static_cast<off_t>(c.base_mib * kMi); off += kMi)
          if (pread(fd, chunk.data(), kMi, off) < 0) _exit(7);
      } else {
        grow(c.step_mib);
      }
      std::this_thread::sleep_until(next);
    }
  }
  close(ready[1]);
  char ch;
  bool ok = read(ready[0], &ch, 1) == 1;
  close(ready[0]);
  if (!ok) {
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

std::string why_name(ShrinkWhy w) {
  switch (w) {
    case ShrinkWhy::Usage: return "usage";
    case ShrinkWhy::Growth: return "growth";
    case ShrinkWhy::Pressure: return "pressure";
    case ShrinkWhy::Timeout: return "timeout";
  }
  return "?";
}

struct Tally {
  int runs = 0, applied = 0, kills = 0, killed_reported = 0, kills_later = 0;
  std::map<std::string, int> refused;
  std::vector<std::string> notes;
  std::vector<double> durations_ms;  // of the applied runs
};

class ShrinkGrowth : public ::testing::Test {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS({.psi = true});
    base_ = "podshim-growth-" + std::to_string(getpid());
    ASSERT_EQ(mkdir((kRoot + "/" + base_).c_str(), 0755), 0) << strerror(errno);
    ASSERT_TRUE(put(kRoot + "/" + base_ + "/cgroup.subtree_control", "+cpu +memory"));
    char tmpl[] = "/tmp/podshim-state-XXXXXX";
    ASSERT_TRUE(mkdtemp(tmpl));
    EngineOptions o;
    o.driver = DriverKind::Cgroupfs;
    o.state_dir = tmpl;
    o.shrink_timeout = std::chrono::milliseconds(1500);  // as tools/demo runs podshimd
    auto e = Engine::create(o);
    ASSERT_TRUE(e) << e.error().message;
    engine_ = std::move(*e);
    // The baseline in the same run: growth and pressure admission off (a
    // zero window, a 100% threshold), as the engine behaved before.
    o.shrink_growth_window = std::chrono::milliseconds(0);
    o.shrink_pressure_threshold = 100;
    auto b = Engine::create(o);
    ASSERT_TRUE(b) << b.error().message;
    baseline_ = std::move(*b);
    // As podshimd runs it: the read-back's memory.current readings in the
    // engine's usage history (here taken by run_case before the resize).
    o.shrink_growth_window = EngineOptions{}.shrink_growth_window;
    o.shrink_pressure_threshold = EngineOptions{}.shrink_pressure_threshold;
    history_ = std::make_shared<UsageHistory>();
    o.usage_history = history_;
    auto h = Engine::create(o);
    ASSERT_TRUE(h) << h.error().message;
    with_history_ = std::move(*h);
  }
  void TearDown() override { rmdir((kRoot + "/" + base_).c_str()); }


  enum class Mode { Admission, Baseline, History };
  void run_case(const Case& c, int runs, Tally* t, Mode mode = Mode::Admission) {
    const bool baseline = mode == Mode::Baseline;
    Engine* engine = baseline ? baseline_.get() : mode == Mode::History ? with_history_.get() : engine_.get();
    for (int i = 0; i < runs; ++i) {
      const std::string rel = base_ + "/" + c.name + "-" + std::to_string(i);
      ASSERT_EQ(mkdir((kRoot + "/" + rel).c_str(), 0755), 0) << strerror(errno);
      ASSERT_TRUE(put(kRoot + "/" + rel + "/memory.max", std::to_string(512 * kMi)));
      // Lock-free, so it works across the fork in shared memory.
      void* shared = mmap(nullptr, sizeof(std::atomic<size_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(shared, MAP_FAILED);
      auto* mib = new (shared) std::atomic<size_t>(0);
      pid_t pid = start_workload(rel, c, mib);
      ASSERT_GT(pid, 0) << c.name << ": the workload did not start";
      const uint64_t kills0 = event(rel, "oom_kill");
      PodResizeRequest req;
      req.containers.push_back(ResizeTarget{c.name, "/" + rel,
                                            {std::nullopt, std::nullopt, std::nullopt,
                                             static_cast<int64_t>(c.target_mib * kMi)}});
      if (mode == Mode::History) {
        // Readings every 300 ms for 0.6 s, as the read-back takes them (its
        // period, and after each runtime event), the last just before the
        // request.
        for (int k = 0; k < 3; ++k) {
          if (k) std::this_thread::sleep_for(std::chrono::milliseconds(300));
          history_->record(c.name, std::chrono::steady_clock::now(),
                           std::stoull(slurp(kRoot + "/" + rel + "/memory.current")));
        }
      }
      const size_t mib0 = mib->load();
      const uint64_t usage0 = std::stoull(slurp(kRoot + "/" + rel + "/memory.current"));
      const auto t0 = std::chrono::steady_clock::now();
      auto r = engine->resize(req);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const uint64_t kills_op = event(rel, "oom_kill") - kills0;  // over the op and its settle
      // What the workload really did during the op, and whether at that rate
      // it reaches the limit within the engine's growth window (5 s).
      const double rate = (mib->load() - mib0) * static_cast<double>(kMi) / secs;
      const bool crosses = c.step_mib > 0 &&
                           static_cast<double>(usage0) + rate * 5.0 + 8.0 * kMi > static_cast<double>(c.target_mib * kMi);
      ++t->runs;
      if (r) {
        ++t->applied;
        t->kills += static_cast<int>(kills_op);
        if (r->killed()) ++t->killed_reported;
        // The engine's own deltas must agree with the kernel's counter.
        auto ev = r->events.find(c.name);
        ASSERT_NE(ev, r->events.end()) << c.name << ": no memory.events deltas in the report";
        EXPECT_EQ(ev->second.oom_kill, kills_op) << c.name << " run " << i;
        EXPECT_FALSE(kills_op > 0 && !r->killed())
            << c.name << " run " << i << ": reported plainly applied with " << kills_op << " oom_kill";
        EXPECT_FALSE(c.must_refuse && crosses && !baseline)
            << c.name << " run " << i << ": a workload growing " << rate / kMi << " MiB/s was shrunk (measured "
            << r->growth_bytes_per_sec << " B/s)";
        // After the settle: what became of it (informative; a workload that
        // keeps growing meets its own limit eventually).
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const uint64_t later = event(rel, "oom_kill") - kills0 - kills_op;
        t->kills_later += static_cast<int>(later);
        t->durations_ms.push_back(static_cast<double>(r->duration.count()));
        t->notes.push_back(fmt::format("{} run {}: applied, real growth {:.1f} MiB/s, measured {} B/s, psi some "
                                       "{:.1f}%, {} ms, oom_kill {} (+{} in the next second)",
                                       c.name, i, rate / kMi, r->growth_bytes_per_sec, r->psi_some_window,
                                       r->duration.count(), kills_op, later));
      } else {
        const auto* d = r.error().payload_as<ShrinkRefusal>();
        EXPECT_TRUE(d) << c.name << ": not a refusal: " << r.error().message;
        std::string why = d ? why_name(d->why) : "error";
        ++t->refused[why];
        t->kills += static_cast<int>(kills_op);
        const std::string& m = r.error().message;
        bool named = m.find("usage grows ") != std::string::npos || m.find("memory pressure ") != std::string::npos ||
                     m.find("below current usage (") != std::string::npos;
        EXPECT_TRUE(named) << c.name << ": the refusal names no rate, pressure or usage: " << m;
        EXPECT_EQ(kills_op, 0u) << c.name << " run " << i << ": refused, yet killed: " << m;
        EXPECT_EQ(slurp(kRoot + "/" + rel + "/memory.max"), std::to_string(512 * kMi)) << c.name;
        EXPECT_EQ(slurp(kRoot + "/" + rel + "/memory.high"), "max") << c.name;
        t->notes.push_back(fmt::format("{} run {}: refused ({}), real growth {:.1f} MiB/s: {}", c.name, i, why,
                                       rate / kMi, m));
      }
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      munmap(shared, sizeof(std::atomic<size_t>));
      history_->forget(c.name);
      // A memfd dies with its last fd; the cgroup can then go.
      for (int k = 0; k < 100 && rmdir((kRoot + "/" + rel).c_str()) != 0; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string base_;
  std::unique_ptr<Engine> engine_, baseline_, with_history_;
  std::shared_ptr<UsageHistory> history_;
};

TEST_F(ShrinkGrowth, GrowingPageCacheAndShmemWorkloads) {
  const int runs = 3;
  const std::vector<Case> cases = {
      {"anon+1MiB", Kind::Anon, 60, 1, 100, true},
      {"anon+5MiB", Kind::Anon, 60, 5, 100, true},
      {"anon+20MiB", Kind::Anon, 60, 20, 160, true},
      {"pagecache", Kind::PageCache, 96, 0, 48, false},
      {"shmem+5MiB", Kind::Shmem, 40, 5, 100, true},
  };
  std::map<std::string, Tally> tallies;
  for (const auto& c : cases) {
    if (c.kind == Kind::PageCache) {
      ASSERT_NO_FATAL_FAILURE(kernel_test::mount_pagecache_fs(/*reuse_mounted=*/false));
    }
    ASSERT_NO_FATAL_FAILURE(run_case(c, runs, &tallies[c.name]));
    if (c.kind == Kind::PageCache) umount("/mnt/pc");
  }
  // kills: oom_kill over the op and its settle; later: in the second after.
  std::printf("\n%-12s %5s %8s %8s %8s %8s %8s %6s %6s\n", "case", "runs", "applied", "r:growth", "r:press",
              "r:usage", "r:tmout", "kills", "later");
  for (const auto& c : cases) {
    Tally& t = tallies[c.name];
    std::printf("%-12s %5d %8d %8d %8d %8d %8d %6d %6d\n", c.name, t.runs, t.applied, t.refused["growth"],
                t.refused["pressure"], t.refused["usage"], t.refused["timeout"], t.kills, t.kills_later);
  }
  for (const auto& c : cases)
    for (const auto& n : tallies[c.name].notes) std::printf("  %s\n", n.c_str());
  // Baseline: the case (+5 MiB per 100 ms from 70 MiB, shrunk to
  // 100 MiB) with growth and pressure admission off.
  const Case bc{"baseline+5", Kind::Anon, 70, 5, 100, true};
  ASSERT_NO_FATAL_FAILURE(run_case(bc, runs, &tallies[bc.name], Mode::Baseline));
  {
    Tally& t = tallies[bc.name];
    std::printf("%-12s %5d %8d %8d %8d %8d %8d %6d %6d   (admission off)\n", bc.name, t.runs, t.applied,
                t.refused["growth"], t.refused["pressure"], t.refused["usage"], t.refused["timeout"], t.kills,
                t.kills_later);
    for (const auto& n : t.notes) std::printf("  %s\n", n.c_str());
  }
  // The reclaimable case must not be refused every time: the shrink is
  // meant to work where memory can be given back.
  EXPECT_GT(tallies["pagecache"].applied + tallies["pagecache"].refused["pressure"], 0);
}

// With the read-back's readings of the cgroup before the request (as
// podshimd gives the engine): an idle workload far below its new limit is
// shrunk without the watch under the clamp, and every growing one is still
// refused (run_case fails an applied run whose real growth crosses the
// target within the window) with no kill.
TEST_F(ShrinkGrowth, ReadingsBeforeTheRequestSkipTheWatchOnlyWithRoom) {
  const int runs = 3;
  const std::vector<Case> cases = {
      {"idle", Kind::Anon, 30, 0, 100, false},
      {"anon+1MiB", Kind::Anon, 60, 1, 100, true},
      {"anon+5MiB", Kind::Anon, 60, 5, 100, true},
      {"shmem+5MiB", Kind::Shmem, 40, 5, 100, true},
  };
  std::map<std::string, Tally> with, without;
  for (const auto& c : cases) ASSERT_NO_FATAL_FAILURE(run_case(c, runs, &with[c.name], Mode::History));
  ASSERT_NO_FATAL_FAILURE(run_case(cases[0], runs, &without["idle"]));
  std::printf("\n%-12s %5s %8s %8s %8s %8s %8s %6s   (with read-back readings)\n", "case", "runs", "applied",
              "r:growth", "r:press", "r:usage", "r:tmout", "kills");
  for (const auto& c : cases) {
    Tally& t = with[c.name];
    std::printf("%-12s %5d %8d %8d %8d %8d %8d %6d\n", c.name, t.runs, t.applied, t.refused["growth"],
                t.refused["pressure"], t.refused["usage"], t.refused["timeout"], t.kills);
    for (const auto& n : t.notes) std::printf("  %s\n", n.c_str());
    if (c.must_refuse) {
      EXPECT_EQ(t.kills, 0) << c.name;
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double fast = median(with["idle"].durations_ms), slow = median(without["idle"].durations_ms);
  std::printf("idle shrink, median ms: %.0f with readings, %.0f without (the watch: %d ms before the write)\n",
              fast, slow, static_cast<int>(EngineOptions{}.settle.count()));
  ASSERT_EQ(with["idle"].applied, runs);
  ASSERT_EQ(without["idle"].applied, runs);
  // Without readings: the watch before the write and the settle after it;
  // with them: the settle only.
  EXPECT_LT(fast + 0.5 * static_cast<double>(EngineOptions{}.settle.count()), slow);
}

}  // namespace
}  // namespace podshim::cgroup
