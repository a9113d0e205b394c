#include "cgroup/engine.h"
#include "cgroup/clamp_journal.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "base/unique_fd.h"
#include "cgroup/shrink.h"
#include "tests/cgroup/fake_tree.h"

namespace podshim::cgroup {
namespace {

// The clamps the engine's journal holds in force (relpath -> memory.high).
std::map<std::string, std::string> journaled(const std::string& state) {
  int fd = ::open((state + "/cgroup").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return {{"<no journal directory>", ""}};
  auto r = podshim::cgroup::ClampJournal::read(fd);
  ::close(fd);
  if (!r) return {{"<unreadable journal>", r.error().message}};
  return *r;
}


using testing::FakeTree;

constexpr int64_t kMi = 1 << 20;

class EngineTest : public ::testing::Test {
 protected:
  // Plain files keep a stale tail after a shorter write (kernel attributes do
  // not), so the fake truncates each file before podshim writes it.
  EngineOptions options() {
    EngineOptions o;
    o.cgroup_root = tree.cg_root();
    o.state_dir = tree.state();
    o.shrink_timeout = std::chrono::milliseconds(30);
    o.settle = std::chrono::milliseconds(4);
    o.shrink_tick = std::chrono::milliseconds(1);
    o.shrink_headroom_bytes = 0;  // exact figures; the default is tested on its own
    // memory.stat taken as fresh unless a test says how far it may lag (the
    // default depends on the machine's CPU count).
    o.memory_stat_lag_bytes = 0;
    o.before_write = [this](const std::string& id, const std::string& file,
                            const std::string& value) -> Result<void> {
      std::lock_guard<std::mutex> l(mu);
      writes.push_back(id + ":" + file + "=" + value);
      if (hook) hook(id, file, value);
      if (fail_on && *fail_on == id + ":" + file) return fail(EIO, "injected failure");
      if (fail_all) return fail(EIO, "injected failure (all)");
      auto it = paths.find(id);
      if (it != paths.end()) ::truncate((tree.cg_root() + "/" + it->second + "/" + file).c_str(), 0);
      return {};
    };
    return o;
  }
  // A shrink of kubepods/c1 (100 MiB, of it 90 MiB page cache) to 32 MiB
  // that reclaim cannot reach: memory.current never drops in the fake.
  // Refused on timeout; the refusal's details, checked.
  ShrinkRefusal refused_on_timeout(std::string* message) {
    auto e = engine(options());
    PodResizeRequest req;
    req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
    auto r = e->resize(req);
    if (r) return {};
    *message = r.error().message;
    const auto* d = r.error().payload_as<ShrinkRefusal>();
    return d ? *d : ShrinkRefusal{};
  }

  EngineOptions lagging(uint64_t bytes) {
    auto o = options();
    o.memory_stat_lag_bytes = bytes;
    return o;
  }
  std::unique_ptr<Engine> engine(EngineOptions o) {
    auto e = Engine::create(std::move(o));
    EXPECT_TRUE(e) << e.error().message;
    return std::move(*e);
  }
  // c1 at 100 MiB whose usage falls by 20 MiB per memory.reclaim write (a
  // shrink to 32 MiB takes several loop turns), an idle c2, and an engine
  // on `schedule` with room for a loaded machine.
  std::unique_ptr<Engine> slow_shrink_c1_idle_c2(decltype(EngineOptions::schedule) schedule, int& reclaims) {
    tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
    tree.add("kubepods/c2", std::to_string(256 * kMi));
    auto o = options();
    o.schedule = std::move(schedule);
    o.shrink_timeout = std::chrono::milliseconds(1000);
    hook = [this, &reclaims](const std::string&, const std::string& file, const std::string&) {
      if (file == "memory.reclaim") {
        ++reclaims;
        tree.set("kubepods/c1", "memory.current", std::to_string((100 - 20 * reclaims) * kMi));
      }
    };
    return engine(o);
  }
  ResizeTarget target(const std::string& id, const std::string& rel, K8sResources r) {
    paths[id] = rel;
    return ResizeTarget{id, "/" + rel, r};
  }

  FakeTree tree;
  std::mutex mu;
  std::vector<std::string> writes;
  std::map<std::string, std::string> paths;
  std::optional<std::string> fail_on;
  bool fail_all = false;
  std::function<void(const std::string&, const std::string&, const std::string&)> hook;
};

TEST_F(EngineTest, AppliesAndReadsBack) {
  tree.add("kubepods/pod1/c1", "max", "max 100000", "100", 10 * kMi);
  auto e = engine(options());
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/pod1/c1", {250, 500, std::nullopt, 256 * kMi}));
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(tree.get("kubepods/pod1/c1", "cpu.weight"), "35");  // quadratic: 256 shares, ceil(10^1.5327)
  EXPECT_EQ(tree.get("kubepods/pod1/c1", "cpu.max"), "50000 100000");
  EXPECT_EQ(tree.get("kubepods/pod1/c1", "memory.max"), std::to_string(256 * kMi));
  ASSERT_EQ(r->steps.size(), 3u);
  EXPECT_EQ(r->steps[0].file, "memory.max");
  EXPECT_EQ(r->steps[0].before, "max");
  // What the cgroup holds once written, read at the end of the op.
  ASSERT_EQ(r->after.count("c1"), 1u);
  EXPECT_EQ(r->after.at("c1").cpu_limit_milli, 500);
  EXPECT_EQ(r->after.at("c1").memory_limit_bytes, 256 * kMi);
  EXPECT_EQ(r->after.at("c1").memory_current, static_cast<uint64_t>(10 * kMi));

  auto a = e->read_actual("/kubepods/pod1/c1");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->cpu_limit_milli, 500);
  EXPECT_EQ(a->memory_limit_bytes, 256 * kMi);
  ASSERT_TRUE(a->cpu_request_milli);
  EXPECT_EQ(milli_cpu_to_weight(*a->cpu_request_milli, WeightFormula::Quadratic), 35u);
  EXPECT_EQ(a->memory_current, static_cast<uint64_t>(10 * kMi));
  // The same without memory.stat: the limits and usage agree, anon is not read.
  tree.set_stat("kubepods/pod1/c1", 7 * kMi, 3 * kMi, 0);
  auto l = e->read_limits("/kubepods/pod1/c1");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->cpu_limit_milli, a->cpu_limit_milli);
  EXPECT_EQ(l->memory_limit_bytes, a->memory_limit_bytes);
  EXPECT_EQ(l->cpu_request_milli, a->cpu_request_milli);
  EXPECT_EQ(l->memory_current, a->memory_current);
  EXPECT_EQ(l->anon, 0u);
  EXPECT_EQ(e->read_actual("/kubepods/pod1/c1")->anon, static_cast<uint64_t>(7 * kMi));

  // Re-running the same resize writes nothing.
  writes.clear();
  auto again = e->resize(req);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->steps.empty());
  EXPECT_TRUE(writes.empty());
  // No journal is left behind.
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

// The read-back at the end of a resize reads again every file the resize
// wrote (the kernel may have normalised or changed it) and takes the others
// as start_op read them; a pod's cpu.weight converts back with the pod
// formula, as it was written.
TEST_F(EngineTest, ReadBackRereadsWrittenFilesAndConvertsAPodWithThePodFormula) {
  tree.add("kubepods/pod1", "max", "max 100000", "100", 10 * kMi);
  tree.add("kubepods/pod1/c1", std::to_string(256 * kMi), "max 100000", "35", 10 * kMi);
  auto o = options();
  o.formula = WeightFormula::Quadratic;  // 250m: weight 35
  o.pod_formula = WeightFormula::Linear;
  // Something else rewrites cpu.max right after podshim's write.
  o.after_step = [this](const std::vector<StepReport>& steps) {
    for (const auto& s : steps)
      if (s.file == "cpu.max") tree.set("kubepods/pod1/c1", "cpu.max", "70000 100000");
  };
  auto e = engine(o);
  PodResizeRequest req;
  req.pod = target("pod1", "kubepods/pod1", {1000, std::nullopt, std::nullopt, std::nullopt});
  req.containers.push_back(target("c1", "kubepods/pod1/c1", {250, 500, std::nullopt, 256 * kMi}));
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->steps.size(), 2u);  // the pod's cpu.weight and the container's cpu.max, nothing else
  EXPECT_EQ(tree.get("kubepods/pod1", "cpu.weight"), "39");  // linear: 1000m -> 1024 shares
  ASSERT_EQ(r->after.count("pod1"), 1u);
  ASSERT_TRUE(r->after.at("pod1").cpu_request_milli);
  EXPECT_EQ(milli_cpu_to_weight(*r->after.at("pod1").cpu_request_milli, WeightFormula::Linear), 39u);
  ASSERT_EQ(r->after.count("c1"), 1u);
  EXPECT_EQ(r->after.at("c1").cpu_limit_milli, 700);  // written, so read again
  // Not written: as read at the start.
  EXPECT_EQ(r->after.at("c1").memory_limit_bytes, 256 * kMi);
  ASSERT_TRUE(r->after.at("c1").cpu_request_milli);
  EXPECT_EQ(milli_cpu_to_weight(*r->after.at("c1").cpu_request_milli, WeightFormula::Quadratic), 35u);
}

TEST_F(EngineTest, LinearFormulaFromConfig) {
  tree.add("kubepods/c1");
  auto o = options();
  o.formula = WeightFormula::Linear;
  auto e = engine(o);
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {1000, std::nullopt, std::nullopt, std::nullopt}));
  ASSERT_TRUE(e->resize(req));
  EXPECT_EQ(tree.get("kubepods/c1", "cpu.weight"), "39");
}

TEST_F(EngineTest, RollbackInReverseWhenAWriteFailsMidway) {
  tree.add("kubepods/pod1", std::to_string(400 * kMi), "200000 100000", "79");
  tree.add("kubepods/pod1/a", std::to_string(200 * kMi), "100000 100000", "100");
  tree.add("kubepods/pod1/b", std::to_string(200 * kMi), "100000 100000", "100");
  auto e = engine(options());
  PodResizeRequest req;
  req.pod = target("pod", "kubepods/pod1", {std::nullopt, 4000, std::nullopt, 800 * kMi});
  req.containers.push_back(target("a", "kubepods/pod1/a", {1000, 2000, std::nullopt, 400 * kMi}));
  req.containers.push_back(target("b", "kubepods/pod1/b", {1000, 2000, std::nullopt, 400 * kMi}));
  fail_on = "b:cpu.max";
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("injected failure"), std::string::npos) << r.error().message;
  // Everything is back where it was.
  EXPECT_EQ(tree.get("kubepods/pod1", "memory.max"), std::to_string(400 * kMi));
  EXPECT_EQ(tree.get("kubepods/pod1", "cpu.max"), "200000 100000");
  EXPECT_EQ(tree.get("kubepods/pod1/a", "memory.max"), std::to_string(200 * kMi));
  EXPECT_EQ(tree.get("kubepods/pod1/a", "cpu.max"), "100000 100000");
  EXPECT_EQ(tree.get("kubepods/pod1/a", "cpu.weight"), "100");
  EXPECT_EQ(tree.get("kubepods/pod1/b", "memory.max"), std::to_string(200 * kMi));
  EXPECT_EQ(tree.get("kubepods/pod1/b", "cpu.weight"), "100");
  // The undo writes came in reverse order of the forward writes.
  std::vector<std::string> expect_tail{
      "b:cpu.max=200000 100000",  // the failed write itself
      "a:cpu.max=100000 100000", "pod:cpu.weight=79", "pod:cpu.max=200000 100000",
      "b:memory.max=" + std::to_string(200 * kMi), "a:memory.max=" + std::to_string(200 * kMi),
      "pod:memory.max=" + std::to_string(400 * kMi)};
  // Each lowering of memory.max is staged under a memory.high clamp; the
  // order of the limits themselves is what this test checks.
  std::vector<std::string> limits;
  for (const auto& w : writes)
    if (w.find(":memory.high=") == std::string::npos) limits.push_back(w);
  ASSERT_GE(limits.size(), expect_tail.size());
  std::vector<std::string> tail(limits.end() - expect_tail.size(), limits.end());
  EXPECT_EQ(tail, expect_tail);
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, RollbackWhenTheFileIsNotWritable) {
  // A real write failure, not a seam: the attribute is a directory.
  tree.add("kubepods/c1", std::to_string(200 * kMi));
  std::filesystem::remove(tree.cg_root() + "/kubepods/c1/cpu.max");
  std::filesystem::create_directory(tree.cg_root() + "/kubepods/c1/cpu.max");
  tree.add("kubepods/c0", std::to_string(200 * kMi));
  auto e = engine(options());
  PodResizeRequest req;
  req.containers.push_back(target("c0", "kubepods/c0", {std::nullopt, std::nullopt, std::nullopt, 300 * kMi}));
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 300 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);  // reading cpu.max (a directory) fails before anything is written
  EXPECT_EQ(tree.get("kubepods/c0", "memory.max"), std::to_string(200 * kMi));
  EXPECT_TRUE(writes.empty());
}

TEST_F(EngineTest, RefusedShrinkBelowAnonymousUsage) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 98 * kMi, 2 * kMi);
  auto e = engine(options());
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 48 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.error().kind, ErrorKind::ShrinkRefused) << r.error().message;
  EXPECT_EQ(r.error().code, EBUSY);
  EXPECT_NE(r.error().message.find("memory limit (" + std::to_string(48 * kMi) + ") below current usage (" +
                                   std::to_string(100 * kMi) + ")"),
            std::string::npos)
      << r.error().message;
  // The facts travel typed; nothing is parsed back out of the message, and
  // they survive a caller's wrap().
  const Error wrapped = r.error().wrap("resizing");
  EXPECT_EQ(wrapped.kind, ErrorKind::ShrinkRefused);
  const auto* d = wrapped.payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->id, "c1");
  EXPECT_EQ(d->target, static_cast<uint64_t>(48 * kMi));
  EXPECT_EQ(d->usage, static_cast<uint64_t>(100 * kMi));
  EXPECT_EQ(d->shmem, 0u);
  EXPECT_EQ(d->anon, static_cast<uint64_t>(98 * kMi));
  EXPECT_EQ(d->file, static_cast<uint64_t>(2 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");
  // Refused by the pre-check: memory.high was never touched.
  for (const auto& w : writes) EXPECT_EQ(w.find("memory.high"), std::string::npos) << w;
}

TEST_F(EngineTest, ShmemCountsAsUnreclaimable) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 60 * kMi, 8 * kMi, 50 * kMi);
  tree.set_stat("kubepods/c1", 8 * kMi, 50 * kMi, 48 * kMi);
  auto e = engine(options());
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 16 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::ShrinkRefused) << r.error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
}

TEST_F(EngineTest, ShrinkReclaimsPageCacheThenApplies) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  auto o = options();
  auto e = engine(o);
  bool clamp_seen = false;
  std::string journal_copy;
  hook = [&](const std::string&, const std::string& file, const std::string& value) {
    if (file == "memory.reclaim") {
      // The clamp is held and journaled while reclaiming.
      clamp_seen = tree.get("kubepods/c1", "memory.high") == std::to_string(32 * kMi);
      if (auto j = journaled(tree.state()); j.count("kubepods/c1")) journal_copy = j["kubepods/c1"];
      // The excess, in chunks of at most 64 MiB (one write per tick).
      EXPECT_EQ(value, std::to_string(std::min<int64_t>(100 * kMi - 32 * kMi, 64 * kMi)));
      tree.set("kubepods/c1", "memory.current", std::to_string(20 * kMi));  // "reclaimed"
    }
  };
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(clamp_seen);
  EXPECT_FALSE(journal_copy.empty());
  EXPECT_EQ(r->bytes_reclaimed, static_cast<uint64_t>(80 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(32 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");  // restored
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, AShrinkStalledPastItsDeadlineStillTriesReclaimOnce) {
  // The process stalls between the clamp and the first reclaim tick for
  // longer than the whole shrink budget (a loaded node, a slow fsync): the
  // shrink must still ask the kernel to reclaim before it may time out.
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  auto o = options();
  auto e = engine(o);
  int reclaims = 0;
  hook = [&](const std::string&, const std::string& file, const std::string& value) {
    if (file == "memory.high" && value == std::to_string(32 * kMi))
      std::this_thread::sleep_for(o.shrink_timeout + std::chrono::milliseconds(10));
    if (file == "memory.reclaim") {
      ++reclaims;
      tree.set("kubepods/c1", "memory.current", std::to_string(20 * kMi));
    }
  };
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(reclaims, 1);
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(32 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");
}

// The kernel reclaims in the writer's thread for memory.high below usage
// and for memory.reclaim, until done or a signal is pending: with dirty page
// cache that took seconds (mm/memcontrol.c, memory_high_write). Here each
// such write blocks in the seam for up to 3 s unless a signal ends it: the
// shrink must still answer within its budget, refused on timeout.
TEST_F(EngineTest, AReclaimingWriteThatBlocksIsCutAtTheDeadline) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  auto o = options();
  o.shrink_timeout = std::chrono::milliseconds(400);
  o.settle = std::chrono::milliseconds(40);
  auto e = engine(o);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd never_written(p[0]), w(p[1]);
  std::vector<std::string> cut;
  hook = [&](const std::string&, const std::string& file, const std::string& value) {
    if (file != "memory.reclaim" && !(file == "memory.high" && value == std::to_string(32 * kMi))) return;
    pollfd pfd{never_written.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 3000) < 0 && errno == EINTR) cut.push_back(file);
  };
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  auto t0 = std::chrono::steady_clock::now();
  auto r = e->resize(req);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  ASSERT_EQ(r.error().kind, ErrorKind::ShrinkRefused) << r.error().message;
  EXPECT_EQ(r.error().payload_as<ShrinkRefusal>()->why, ShrinkWhy::Timeout) << r.error().message;
  EXPECT_LT(took, std::chrono::milliseconds(1500)) << "a blocking write ran past the shrink's budget";
  ASSERT_FALSE(cut.empty());
  EXPECT_EQ(cut.front(), "memory.high");
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max") << "the clamp is restored";
}

TEST_F(EngineTest, ShrinkTimesOutAndRestoresHigh) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  tree.set("kubepods/c1", "memory.high", std::to_string(200 * kMi));
  auto e = engine(options());  // memory.current never drops in the fake
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::ShrinkRefused) << r.error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(200 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, RecoverRestoresAClampLeftByACrash) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  tree.set("kubepods/c1", "memory.high", std::to_string(200 * kMi));
  std::string saved;
  hook = [&](const std::string&, const std::string& file, const std::string&) {
    if (file != "memory.reclaim" || !saved.empty()) return;
    if (journaled(tree.state()).empty()) return;
    std::ifstream in(tree.state() + "/cgroup/clamps.log");
    std::stringstream ss;
    ss << in.rdbuf();
    saved = ss.str();
  };
  {
    auto e = engine(options());
    PodResizeRequest req;
    req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
    (void)e->resize(req);
  }
  ASSERT_FALSE(saved.empty());
  // Simulate the crash: the clamp is still on the cgroup and in the journal.
  std::ofstream(tree.state() + "/cgroup/clamps.log") << saved;
  tree.set("kubepods/c1", "memory.high", std::to_string(32 * kMi));
  hook = nullptr;
  auto e = engine(options());
  auto r = e->recover();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(200 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, NoPlanJournalOnlyAClampOneAndStalePlanJournalsAreDropped) {
  // A resize that lands half-way (every rollback write fails too) leaves no
  // journal behind: the kubelet's order keeps each step safe, and the
  // retried request completes it (only memory.high clamps are journaled).
  tree.add("kubepods/c1", std::to_string(100 * kMi), "100000 100000", "100");
  auto e = engine(options());
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {2000, 2000, std::nullopt, 200 * kMi}));
  hook = [&](const std::string&, const std::string& file, const std::string&) {
    if (file == "cpu.weight") fail_all = true;
  };
  ASSERT_FALSE(e->resize(req));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(200 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
  fail_all = false;
  hook = nullptr;
  ASSERT_TRUE(e->resize(req));
  EXPECT_EQ(tree.get("kubepods/c1", "cpu.max"), "200000 100000");
  // A plan journal of an older podshim is dropped, not replayed.
  std::ofstream(tree.state() + "/cgroup/plan-1-0")
      << "podshim-plan v1\ncgroupfs\tkubepods/c1\t\tc1\tmemory.max\t1\t2\n";
  auto r = e->recover();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(200 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, ReadsMemoryMaxAlone) {
  tree.add("kubepods/pod1/c1", "max", "max 100000", "100", 10 * kMi);
  auto e = engine(options());
  auto m = e->read_memory_max("/kubepods/pod1/c1");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->exists);
  EXPECT_EQ(m->limit_bytes, std::nullopt);
  tree.set("kubepods/pod1/c1", "memory.max", std::to_string(256 * kMi) + "\n");
  m = e->read_memory_max("/kubepods/pod1/c1");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->exists);
  EXPECT_EQ(m->limit_bytes, static_cast<uint64_t>(256 * kMi));
  // Not made yet: an answer, not an error.
  m = e->read_memory_max("/kubepods/pod1/c2");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_FALSE(m->exists);
  // Garbage in the file is an error naming it.
  tree.set("kubepods/pod1/c1", "memory.max", "lots");
  m = e->read_memory_max("/kubepods/pod1/c1");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("kubepods/pod1/c1/memory.max"), std::string::npos) << m.error().message;
}

TEST_F(EngineTest, HostilePathsAndSymlinksRefused) {
  tree.add("kubepods/c1");
  std::filesystem::create_directories(tree.state() + "/../outside");
  std::filesystem::create_directory_symlink(tree.cg_root() + "/kubepods", tree.cg_root() + "/link");
  auto e = engine(options());
  for (const char* p : {"/link/c1", "/kubepods/../kubepods/c1", "/../outside", "kubepods/c1"}) {
    PodResizeRequest req;
    req.containers.push_back(ResizeTarget{"x", p, {std::nullopt, std::nullopt, std::nullopt, kMi}});
    auto r = e->resize(req);
    EXPECT_FALSE(r) << p;
    EXPECT_FALSE(e->read_actual(p)) << p;
    EXPECT_FALSE(e->read_memory_max(p)) << p;
  }
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), "max");
}

class FakeUnits : public UnitManager {
 public:
  Result<void> set_unit_properties(const std::string& unit, const std::vector<UnitProperty>& props) override {
    calls.push_back({unit, props});
    return {};
  }
  std::vector<std::pair<std::string, std::vector<UnitProperty>>> calls;
};

TEST_F(EngineTest, SystemdDriverSetsPropertiesThenFiles) {
  const std::string rel = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu1.slice/cri-containerd-c1.scope";
  tree.add(rel);
  auto units = std::make_shared<FakeUnits>();
  auto o = options();
  o.unit_manager = units;
  auto e = engine(o);
  paths["c1"] = rel;
  PodResizeRequest req;
  req.containers.push_back(ResizeTarget{"c1", "kubepods-burstable-podu1.slice:cri-containerd:c1",
                                        {100, 125, std::nullopt, 64 * kMi}});
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  // runc#4622: 125m = 125 ms/s, rounded up to 130 ms/s, written to both places.
  EXPECT_EQ(tree.get(rel, "cpu.max"), "13000 100000");
  EXPECT_EQ(tree.get(rel, "cpu.weight"), "17");
  EXPECT_EQ(tree.get(rel, "memory.max"), std::to_string(64 * kMi));
  ASSERT_EQ(units->calls.size(), 2u);  // memory step, then cpu step
  EXPECT_EQ(units->calls[0].first, "cri-containerd-c1.scope");
  EXPECT_EQ(units->calls[0].second, (std::vector<UnitProperty>{{"MemoryMax", 64 * kMi}}));
  EXPECT_EQ(units->calls[1].second, (std::vector<UnitProperty>{{"CPUWeight", 17},
                                                               {"CPUQuotaPeriodUSec", 100000},
                                                               {"CPUQuotaPerSecUSec", 130000}}));
  // Removing limits maps "max" to systemd's infinity.
  req.containers[0].desired = {100, std::nullopt, std::nullopt, std::nullopt};
  ASSERT_TRUE(e->resize(req));
  EXPECT_EQ(units->calls.back().second, (std::vector<UnitProperty>{{"CPUQuotaPeriodUSec", 100000},
                                                                  {"CPUQuotaPerSecUSec", kUnitInfinity}}));
  EXPECT_EQ(tree.get(rel, "memory.max"), "max");
}

TEST_F(EngineTest, SameContainerResizesDoNotInterleave) {
  tree.add("kubepods/c1");
  paths["c1"] = "kubepods/c1";  // the fake truncates before each write
  auto e = engine(options());
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  hook = [&](const std::string&, const std::string& file, const std::string&) {
    if (file != "memory.max") return;
    int n = ++inside;
    int m = max_inside.load();
    while (n > m && !max_inside.compare_exchange_weak(m, n)) {}
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --inside;
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&, i] {
      PodResizeRequest req;
      req.containers.push_back(ResizeTarget{"c1", "/kubepods/c1",
                                            {std::nullopt, std::nullopt, std::nullopt, (100 + i) * kMi}});
      auto r = e->resize(req);
      EXPECT_TRUE(r) << r.error().message;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(max_inside.load(), 1);
}

// A stand-in for podshimd's event loop: runs scheduled callbacks in due
// order on the test thread; `before_each` lets a test move the fake kernel's
// files along with time (a workload that grows, pressure that builds).
// In virtual time it does not sleep: the clock jumps to each timer's due
// time, so what a shrink measures (its growth rate, its pressure window)
// comes out the same on a loaded machine; pass clock() to the engine too.
class Loop {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Loop(bool virtual_time = false) : virtual_(virtual_time), vnow_(Clock::now()), t0(now()) {}
  Clock::time_point now() const { return virtual_ ? vnow_ : Clock::now(); }
  std::function<Clock::time_point()> clock() {
    return [this] { return now(); };
  }
  void after(std::chrono::milliseconds d, std::function<void()> fn) {
    q_.emplace_back(now() + d, std::move(fn));
    ++scheduled;
  }
  std::function<void(std::chrono::milliseconds, std::function<void()>)> scheduler() {
    return [this](std::chrono::milliseconds d, std::function<void()> fn) { after(d, std::move(fn)); };
  }
  // Runs until `until` holds or nothing is left; false on a 10 s safety stop
  // (real time, in either mode).
  bool run(const std::function<bool()>& until) {
    auto stop = Clock::now() + std::chrono::seconds(10);
    while (!until() && !q_.empty()) {
      if (Clock::now() > stop) return false;
      auto it = std::min_element(q_.begin(), q_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      if (virtual_)
        vnow_ = std::max(vnow_, it->first);
      else if (it->first > Clock::now())
        std::this_thread::sleep_until(it->first);
      auto fn = std::move(it->second);
      q_.erase(it);
      if (before_each) before_each(std::chrono::duration<double>(now() - t0).count());
      fn();
      ++ran;
    }
    return true;
  }
  std::function<void(double seconds)> before_each;

 private:
  bool virtual_;
  Clock::time_point vnow_;

 public:
  Clock::time_point t0;
  int scheduled = 0, ran = 0;

 private:
  std::vector<std::pair<Clock::time_point, std::function<void()>>> q_;
};

TEST_F(EngineTest, AsyncResizeReturnsAtOnceAndQueuesTheSameCgroup) {
  Loop loop;
  int reclaims = 0;
  auto e = slow_shrink_c1_idle_c2(loop.scheduler(), reclaims);
  std::vector<std::string> order;
  PodResizeRequest shrink_req;
  shrink_req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  PodResizeRequest cpu_req;
  cpu_req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, 1000, std::nullopt, 32 * kMi}));
  PodResizeRequest other;
  other.containers.push_back(target("c2", "kubepods/c2", {std::nullopt, 500, std::nullopt, std::nullopt}));
  e->resize(shrink_req, [&](Result<ResizeReport> r) {
    EXPECT_TRUE(r) << r.error().message;
    order.push_back("shrink");
  });
  e->resize(cpu_req, [&](Result<ResizeReport> r) {
    EXPECT_TRUE(r) << r.error().message;
    order.push_back("cpu");
  });
  e->resize(other, [&](Result<ResizeReport> r) {
    EXPECT_TRUE(r) << r.error().message;
    order.push_back("other");
  });
  // Inside resize() only what needs no wait ran: c2's cpu write completed
  // at once; the shrink started and waits for the loop; c1's cpu resize waits
  // for the shrink.
  ASSERT_EQ(order.size(), 1u);
  EXPECT_EQ(order[0], "other");
  EXPECT_EQ(std::count(writes.begin(), writes.end(), "c1:cpu.max=100000 100000"), 0);
  ASSERT_TRUE(loop.run([&] { return order.size() == 3; }));
  // c2 does not wait for c1; c1's second resize waits for its first.
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], "other");
  EXPECT_EQ(order[1], "shrink");
  EXPECT_EQ(order[2], "cpu");
  EXPECT_GE(reclaims, 4);
  EXPECT_GT(loop.ran, reclaims);  // each reclaim chunk a loop turn of its own
  // The cpu write of the second resize came after the shrink's memory.max.
  auto pos = [&](const std::string& w) { return std::find(writes.begin(), writes.end(), w) - writes.begin(); };
  EXPECT_LT(pos("c1:memory.max=" + std::to_string(32 * kMi)), pos("c1:cpu.max=100000 100000"));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");
  EXPECT_EQ(tree.get("kubepods/c1", "cpu.max"), "100000 100000");
}


// A resize that waits for one of its cgroups keeps its place in the queue
// of the others: a later resize of a free cgroup an earlier waiter wants
// does not overtake it.
TEST_F(EngineTest, AWaitingResizeIsNotOvertakenOnItsFreeCgroups) {
  Loop loop;
  int reclaims = 0;
  auto e = slow_shrink_c1_idle_c2(loop.scheduler(), reclaims);
  std::vector<std::string> order;
  auto done = [&](const char* what) {
    return [&order, what](Result<ResizeReport> r) {
      EXPECT_TRUE(r) << what << ": " << r.error().message;
      order.push_back(what);
    };
  };
  PodResizeRequest shrink_c1, both, only_c2;
  shrink_c1.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  both.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, 1000, std::nullopt, 32 * kMi}));
  both.containers.push_back(target("c2", "kubepods/c2", {std::nullopt, 700, std::nullopt, std::nullopt}));
  only_c2.containers.push_back(target("c2", "kubepods/c2", {std::nullopt, 500, std::nullopt, std::nullopt}));
  e->resize(shrink_c1, done("shrink c1"));
  e->resize(both, done("c1+c2"));   // waits for c1; first in c2's queue
  e->resize(only_c2, done("c2"));   // c2 is free, but c1+c2 came first
  EXPECT_TRUE(order.empty()) << order[0] << " answered inside resize()";
  ASSERT_TRUE(loop.run([&] { return order.size() == 3; }));
  EXPECT_EQ(order, (std::vector<std::string>{"shrink c1", "c1+c2", "c2"}));
  EXPECT_EQ(tree.get("kubepods/c2", "cpu.max"), "50000 100000");  // the later resize's value is the one left
}
TEST_F(EngineTest, ReportCarriesMemoryEventsDeltasOfEveryTarget) {
  tree.add("kubepods/pod1", std::to_string(512 * kMi));
  tree.add("kubepods/pod1/c1", std::to_string(256 * kMi), "max 100000", "100", 40 * kMi, 30 * kMi, 10 * kMi);
  tree.set("kubepods/pod1/c1", "memory.events", "low 0\nhigh 7\nmax 2\noom 1\noom_kill 1\n");
  auto e = engine(options());
  hook = [&](const std::string& id, const std::string& file, const std::string&) {
    // The kernel OOM-kills in the settle after the write (the workload's own
    // fault): counters move on the container, not on the pod.
    if (id == "c1" && file == "memory.max")
      tree.set("kubepods/pod1/c1", "memory.events", "low 0\nhigh 9\nmax 5\noom 3\noom_kill 2\n");
  };
  PodResizeRequest req;
  req.pod = target("pod", "kubepods/pod1", {std::nullopt, std::nullopt, std::nullopt, 400 * kMi});
  req.containers.push_back(target("c1", "kubepods/pod1/c1", {std::nullopt, std::nullopt, std::nullopt, 100 * kMi}));
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->events.count("c1"), 1u);
  ASSERT_EQ(r->events.count("pod"), 1u);
  EXPECT_EQ(r->events.at("c1"), (MemoryEvents{2, 1, 2, 3}));
  EXPECT_EQ(r->events.at("pod"), MemoryEvents{});
  EXPECT_TRUE(r->killed());
  EXPECT_GT(r->duration.count(), 0);
}

// A workload whose anon memory grows at `rate` bytes/s from `base`.
struct Growth {
  FakeTree* tree;
  std::string rel;
  double base, rate, file = 0;
  void operator()(double sec) const {
    auto anon = static_cast<uint64_t>(base + rate * sec);
    tree->set_stat(rel, anon, static_cast<uint64_t>(file), 0);
    tree->set(rel, "memory.current", std::to_string(anon + static_cast<uint64_t>(file)));
  }
};

TEST_F(EngineTest, GrowthRefusedWithTheRate) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 30 * kMi, 30 * kMi, 0);
  Loop loop(/*virtual_time=*/true);
  auto o = options();
  o.schedule = loop.scheduler();
  o.clock = loop.clock();
  o.shrink_timeout = std::chrono::milliseconds(400);
  o.settle = std::chrono::milliseconds(80);
  o.shrink_tick = std::chrono::milliseconds(5);
  auto e = engine(o);
  // +5 MiB per 100 ms, from 30 MiB, shrunk to 100 MiB: under the target now,
  // over it in 1.4 s — well inside the 5 s window.
  loop.before_each = Growth{&tree, "kubepods/c1", 30.0 * kMi, 50.0 * kMi};
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 100 * kMi}));
  std::optional<Result<ResizeReport>> out;
  e->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
  ASSERT_TRUE(loop.run([&] { return out.has_value(); }));
  ASSERT_TRUE(out);
  ASSERT_FALSE(*out);
  const Error& err = out->error();
  ASSERT_EQ(err.kind, ErrorKind::ShrinkRefused) << err.message;
  const auto* d = err.payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->why, ShrinkWhy::Growth);
  EXPECT_GT(d->growth_bytes_per_sec, 35 * kMi) << d->growth_bytes_per_sec;
  EXPECT_LT(d->growth_bytes_per_sec, 65 * kMi) << d->growth_bytes_per_sec;
  EXPECT_NE(err.message.find("usage grows "), std::string::npos) << err.message;
  EXPECT_NE(err.message.find(" MiB/s"), std::string::npos) << err.message;
  // Staged: memory.high went to the target and came back; memory.max untouched.
  EXPECT_NE(std::find(writes.begin(), writes.end(), "c1:memory.high=" + std::to_string(100 * kMi)), writes.end());
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, SlowGrowthAndGrowingPageCacheAreApplied) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 30 * kMi, 20 * kMi, 10 * kMi);
  Loop loop(/*virtual_time=*/true);
  auto o = options();
  o.schedule = loop.scheduler();
  o.clock = loop.clock();
  o.shrink_timeout = std::chrono::milliseconds(400);
  o.settle = std::chrono::milliseconds(80);
  o.shrink_tick = std::chrono::milliseconds(5);
  auto e = engine(o);
  // anon +1 MiB/s (5 MiB over the window: fits under 100 MiB); page cache
  // +40 MiB/s (reclaimable: no reason to refuse).
  Growth g{&tree, "kubepods/c1", 20.0 * kMi, 1.0 * kMi, 10.0 * kMi};
  loop.before_each = [&](double sec) {
    g.file = 10.0 * kMi + 40.0 * kMi * sec;
    g(sec);
  };
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 100 * kMi}));
  std::optional<Result<ResizeReport>> out;
  e->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
  ASSERT_TRUE(loop.run([&] { return out.has_value(); }));
  ASSERT_TRUE(out && *out) << out->error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(100 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");
  EXPECT_GT((*out)->growth_bytes_per_sec, 0);
  EXPECT_LT((*out)->growth_bytes_per_sec, 3 * kMi);
}

TEST_F(EngineTest, PressureUnderTheClampBacksOffWithTheFigure) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 60 * kMi, 40 * kMi, 20 * kMi);
  tree.set("kubepods/c1", "memory.high", std::to_string(200 * kMi));
  Loop loop(/*virtual_time=*/true);
  auto o = options();
  o.schedule = loop.scheduler();
  o.clock = loop.clock();
  o.shrink_timeout = std::chrono::milliseconds(400);
  o.settle = std::chrono::milliseconds(80);
  o.shrink_tick = std::chrono::milliseconds(5);
  o.shrink_pressure_threshold = 25;
  auto e = engine(o);
  // Once memory.high is at the target, tasks stall 60% of the time.
  std::optional<std::chrono::steady_clock::time_point> clamped_at;
  hook = [&](const std::string&, const std::string& file, const std::string& value) {
    if (file == "memory.high" && value == std::to_string(64 * kMi)) clamped_at = loop.now();
  };
  loop.before_each = [&](double) {
    if (!clamped_at) return;
    auto us = static_cast<uint64_t>(
        std::chrono::duration<double, std::micro>(loop.now() - *clamped_at).count());
    tree.set_pressure("kubepods/c1", us * 6 / 10, us * 3 / 10, 12.5, 4.0);
  };
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 64 * kMi}));
  std::optional<Result<ResizeReport>> out;
  e->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
  ASSERT_TRUE(loop.run([&] { return out.has_value(); }));
  ASSERT_TRUE(out);
  ASSERT_FALSE(*out);
  const Error& err = out->error();
  ASSERT_EQ(err.kind, ErrorKind::ShrinkRefused) << err.message;
  const auto* d = err.payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->why, ShrinkWhy::Pressure);
  EXPECT_GT(d->psi_some_window, 25.0);
  EXPECT_LE(d->psi_some_window, 100.0);
  EXPECT_DOUBLE_EQ(d->psi_some_avg10, 12.5);
  EXPECT_NE(err.message.find("memory pressure some "), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("threshold 25.0%"), std::string::npos) << err.message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(200 * kMi));  // backed off
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, NoPressureAppliesAndReportsWhatItSaw) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 60 * kMi, 40 * kMi, 20 * kMi);
  tree.set_pressure("kubepods/c1", 1000, 0, 0.5, 0.0);
  auto o = options();
  o.settle = std::chrono::milliseconds(20);
  auto e = engine(o);
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 64 * kMi}));
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(64 * kMi));
  EXPECT_DOUBLE_EQ(r->psi_some_avg10, 0.5);
  EXPECT_EQ(r->psi_some_window, 0.0);
  EXPECT_GE(r->duration.count(), 2 * 5);  // watch + settle, each min(settle, timeout / 4) = 7 ms
}

// The read-back's memory.current readings from before a request stand in
// for the watch under the clamp when they show a flat trend and ample room.
// Each case: when (virtual time since the request) memory.max was written.
class HistoryTest : public EngineTest {
 protected:
  using Clock = std::chrono::steady_clock;
  // Shrinks `rel` (usage `now_bytes`) to `target` with `readings` (age,
  // bytes) in the history; returns how long after the request memory.max
  // was written, or nullopt when it was refused (`why` then says why).
  std::optional<std::chrono::milliseconds> shrink(const std::string& rel, uint64_t now_bytes, int64_t target_bytes,
                                                  std::vector<std::pair<std::chrono::milliseconds, uint64_t>> readings,
                                                  bool with_history = true) {
    const std::string id = rel.substr(rel.rfind('/') + 1);
    tree.add(rel, std::to_string(256 * kMi), "max 100000", "100", now_bytes, now_bytes, 0);
    if (some_avg10 > 0) tree.set_pressure(rel, 1000, 0, some_avg10, 0.0);
    Loop loop(/*virtual_time=*/true);
    auto history = std::make_shared<UsageHistory>();
    const auto t0 = loop.now();
    for (const auto& [age, bytes] : readings) history->record(id, t0 - age, bytes);
    auto o = options();
    o.schedule = loop.scheduler();
    o.clock = loop.clock();
    o.shrink_timeout = std::chrono::milliseconds(400);
    o.settle = std::chrono::milliseconds(80);
    o.shrink_tick = std::chrono::milliseconds(5);
    if (with_history) o.usage_history = history;
    std::optional<Clock::time_point> max_at;
    hook = [&](const std::string& who, const std::string& file, const std::string&) {
      if (who == id && file == "memory.max") max_at = loop.now();
    };
    auto e = engine(o);
    PodResizeRequest req;
    req.containers.push_back(target(id, rel, {std::nullopt, std::nullopt, std::nullopt, target_bytes}));
    std::optional<Result<ResizeReport>> out;
    e->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
    EXPECT_TRUE(loop.run([&] { return out.has_value(); }));
    hook = nullptr;
    if (!out || !*out) {
      why = out ? out->error().message : "no answer";
      return std::nullopt;
    }
    EXPECT_EQ(tree.get(rel, "memory.max"), std::to_string(target_bytes));
    EXPECT_EQ(tree.get(rel, "memory.high"), "max");
    growth = (*out)->growth_bytes_per_sec;
    if (!max_at) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(*max_at - t0);
  }
  std::string why;
  int64_t growth = 0;
  double some_avg10 = 0;  // memory.pressure's "some avg10" for the next cgroup
};

TEST_F(HistoryTest, FlatReadingsWithRoomSkipTheWatch) {
  using std::chrono::milliseconds;
  const uint64_t u = 30 * kMi;
  // Flat for 12 s, the newest 2 s old: written at once.
  auto at = shrink("kubepods/c1", u, 100 * kMi, {{milliseconds(12000), u}, {milliseconds(7000), u}, {milliseconds(2000), u}});
  ASSERT_TRUE(at) << why;
  EXPECT_EQ(at->count(), 0);
  EXPECT_EQ(growth, 0);
  // The same cgroup and request without readings: after the watch.
  at = shrink("kubepods/c2", u, 100 * kMi, {{milliseconds(12000), u}}, /*with_history=*/false);
  ASSERT_TRUE(at) << why;
  EXPECT_GE(at->count(), 80);
  // Only readings younger than the watch: nothing measured over its span yet.
  at = shrink("kubepods/c3", u, 100 * kMi, {{milliseconds(50), u}});
  ASSERT_TRUE(at) << why;
  EXPECT_GE(at->count(), 80);
}

TEST_F(HistoryTest, ARiseSinceTheReadingsMeansTheWatch) {
  using std::chrono::milliseconds;
  // 30 MiB 3 s ago, 40 MiB now: the rise may have begun just now, at any
  // rate; the watch measures it (the cgroup is flat in it: applied).
  auto at = shrink("kubepods/c1", 40 * kMi, 200 * kMi, {{milliseconds(6000), 30 * kMi}, {milliseconds(3000), 30 * kMi}});
  ASSERT_TRUE(at) << why;
  EXPECT_GE(at->count(), 80);
  // 30 MiB half a second ago: 20 MiB/s, 100 MiB over the 5 s growth
  // window; 40 + 100 fits under 200 MiB (at once) but not under 120 (watch).
  at = shrink("kubepods/c2", 40 * kMi, 200 * kMi, {{milliseconds(500), 30 * kMi}});
  ASSERT_TRUE(at) << why;
  EXPECT_EQ(at->count(), 0);
  EXPECT_NEAR(static_cast<double>(growth), 20.0 * kMi, 1.0 * kMi);
  at = shrink("kubepods/c3", 40 * kMi, 120 * kMi, {{milliseconds(500), 30 * kMi}});
  ASSERT_TRUE(at) << why;
  EXPECT_GE(at->count(), 80);
  // The longer trend counts too: +2 MiB/s from 10.4 s ago until 2.4 s ago,
  // flat since (no rise since the newest reading), a least-squares slope of
  // about 1.6 MiB/s: 45 MiB + 8 MiB over the window fits under 60 MiB, not
  // under 50.
  std::vector<std::pair<milliseconds, uint64_t>> trend;
  for (int a = 10400; a >= 2400; a -= 2000)
    trend.emplace_back(milliseconds(a), static_cast<uint64_t>(45 * kMi - (a - 2400) * 2 * kMi / 1000));
  trend.emplace_back(milliseconds(400), 45 * kMi);
  at = shrink("kubepods/c4", 45 * kMi, 60 * kMi, trend);
  ASSERT_TRUE(at) << why;
  EXPECT_EQ(at->count(), 0);
  EXPECT_GT(growth, 1 * kMi);
  EXPECT_LT(growth, 5 * kMi / 2);
  at = shrink("kubepods/c5", 45 * kMi, 50 * kMi, trend);
  ASSERT_TRUE(at) << why;
  EXPECT_GE(at->count(), 80);
}

TEST_F(HistoryTest, PressureMeansTheWatch) {
  using std::chrono::milliseconds;
  const uint64_t u = 30 * kMi;
  // Stalled 35% of the last 10 s (avg10 above the 20% threshold): the watch
  // measures whether the clamp adds to it (it does not: applied after it).
  some_avg10 = 35.0;
  auto at = shrink("kubepods/c1", u, 100 * kMi, {{milliseconds(7000), u}, {milliseconds(2000), u}});
  ASSERT_TRUE(at) << why;
  EXPECT_GE(at->count(), 80);
  some_avg10 = 5.0;
  at = shrink("kubepods/c2", u, 100 * kMi, {{milliseconds(7000), u}, {milliseconds(2000), u}});
  ASSERT_TRUE(at) << why;
  EXPECT_EQ(at->count(), 0);
}

// A blocking resize that cannot finish (here: a 60 s pause after the clamp)
// ends with a timeout error at its deadline instead of hanging its caller.
TEST_F(EngineTest, BlockingResizeHasADeadline) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 30 * kMi, 30 * kMi, 0);
  auto o = options();
  o.test_pause_after_clamp = std::chrono::seconds(60);
  o.blocking_deadline = std::chrono::milliseconds(150);
  auto e = engine(o);
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 100 * kMi}));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = e->resize(req);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Timeout);
  EXPECT_NE(r.error().message.find("did not finish within 150 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));  // never written
  // The default: each target's shrink budget and systemd calls, plus slack.
  EXPECT_EQ(EngineOptions{}.blocking_deadline.count(), 0);
}

TEST_F(EngineTest, DefaultHeadroomRefusesAShrinkWithNoRoom) {
  EXPECT_EQ(EngineOptions{}.shrink_headroom_bytes, static_cast<uint64_t>(8 * kMi));
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 60 * kMi, 60 * kMi, 0);
  auto o = options();
  o.shrink_headroom_bytes = EngineOptions{}.shrink_headroom_bytes;
  auto e = engine(o);
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 64 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  const auto* d = r.error().payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d) << r.error().message;
  EXPECT_EQ(d->why, ShrinkWhy::Usage);
  req.containers[0].desired.memory_limit_bytes = 72 * kMi;
  ASSERT_TRUE(e->resize(req));
}

// Recent kernels flush memory.stat lazily (mm/memcontrol.c): a change
// smaller than MEMCG_CHARGE_BATCH pages per online CPU can be missing from
// it for seconds while memory.current is exact. The fakes below give
// memory.current the truth and memory.stat a stale view within that bound.

TEST(MemoryStatLag, SixtyFourPagesPerOnlineCpu) {
  EXPECT_EQ(memory_stat_lag_bytes(),
            64u * static_cast<uint64_t>(::sysconf(_SC_NPROCESSORS_ONLN)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
}

TEST_F(EngineTest, StaleStatFileCannotAdmitAShrinkBelowWhatTheCgroupKeeps) {
  // Truth: 52 MiB anon + 48 MiB page cache = memory.current. memory.stat,
  // not flushed yet: anon 0, file 50 MiB (2 MiB freed since its last flush).
  // On a node whose stat may lag 4 MiB (16 CPUs), a shrink to 51 MiB is
  // below what stays and must be refused by the pre-check, saying why.
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 0, 50 * kMi);
  auto e = engine(lagging(4 * kMi));
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 51 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  const auto* d = r.error().payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d) << r.error().message;
  EXPECT_EQ(d->why, ShrinkWhy::Usage);
  EXPECT_EQ(d->usage, static_cast<uint64_t>(100 * kMi));
  EXPECT_EQ(d->anon, 0u);  // reported as memory.stat said
  EXPECT_EQ(d->file, static_cast<uint64_t>(50 * kMi));
  EXPECT_NE(r.error().message.find("below current usage (" + std::to_string(100 * kMi) + ")"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("memory.stat may lag the kernel by up to " + std::to_string(4 * kMi) + " bytes"),
            std::string::npos)
      << r.error().message;
  for (const auto& w : writes) EXPECT_EQ(w.find("memory.high"), std::string::npos) << w;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));

  // Taking the stat as fresh, the same shrink would pass the pre-check,
  // clamp memory.high below what the cgroup keeps and end on timeout.
  e = engine(lagging(0));
  writes.clear();
  r = e->resize(req);
  ASSERT_FALSE(r);
  d = r.error().payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d) << r.error().message;
  EXPECT_EQ(d->why, ShrinkWhy::Timeout);
  EXPECT_NE(std::find(writes.begin(), writes.end(), "c1:memory.high=" + std::to_string(51 * kMi)), writes.end());

  // The lag only costs its own size: a target past floor + lag goes ahead.
  e = engine(lagging(4 * kMi));
  hook = [&](const std::string&, const std::string& file, const std::string&) {
    if (file == "memory.reclaim") tree.set("kubepods/c1", "memory.current", std::to_string(52 * kMi));
  };
  req.containers[0].desired.memory_limit_bytes = 54 * kMi;
  r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(54 * kMi));
}

TEST_F(EngineTest, AStatThatListsMoreThanUsageIsBoundedByMemoryCurrent) {
  // memory.stat, stale, lists more page cache than memory.current charges
  // and no anon: reclaimable is at most usage, so the floor is the lag.
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 10 * kMi, 0, 30 * kMi);
  auto e = engine(lagging(4 * kMi));
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 3 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  const auto* d = r.error().payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d) << r.error().message;
  EXPECT_EQ(d->why, ShrinkWhy::Usage);
  EXPECT_NE(r.error().message.find("memory.stat may lag the kernel by up to " + std::to_string(4 * kMi) + " bytes"),
            std::string::npos)
      << r.error().message;
  // And a stale anon above usage counts as no more than usage.
  tree.set_stat("kubepods/c1", 20 * kMi, 0, 0);
  req.containers[0].desired.memory_limit_bytes = 9 * kMi;
  r = e->resize(req);
  ASSERT_FALSE(r);
  d = r.error().payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d) << r.error().message;
  EXPECT_EQ(d->why, ShrinkWhy::Usage);
  EXPECT_EQ(r.error().message.find("may lag"), std::string::npos) << r.error().message;  // certain without it
  req.containers[0].desired.memory_limit_bytes = 11 * kMi;
  ASSERT_TRUE(e->resize(req));
}

TEST_F(EngineTest, GrowthSeenInMemoryCurrentWhileTheStatIsStale) {
  // memory.stat says anon 0 throughout (never flushed); memory.current,
  // exact, grows 50 MiB/s from 30 MiB. Shrunk to 100 MiB: over it in 1.4 s.
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 30 * kMi, 0, 0);
  Loop loop(/*virtual_time=*/true);
  auto o = options();
  o.schedule = loop.scheduler();
  o.clock = loop.clock();
  o.shrink_timeout = std::chrono::milliseconds(400);
  o.settle = std::chrono::milliseconds(80);
  o.shrink_tick = std::chrono::milliseconds(5);
  auto e = engine(o);
  loop.before_each = [&](double sec) {
    tree.set("kubepods/c1", "memory.current", std::to_string(static_cast<uint64_t>(30.0 * kMi + 50.0 * kMi * sec)));
  };
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 100 * kMi}));
  std::optional<Result<ResizeReport>> out;
  e->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
  ASSERT_TRUE(loop.run([&] { return out.has_value(); }));
  ASSERT_TRUE(out);
  ASSERT_FALSE(*out) << "a growing workload with a stale memory.stat was shrunk";
  const auto* d = out->error().payload_as<ShrinkRefusal>();
  ASSERT_TRUE(d) << out->error().message;
  EXPECT_EQ(d->why, ShrinkWhy::Growth);
  EXPECT_GT(d->growth_bytes_per_sec, 35 * kMi) << d->growth_bytes_per_sec;
  EXPECT_LT(d->growth_bytes_per_sec, 65 * kMi) << d->growth_bytes_per_sec;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");
}

TEST_F(EngineTest, AStaleStatWithFlatUsageIsNotGrowth) {
  // The stat says anon 0 and never moves; memory.current stays at 30 MiB:
  // nothing grows, the shrink to 100 MiB goes ahead.
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 30 * kMi, 0, 0);
  Loop loop(/*virtual_time=*/true);
  auto o = options();
  o.schedule = loop.scheduler();
  o.clock = loop.clock();
  o.shrink_timeout = std::chrono::milliseconds(400);
  o.settle = std::chrono::milliseconds(80);
  o.shrink_tick = std::chrono::milliseconds(5);
  auto e = engine(o);
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 100 * kMi}));
  std::optional<Result<ResizeReport>> out;
  e->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
  ASSERT_TRUE(loop.run([&] { return out.has_value(); }));
  ASSERT_TRUE(out && *out) << out->error().message;
  EXPECT_EQ((*out)->growth_bytes_per_sec, 0);
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(100 * kMi));
}

TEST_F(EngineTest, ReclaimTimeoutNamesTheReason) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  std::string message;
  const ShrinkRefusal d = refused_on_timeout(&message);
  EXPECT_EQ(d.why, ShrinkWhy::Timeout) << message;
  EXPECT_NE(message.find("after reclaiming for "), std::string::npos) << message;
  EXPECT_EQ(message.find("dirty"), std::string::npos) << message;
}

// Page cache that is dirty or under writeback cannot be reclaimed until the
// flusher has written it; the refusal says how much of it there was.
TEST_F(EngineTest, ReclaimTimeoutNamesDirtyPageCache) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  tree.set("kubepods/c1", "memory.stat",
           fmt::format("anon {}\nfile {}\nshmem 0\nfile_dirty {}\nfile_writeback {}\n", 10 * kMi, 90 * kMi,
                       30 * kMi, 8 * kMi));
  std::string message;
  const ShrinkRefusal d = refused_on_timeout(&message);
  EXPECT_EQ(d.why, ShrinkWhy::Timeout) << message;
  EXPECT_EQ(d.dirty, 38 * kMi);
  EXPECT_NE(message.find(fmt::format("({} of the page cache was dirty or under writeback", 38 * kMi)),
            std::string::npos)
      << message;
}

TEST_F(EngineTest, ReclaimOnlyKeepsTheClampUntilReleaseAndWritesNothingElse) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "50000 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  tree.set("kubepods/c1", "memory.high", std::to_string(200 * kMi));
  auto e = engine(options());
  hook = [&](const std::string&, const std::string& file, const std::string&) {
    if (file == "memory.reclaim") tree.set("kubepods/c1", "memory.current", std::to_string(20 * kMi));
  };
  PodResizeRequest req;
  req.mode = WriteMode::ReclaimOnly;
  req.containers.push_back(target("c1", "kubepods/c1", {500, 2000, std::nullopt, 32 * kMi}));
  auto r = e->resize(req);
  ASSERT_TRUE(r) << r.error().message;
  // Room made, the clamp held and journaled; the runtime writes the limits.
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(32 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.max"), std::to_string(256 * kMi));
  EXPECT_EQ(tree.get("kubepods/c1", "cpu.max"), "50000 100000");
  EXPECT_EQ(tree.get("kubepods/c1", "cpu.weight"), "100");
  for (const auto& w : writes)
    EXPECT_TRUE(w.find(":memory.high=") != std::string::npos || w.find(":memory.reclaim=") != std::string::npos) << w;
  EXPECT_FALSE(journaled(tree.state()).empty()) << "no clamp journaled";
  EXPECT_TRUE(r->after.empty()) << "nothing is read back before the runtime writes";
  // What podshim reclaimed to make room counts, though memory.max is the
  // runtime's write (the operator sees the reclaim in podshim_bytes_reclaimed).
  EXPECT_EQ(r->bytes_reclaimed, 80 * kMi);
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_EQ(r->steps[0].file, "memory.high");
  // A second ReclaimOnly resize while the clamp is held keeps the cgroup's own value.
  req.containers[0].desired.memory_limit_bytes = 30 * kMi;
  ASSERT_TRUE(e->resize(req));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(30 * kMi));
  // A third one that is refused leaves the held clamp as it was.
  hook = nullptr;
  tree.set("kubepods/c1", "memory.current", std::to_string(40 * kMi));
  req.containers[0].desired.memory_limit_bytes = 16 * kMi;
  auto refused = e->resize(req);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::ShrinkRefused) << refused.error().message;
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(30 * kMi));
  EXPECT_FALSE(journaled(tree.state()).empty()) << "no clamp journaled";
  // The runtime wrote memory.max; release restores memory.high and drops the journal.
  tree.set("kubepods/c1", "memory.max", std::to_string(30 * kMi));
  ASSERT_TRUE(e->release({"/kubepods/c1", "/kubepods/unknown"}));
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(200 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
  EXPECT_FALSE(e->release({"../etc"}));  // a bad path is named, not ignored
}

TEST_F(EngineTest, ReclaimOnlyClampLeftByACrashIsUndoneByRecover) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  tree.set("kubepods/c1", "memory.high", std::to_string(200 * kMi));
  hook = [&](const std::string&, const std::string& file, const std::string&) {
    if (file == "memory.reclaim") tree.set("kubepods/c1", "memory.current", std::to_string(20 * kMi));
  };
  {
    auto e = engine(options());
    PodResizeRequest req;
    req.mode = WriteMode::ReclaimOnly;
    req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
    ASSERT_TRUE(e->resize(req));
  }  // podshimd dies before the runtime's write lands: no release()
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(32 * kMi));
  auto e = engine(options());
  ASSERT_TRUE(e->recover());
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), std::to_string(200 * kMi));
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, ReclaimOnlyRefusalRestoresTheClamp) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 100 * kMi, 10 * kMi, 90 * kMi);
  auto e = engine(options());  // never reclaims: Timeout
  PodResizeRequest req;
  req.mode = WriteMode::ReclaimOnly;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 32 * kMi}));
  auto r = e->resize(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::ShrinkRefused);
  EXPECT_EQ(tree.get("kubepods/c1", "memory.high"), "max");
  EXPECT_TRUE(journaled(tree.state()).empty()) << "a clamp is still journaled";
}

TEST_F(EngineTest, TestPausesComeFromTheOptionsAndWaitOnTheLoop) {
  tree.add("kubepods/c1", std::to_string(256 * kMi), "max 100000", "100", 40 * kMi, 30 * kMi, 10 * kMi);
  Loop loop;
  auto o = options();
  o.schedule = loop.scheduler();
  o.test_pause_after_clamp = std::chrono::milliseconds(60);
  auto e = engine(o);
  PodResizeRequest req;
  req.containers.push_back(target("c1", "kubepods/c1", {std::nullopt, std::nullopt, std::nullopt, 64 * kMi}));
  std::optional<Result<ResizeReport>> out;
  e->resize(req, [&](Result<ResizeReport> r) { out = std::move(r); });
  // During the pause the clamp is on and journaled, and the loop is free.
  ASSERT_TRUE(loop.run([&] { return tree.get("kubepods/c1", "memory.high") == std::to_string(64 * kMi); }));
  EXPECT_FALSE(out);
  EXPECT_FALSE(journaled(tree.state()).empty()) << "no clamp journaled";
  ASSERT_TRUE(loop.run([&] { return out.has_value(); }));
  ASSERT_TRUE(out && *out) << out->error().message;
  EXPECT_GE((*out)->duration.count(), 60);
}

TEST(AttrValues, WeightFollowsLimitWhenRequestUnset) {
  auto v = attr_values({std::nullopt, 2000, std::nullopt, std::nullopt}, WeightFormula::Quadratic);
  EXPECT_EQ(v.cpu_weight, "174");  // 2048 shares
  EXPECT_EQ(v.cpu_max, "200000 100000");
  EXPECT_EQ(v.memory_max, "max");
  v = attr_values({}, WeightFormula::Quadratic);
  EXPECT_FALSE(v.cpu_weight);
  EXPECT_EQ(v.cpu_max, "max 100000");
}

}  // namespace
}  // namespace podshim::cgroup
