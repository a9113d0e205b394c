// The read-back and drift tracker (shim/core/readback.h) on a fake cgroup
// tree, with a fake loop and clock: actual for every container after sync and
// create, a hand edit of memory.max reported within one period, one log line
// per drift, repair only when asked, slices within their budget, a bounded
// fd cache.
#include "shim/core/json_writer.h"
#include "shim/core/readback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "base/str.h"
#include "cgroup/engine.h"
#include "shim/core/config.h"
#include "shim/core/engine_actuator.h"
#include "shim/core/json.h"
#include "shim/core/resize.h"
#include "tests/cgroup/fake_tree.h"

namespace podshim::core {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr int64_t Mi = 1 << 20;

// A loop that runs what was scheduled when the test advances its clock.
struct FakeLoop {
  Clock::time_point t{std::chrono::hours(1)};
  std::chrono::microseconds per_call{0};  // the clock moves this much on every now()
  std::multimap<Clock::time_point, std::function<void()>> q;
  Clock::time_point now() {
    t += per_call;
    return t;
  }
  void schedule(std::chrono::milliseconds d, std::function<void()> fn) { q.emplace(t + d, std::move(fn)); }
  void advance(std::chrono::milliseconds d) {
    const auto until = t + d;
    // What a slice schedules "now" runs in this advance too, even when the
    // slice itself moved the clock (per_call).
    while (!q.empty() && q.begin()->first <= std::max(until, t)) {
      auto it = q.begin();
      t = std::max(t, it->first);
      auto fn = std::move(it->second);
      q.erase(it);
      fn();
    }
    t = std::max(t, until);
  }
};

struct Line {
  log::Level level;
  std::string id, msg;
};

class ReadBackTest : public ::testing::Test {
 protected:
  cgroup::EngineOptions engine_options() const {
    cgroup::EngineOptions eo;
    eo.cgroup_root = tree_.cg_root();
    eo.state_dir = tree_.state();
    eo.driver = cgroup::DriverKind::Cgroupfs;
    eo.settle = 0ms;
    return eo;
  }
  void SetUp() override {
    cgroup::EngineOptions eo = engine_options();
    eo.before_write = [this](const std::string&, const std::string& file, const std::string& value) -> Result<void> {
      writes_.push_back(file + "=" + value);
      return {};
    };
    auto e = cgroup::Engine::create(eo);
    ASSERT_TRUE(e) << e.error().message;
    engine_ = std::move(*e);
    store_ = Store::in_memory();
  }

  ReadBackOptions options() {
    ReadBackOptions o;
    o.cgroup_root = tree_.cg_root();
    o.driver = cgroup::DriverKind::Cgroupfs;
    o.formula = cgroup::WeightFormula::Quadratic;
    o.interval = 5000ms;
    o.schedule = [this](std::chrono::milliseconds d, std::function<void()> fn) { loop_.schedule(d, std::move(fn)); };
    o.now = [this] { return loop_.now(); };
    o.log = [this](log::Level l, const std::string& id, const std::string& m) { lines_.push_back({l, id, m}); };
    return o;
  }
  void make(ReadBackOptions o) {
    auto rb = ReadBack::create(*store_, engine_.get(), &metrics_, std::move(o));
    ASSERT_TRUE(rb) << rb.error().message;
    rb_ = std::move(*rb);
  }

  static K8sResources alloc(int64_t req, int64_t lim, int64_t mem) {
    K8sResources r;
    r.cpu_request_milli = req;
    r.cpu_limit_milli = lim;
    r.memory_limit_bytes = mem;
    return r;
  }
  // A cgroup as the runtime leaves it for `a` (quadratic weight).
  void add_cgroup(const std::string& id, const K8sResources& a) {
    tree_.add("kubepods/pod1/" + id, std::to_string(*a.memory_limit_bytes),
              cgroup::cpu_max_value(a.cpu_limit_milli),
              std::to_string(cgroup::milli_cpu_to_weight(*a.cpu_request_milli, cgroup::WeightFormula::Quadratic)));
  }
  void add_container(const std::string& id, const K8sResources& a, std::string state = "running",
                     Source source = Source::Nri) {
    Container c;
    c.id = id;
    c.pod_uid = "p1";
    c.name = id;
    c.cgroup_path = "/kubepods/pod1/" + id;
    c.state = std::move(state);
    c.desired = a;
    c.allocated = a;
    c.source = source;
    ASSERT_TRUE(store_->upsert_container(c));
  }
  // weight_formula: auto, and a container c1 (250m) whose runtime wrote
  // cpu.weight with the linear formula (crun 1.8.1, runc 1.1.5: 256 shares
  // → 10), not read yet.
  std::shared_ptr<cgroup::WeightFormulaTracker> container_of_a_linear_runtime(Source source) {
    auto tracker = std::make_shared<cgroup::WeightFormulaTracker>(cgroup::WeightFormulaSetting::Auto);
    auto o = options();
    o.formulas = tracker;
    make(o);
    rb_->start();
    add_pod();
    add_cgroup("c1", a_);
    tree_.set("kubepods/pod1/c1", "cpu.weight",
              std::to_string(cgroup::milli_cpu_to_weight(250, cgroup::WeightFormula::Linear)) + "\n");
    add_container("c1", a_, "running", source);
    return tracker;
  }
  // The read-back started with the default options and one running
  // container c1 (a_), read once.
  void start_with_c1() {
    make(options());
    rb_->start();
    add_pod();
    add_cgroup("c1", a_);
    add_container("c1", a_);
    loop_.advance(0ms);
  }
  void add_pod() {
    Pod p;
    p.uid = "p1";
    p.name = "web";
    p.namespace_ = "default";
    ASSERT_TRUE(store_->upsert_pod(p));
  }
  std::string mem(const std::string& id) const { return tree_.get("kubepods/pod1/" + id, "memory.max"); }
  int count_lines(std::string_view prefix) const {
    int n = 0;
    for (const auto& l : lines_) n += str::starts_with(l.msg, prefix);
    return n;
  }
  // The value podshim_drift{resource} renders for the container
  // (status::ContainerMetrics renders it from the stored drift).
  double drift_metric(const std::string& id, const std::string& resource) const {
    auto c = store_->container(id);
    if (!c) return 0;
    return std::any_of(c->drift.begin(), c->drift.end(), [&](const Drift& d) { return d.resource == resource; });
  }

  cgroup::testing::FakeTree tree_;
  std::unique_ptr<cgroup::Engine> engine_;
  std::unique_ptr<Store> store_;
  Metrics metrics_;
  FakeLoop loop_;
  std::vector<Line> lines_;
  std::vector<std::string> writes_;
  std::unique_ptr<ReadBack> rb_;
  const K8sResources a_ = alloc(250, 500, 256 * Mi);
};

TEST_F(ReadBackTest, EveryContainerHasActualAfterSynchronize) {
  make(options());
  rb_->start();
  add_pod();
  // What Synchronize does: every container upserted at once, none read.
  for (int i = 0; i < 20; ++i) {
    const std::string id = "c" + std::to_string(i);
    add_cgroup(id, a_);
    add_container(id, a_);
  }
  loop_.advance(0ms);  // the deferred slices, not a period
  for (const auto& c : store_->containers()) {
    ASSERT_TRUE(c.actual) << c.id << " has no actual after sync";
    EXPECT_EQ(c.actual->resources.memory_limit_bytes, 256 * Mi) << c.id;
    EXPECT_EQ(c.actual->resources.cpu_limit_milli, 500) << c.id;
    // The kernel holds exactly the weight of the allocated request.
    EXPECT_EQ(c.actual->resources.cpu_request_milli, 250) << c.id;
    EXPECT_EQ(c.actual->memory_current, 1u << 20) << c.id;
    EXPECT_TRUE(c.drift.empty()) << c.id;
  }
  EXPECT_EQ(rb_->stats().errors, 0u);
}

TEST_F(ReadBackTest, ContainerFromCreateGetsActualOnceItsCgroupExists) {
  make(options());
  rb_->start();
  // CreateContainer: podshim learns the container before the runtime has
  // made its cgroup. Not an error, no log.
  add_container("new", a_);
  loop_.advance(0ms);
  ASSERT_TRUE(store_->container("new"));
  EXPECT_FALSE(store_->container("new")->actual);
  EXPECT_EQ(rb_->stats().gone, 1u);
  EXPECT_EQ(rb_->stats().errors, 0u);
  EXPECT_TRUE(lines_.empty());
  // The runtime creates it; the next period reads it without any event.
  add_cgroup("new", a_);
  loop_.advance(5000ms);
  auto c = store_->container("new");
  ASSERT_TRUE(c->actual) << "no actual one period after the cgroup appeared";
  EXPECT_EQ(c->actual->resources.memory_limit_bytes, 256 * Mi);
}

TEST_F(ReadBackTest, ANewNriContainerIsReadWhenItRunsNotBefore) {
  make(options());
  rb_->start();
  // CreateContainer's container is not running and has no cgroup yet: no
  // read is spent on it.
  add_container("new", a_, "created");
  loop_.advance(0ms);
  EXPECT_EQ(rb_->stats().reads, 0u);
  EXPECT_EQ(rb_->stats().gone, 0u);
  // The runtime makes the cgroup and starts it: the state change reads it.
  add_cgroup("new", a_);
  add_container("new", a_, "running");
  loop_.advance(0ms);
  auto c = store_->container("new");
  ASSERT_TRUE(c->actual) << "not read when it started";
  EXPECT_EQ(c->actual->resources.memory_limit_bytes, 256 * Mi);
  EXPECT_EQ(rb_->stats().reads, 1u);
}

// `runc create` makes the cgroup before it writes its limits; a periodic
// pass between the two must see neither actual values nor drift in the
// kernel's defaults (containerd 1.7.27 + runc 1.1.5 reported such a drift).
TEST_F(ReadBackTest, ACgroupStillBeingMadeIsNotReadBeforeTheContainerRuns) {
  make(options());
  rb_->start();
  add_pod();
  add_container("new", a_, "created");
  tree_.add("kubepods/pod1/new", "max", "max 100000", "100");  // mkdir'd, not written yet
  loop_.advance(5000ms);
  loop_.advance(5000ms);
  auto c = store_->container("new");
  EXPECT_TRUE(c->drift.empty()) << "drift judged on a cgroup the runtime is still making";
  EXPECT_FALSE(c->actual) << "actual values read from the kernel's defaults";
  EXPECT_EQ(count_lines("Drift"), 0);
  // The runtime writes the limits and starts it: read, and right.
  add_cgroup("new", a_);
  add_container("new", a_, "running");
  loop_.advance(0ms);
  c = store_->container("new");
  ASSERT_TRUE(c->actual);
  EXPECT_EQ(c->actual->resources.memory_limit_bytes, 256 * Mi);
  EXPECT_TRUE(c->drift.empty());
}

TEST_F(ReadBackTest, TouchReadsAtOnce) {
  auto o = options();
  o.schedule = nullptr;  // nothing runs by itself: only touch() can read
  make(o);
  add_cgroup("c1", a_);
  add_container("c1", a_);
  EXPECT_FALSE(store_->container("c1")->actual);
  rb_->touch("c1");
  ASSERT_TRUE(store_->container("c1")->actual);
}

// Each read puts the container's memory.current into the usage history the
// engine's shrinks look at, stamped with the read-back's clock; a removed
// container's readings go with it.
TEST_F(ReadBackTest, ReadsFeedTheUsageHistoryForShrinks) {
  auto history = std::make_shared<cgroup::UsageHistory>();
  auto o = options();
  o.usage_history = history;
  make(o);
  rb_->start();
  add_pod();
  add_cgroup("c1", a_);
  add_container("c1", a_);
  tree_.set("kubepods/pod1/c1", "memory.current", std::to_string(10 * Mi));
  loop_.advance(0ms);
  const auto t0 = loop_.now();
  tree_.set("kubepods/pod1/c1", "memory.current", std::to_string(12 * Mi));
  loop_.advance(5000ms);
  tree_.set("kubepods/pod1/c1", "memory.current", std::to_string(13 * Mi));
  rb_->touch("c1");
  auto h = history->samples("c1");
  ASSERT_EQ(h.size(), 2u);  // the touch at the same instant as the pass added nothing
  EXPECT_EQ(h[0].bytes, static_cast<uint64_t>(10 * Mi));
  EXPECT_EQ(h[0].at, t0);
  EXPECT_EQ(h[1].bytes, static_cast<uint64_t>(12 * Mi));
  EXPECT_EQ(h[1].at, t0 + 5000ms);
  ASSERT_TRUE(store_->remove_container("c1"));
  EXPECT_TRUE(history->samples("c1").empty());
  EXPECT_EQ(history->size(), 0u);
}

TEST_F(ReadBackTest, HandEditOfMemoryMaxIsReportedWithinOnePeriodOnce) {
  start_with_c1();
  ASSERT_TRUE(store_->container("c1")->actual);
  ASSERT_EQ(rb_->cached_containers(), 1u);  // the edit must show through kept fds

  tree_.set("kubepods/pod1/c1", "memory.max", std::to_string(512 * Mi) + "\n");
  loop_.advance(5000ms);
  auto c = store_->container("c1");
  ASSERT_EQ(c->drift.size(), 1u) << "hand edit not reported within one period";
  EXPECT_EQ(c->drift[0].resource, "memory_limit");
  EXPECT_EQ(c->drift[0].file, "memory.max");
  EXPECT_EQ(c->drift[0].allocated, std::to_string(256 * Mi));
  EXPECT_EQ(c->drift[0].actual, std::to_string(512 * Mi));
  EXPECT_EQ(c->actual->resources.memory_limit_bytes, 512 * Mi);
  EXPECT_EQ(drift_metric("c1", "memory_limit"), 1);
  auto j = nlohmann::json::parse(json_string(*c));
  bool cond = false;
  for (const auto& k : j["conditions"]) cond |= k["type"] == "PodshimDrift";
  EXPECT_TRUE(cond) << j.dump();
  EXPECT_EQ(j["drift"].size(), 1u);

  // Many more periods: still one line.
  loop_.advance(30000ms);
  EXPECT_EQ(count_lines("Drift:"), 1) << "the drift line was logged more than once";
  EXPECT_EQ(store_->container("c1")->drift.size(), 1u);
  EXPECT_TRUE(writes_.empty()) << "repair_drift is off, yet the engine wrote " << writes_.front();
  EXPECT_EQ(mem("c1"), std::to_string(512 * Mi));

  // Put back: the drift ends once, the metric drops to 0.
  tree_.set("kubepods/pod1/c1", "memory.max", std::to_string(256 * Mi) + "\n");
  loop_.advance(5000ms);
  EXPECT_TRUE(store_->container("c1")->drift.empty());
  EXPECT_EQ(drift_metric("c1", "memory_limit"), 0);
  EXPECT_EQ(count_lines("Drift ended:"), 1);
  loop_.advance(10000ms);
  EXPECT_EQ(count_lines("Drift ended:"), 1);
  EXPECT_EQ(count_lines("Drift:"), 1);

  // A second, different drift is a new line.
  tree_.set("kubepods/pod1/c1", "cpu.max", "200000 100000\n");
  loop_.advance(5000ms);
  EXPECT_EQ(count_lines("Drift:"), 2);
  EXPECT_EQ(drift_metric("c1", "cpu_limit"), 1);
}

// Refuses every memory shrink, as the engine (or the runtime's NRI path)
// does when usage stays above the target; writes nothing.
struct RefusingActuator : Actuator {
  void apply(const Actuation& a, Done done) override {
    cgroup::ShrinkRefusal r;
    r.id = a.plan.containers.empty() ? "" : a.plan.containers[0].id;
    r.target = 128 * Mi;
    r.usage = 200 * Mi;
    done(Unexpected(cgroup::shrink_refused(r)));
  }
};

// A refused shrink leaves the kernel at the values before it: that is the
// resize's error (PodResizeInProgress/Error), not drift. Drift is still
// found, against those values, when someone edits the cgroup afterwards.
TEST_F(ReadBackTest, ARefusedShrinkIsNotDriftButAHandEditAfterItIs) {
  start_with_c1();
  ASSERT_TRUE(store_->container("c1")->drift.empty());

  RefusingActuator refuse;
  ResizeManager mgr(*store_, refuse, NodeAllocatable{4000, 1024 * Mi});
  ContainerResize req;
  req.container_id = "c1";
  req.resources.memory_limit_bytes = 128 * Mi;
  auto r = mgr.resize_container(req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcome, ResizeOutcome::Error);
  auto c = store_->container("c1");
  EXPECT_EQ(c->allocated.memory_limit_bytes, 128 * Mi);  // allocated, as the kubelet does
  ASSERT_TRUE(c->actuated);
  EXPECT_EQ(c->actuated->memory_limit_bytes, 256 * Mi);  // what the kernel kept

  // Long past the settle time and many periods: no drift, no line, and the
  // metric podshim_drift stays 0.
  loop_.advance(30000ms);
  c = store_->container("c1");
  EXPECT_TRUE(c->drift.empty()) << "a refused shrink was reported as drift: " << json_string(*c);
  EXPECT_EQ(drift_metric("c1", "memory_limit"), 0);
  EXPECT_EQ(count_lines("Drift:"), 0);
  ASSERT_TRUE(c->conditions.in_progress);
  EXPECT_EQ(c->conditions.in_progress->reason, "Error");
  auto j = nlohmann::json::parse(json_string(*c));
  for (const auto& k : j["conditions"]) EXPECT_NE(k["type"], "PodshimDrift") << j.dump();
  EXPECT_EQ(j["actuated"]["memoryLimitBytes"], 256 * Mi);
  EXPECT_EQ(j["allocated"]["memoryLimitBytes"], 128 * Mi);

  // Someone writes memory.max by hand: drift, judged against the kept 256 Mi.
  tree_.set("kubepods/pod1/c1", "memory.max", std::to_string(512 * Mi) + "\n");
  loop_.advance(5000ms);
  c = store_->container("c1");
  ASSERT_EQ(c->drift.size(), 1u);
  EXPECT_EQ(c->drift[0].allocated, std::to_string(256 * Mi));
  EXPECT_EQ(c->drift[0].actual, std::to_string(512 * Mi));
  EXPECT_EQ(drift_metric("c1", "memory_limit"), 1);
  // Drift does not touch the resize state.
  ASSERT_TRUE(c->conditions.in_progress);
  EXPECT_EQ(c->conditions.in_progress->reason, "Error");
  EXPECT_FALSE(c->conditions.pending);
}

// One read-back: what a resize stores as the container's actual values (the
// engine's read at the end of its write) is what the periodic read of the
// same cgroup stores, down to a CPU request that many requests share one
// cpu.weight with.
TEST_F(ReadBackTest, AResizeAndThePeriodicReadReportTheSameActual) {
  start_with_c1();
  // A request that its weight does not convert back to.
  int64_t req = 300;
  const auto q = cgroup::WeightFormula::Quadratic;
  while (cgroup::weight_to_milli_cpu(cgroup::milli_cpu_to_weight(req, q), q) == req) ++req;
  ASSERT_LT(req, 1000);

  auto e = cgroup::Engine::create(engine_options());
  ASSERT_TRUE(e) << e.error().message;
  EngineActuator act(std::move(*e));
  ResizeManager mgr(*store_, act, NodeAllocatable{4000, 1024 * Mi});
  ContainerResize r;
  r.container_id = "c1";
  r.resources.cpu_request_milli = req;
  r.resources.memory_limit_bytes = 300 * Mi;
  auto done = mgr.resize_container(r);
  ASSERT_TRUE(done) << done.error().message;
  ASSERT_EQ(done->outcome, ResizeOutcome::Applied);
  const auto after_resize = store_->container("c1")->actual;
  ASSERT_TRUE(after_resize);
  EXPECT_EQ(after_resize->resources.cpu_request_milli, req);
  EXPECT_EQ(after_resize->resources.memory_limit_bytes, 300 * Mi);

  rb_->touch("c1");
  const auto after_read = store_->container("c1")->actual;
  ASSERT_TRUE(after_read);
  EXPECT_EQ(after_read->resources, after_resize->resources);
  EXPECT_EQ(after_read->oom_kill, after_resize->oom_kill);
  EXPECT_TRUE(store_->container("c1")->drift.empty());
}

// Drift alone sets no resize condition: a drifting container is neither
// pending nor in progress.
TEST_F(ReadBackTest, DriftIsNotAResizeState) {
  start_with_c1();
  tree_.set("kubepods/pod1/c1", "memory.max", std::to_string(512 * Mi) + "\n");
  loop_.advance(5000ms);
  auto c = store_->container("c1");
  ASSERT_EQ(c->drift.size(), 1u);
  EXPECT_TRUE(c->conditions.empty());
  EXPECT_FALSE(c->actuated);
  auto j = nlohmann::json::parse(json_string(*c));
  EXPECT_EQ(j["actuated"], j["allocated"]);
  size_t resize_conditions = 0;
  for (const auto& k : j["conditions"])
    resize_conditions += k["type"] == "PodResizePending" || k["type"] == "PodResizeInProgress";
  EXPECT_EQ(resize_conditions, 0u) << j.dump();
}

TEST_F(ReadBackTest, RepairOffWritesNothing) {
  start_with_c1();
  tree_.set("kubepods/pod1/c1", "memory.max", std::to_string(512 * Mi) + "\n");
  tree_.set("kubepods/pod1/c1", "cpu.weight", "7\n");
  tree_.set("kubepods/pod1/c1", "cpu.max", "max 100000\n");
  loop_.advance(20000ms);
  EXPECT_EQ(store_->container("c1")->drift.size(), 3u);
  EXPECT_TRUE(writes_.empty()) << "repair_drift off, yet the engine wrote " << writes_.front();
  EXPECT_EQ(mem("c1"), std::to_string(512 * Mi));
  EXPECT_EQ(tree_.get("kubepods/pod1/c1", "cpu.weight"), "7");
  EXPECT_EQ(tree_.get("kubepods/pod1/c1", "cpu.max"), "max 100000");
  EXPECT_EQ(metrics_.drift_repairs.value({{"result", "applied"}}), 0);
}

TEST_F(ReadBackTest, RepairOnRewritesTheAllocatedValuesOnce) {
  auto o = options();
  o.repair_drift = true;
  make(o);
  rb_->start();
  add_pod();
  add_cgroup("c1", a_);
  add_container("c1", a_);
  loop_.advance(0ms);
  tree_.set("kubepods/pod1/c1", "memory.max", std::to_string(512 * Mi) + "\n");
  tree_.set("kubepods/pod1/c1", "cpu.max", "max 100000\n");
  loop_.advance(5000ms);
  EXPECT_EQ(mem("c1"), std::to_string(256 * Mi));
  EXPECT_EQ(tree_.get("kubepods/pod1/c1", "cpu.max"), "50000 100000");
  EXPECT_EQ(count_lines("Drift repaired:"), 1);
  EXPECT_EQ(metrics_.drift_repairs.value({{"result", "applied"}}), 1);
  loop_.advance(10000ms);
  EXPECT_TRUE(store_->container("c1")->drift.empty());
  EXPECT_EQ(count_lines("Drift ended:"), 2);
  EXPECT_EQ(count_lines("Drift repaired:"), 1);
}

TEST_F(ReadBackTest, UnallocatedStoppedAndMissingAreNeitherDriftNorErrors) {
  make(options());
  rb_->start();
  add_pod();
  tree_.add("kubepods/pod1/free", "123456789", "max 100000", "100");
  add_container("free", K8sResources{});  // not allocated yet
  add_cgroup("done", a_);
  add_container("done", a_, "stopped");
  tree_.set("kubepods/pod1/done", "memory.max", "max\n");
  add_container("gone", a_);  // no cgroup at all
  loop_.advance(20000ms);
  EXPECT_TRUE(store_->container("free")->actual);
  EXPECT_TRUE(store_->container("free")->drift.empty());
  EXPECT_TRUE(store_->container("done")->drift.empty());
  EXPECT_TRUE(store_->container("gone")->drift.empty());
  EXPECT_EQ(rb_->stats().errors, 0u);
  for (const auto& l : lines_) ADD_FAILURE() << "unexpected log line: " << l.msg;
}

TEST_F(ReadBackTest, RemovedContainerDropsItsFdsAndSeries) {
  start_with_c1();
  tree_.set("kubepods/pod1/c1", "memory.max", "max\n");
  loop_.advance(5000ms);
  ASSERT_EQ(drift_metric("c1", "memory_limit"), 1);
  ASSERT_EQ(rb_->cached_containers(), 1u);
  ASSERT_TRUE(store_->remove_container("c1"));
  EXPECT_EQ(rb_->cached_containers(), 0u);
  EXPECT_EQ(metrics_.render().find("container=\"c1\""), std::string::npos) << metrics_.render();
}

TEST_F(ReadBackTest, FdCacheIsBounded) {
  auto o = options();
  o.fd_cache = 3;
  make(o);
  rb_->start();
  for (int i = 0; i < 10; ++i) {
    const std::string id = "c" + std::to_string(i);
    add_cgroup(id, a_);
    add_container(id, a_);
  }
  loop_.advance(0ms);
  EXPECT_EQ(rb_->cached_containers(), 3u);
  loop_.advance(5000ms);
  EXPECT_EQ(rb_->cached_containers(), 3u);
  const auto s = rb_->stats();
  EXPECT_EQ(s.reads, 20u);
  EXPECT_EQ(s.cached_reads, 3u);  // the second pass: 3 through kept fds, 7 opened again
  for (const auto& c : store_->containers()) EXPECT_TRUE(c.actual) << c.id;
}

TEST_F(ReadBackTest, SlicesKeepToTheirBudget) {
  auto o = options();
  o.slice_budget = 1000us;
  make(o);
  for (int i = 0; i < 100; ++i) {
    const std::string id = "c" + std::to_string(i);
    add_cgroup(id, a_);
    add_container(id, a_);
  }
  loop_.per_call = 100us;  // every clock read costs 100 µs of "work"
  const size_t first = rb_->run_slice();
  EXPECT_GE(first, 1u);
  EXPECT_LE(first, 10u) << "a slice ran past its budget";
  EXPECT_EQ(rb_->pending(), 100u - first);
  rb_->start();
  loop_.advance(0ms);
  loop_.per_call = 0us;
  EXPECT_EQ(rb_->pending(), 0u);
  EXPECT_GT(rb_->stats().slices, 10u);
  for (const auto& c : store_->containers()) EXPECT_TRUE(c.actual) << c.id;
}

// readback.slice_budget_us set in the file reaches the read-back through
// podshimd's own mapping (readback_options): with every clock read costing
// 100 µs of "work", a slice stops after 100 µs here, after 2000 µs by default.
TEST_F(ReadBackTest, SliceBudgetFromTheConfigBoundsEachSlice) {
  const std::string tree = "cgroup:\n  root: " + tree_.cg_root() + "\n  driver: cgroupfs\n";
  auto configured = parse_config(tree + "readback:\n  slice_budget_us: 100\n", "t.yaml");
  auto by_default = parse_config(tree, "t.yaml");
  ASSERT_TRUE(configured) << configured.error().message;
  ASSERT_TRUE(by_default) << by_default.error().message;
  for (int i = 0; i < 100; ++i) {
    const std::string id = "c" + std::to_string(i);
    add_cgroup(id, a_);
    add_container(id, a_);
  }
  auto first_slice = [&](const Config& c) {
    ReadBackOptions o = readback_options(c);
    o.now = [this] { return loop_.now(); };
    o.log = [this](log::Level l, const std::string& id, const std::string& m) { lines_.push_back({l, id, m}); };
    make(o);  // every container queued; no schedule: the test runs the slice
    loop_.per_call = 100us;
    const size_t n = rb_->run_slice();
    loop_.per_call = 0us;
    return n;
  };
  const size_t small = first_slice(*configured), large = first_slice(*by_default);
  EXPECT_GE(small, 1u);
  EXPECT_LE(small, 2u) << "a slice ran past readback.slice_budget_us";
  EXPECT_GE(large, 5u * small) << "the default budget is twenty times longer";
}

TEST_F(ReadBackTest, CpuRequestUsesTheFormulaInUse) {
  auto tracker = container_of_a_linear_runtime(Source::Nri);
  const uint64_t linear = cgroup::milli_cpu_to_weight(250, cgroup::WeightFormula::Linear);
  loop_.advance(0ms);
  // Nothing learned yet: either formula's weight is in step.
  EXPECT_TRUE(store_->container("c1")->drift.empty());
  // PostStartContainer with the shares the runtime was asked for teaches
  // the formula; the request then reads back as the allocated one.
  rb_->touch("c1", cgroup::milli_cpu_to_shares(250));
  ASSERT_EQ(tracker->learned(), cgroup::WeightFormula::Linear);
  EXPECT_EQ(store_->container("c1")->actual->resources.cpu_request_milli, 250);
  EXPECT_TRUE(store_->container("c1")->drift.empty());
  EXPECT_EQ(count_lines("The runtime writes cpu.weight with the linear formula"), 1);
  // Someone rewrites the weight: drift on cpu_request.
  tree_.set("kubepods/pod1/c1", "cpu.weight", "500\n");
  loop_.advance(5000ms);
  auto c = store_->container("c1");
  ASSERT_EQ(c->drift.size(), 1u);
  EXPECT_EQ(c->drift[0].resource, "cpu_request");
  EXPECT_EQ(c->drift[0].allocated, std::to_string(linear));
  EXPECT_EQ(c->drift[0].actual, "500");
}

// hooks.d mode has no NRI to pass the shares: the hook's registration
// carries the request the spec's shares stand for, and the first read of the
// container (the runtime's own cpu.weight) teaches the formula.
TEST_F(ReadBackTest, HookRegistrationTeachesTheFormulaAtItsFirstRead) {
  auto tracker = container_of_a_linear_runtime(Source::Hook);
  loop_.advance(0ms);
  ASSERT_EQ(tracker->learned(), cgroup::WeightFormula::Linear);
  EXPECT_EQ(store_->container("c1")->actual->resources.cpu_request_milli, 250);
  EXPECT_TRUE(store_->container("c1")->drift.empty());
  EXPECT_EQ(count_lines("The runtime writes cpu.weight with the linear formula"), 1);
}

// PostStart/PostUpdateContainer are answered first: the read (and what it
// teaches) comes at the head of the next slice, not inside the event.
TEST_F(ReadBackTest, TouchSoonReadsRightAfterTheEventWithItsShares) {
  auto tracker = container_of_a_linear_runtime(Source::Nri);
  loop_.advance(0ms);  // the read of its start: no shares, nothing learned
  const uint64_t reads = rb_->stats().reads;
  ASSERT_FALSE(tracker->learned().has_value());
  rb_->touch_soon("c1", cgroup::milli_cpu_to_shares(250));
  EXPECT_EQ(rb_->stats().reads, reads) << "read inside the event";
  EXPECT_FALSE(tracker->learned().has_value());
  loop_.advance(0ms);
  EXPECT_EQ(rb_->stats().reads, reads + 1);
  EXPECT_EQ(tracker->learned(), cgroup::WeightFormula::Linear);
}

// A weight podshim wrote itself teaches nothing: a hook-registered container
// resized before its first read is not evidence of the runtime's formula.
TEST_F(ReadBackTest, HookContainerResizedBeforeItsFirstReadTeachesNothing) {
  auto tracker = container_of_a_linear_runtime(Source::Hook);
  ASSERT_TRUE(store_->update_container("c1", [](Container& c) { c.allocated.cpu_request_milli = 500; }));
  loop_.advance(0ms);
  EXPECT_FALSE(tracker->learned().has_value());
}

TEST_F(ReadBackTest, FreshAllocationIsNotJudgedUntilItSettles) {
  start_with_c1();
  // UpdateContainer: podshim accepted 128Mi; the runtime has not written it.
  ASSERT_TRUE(store_->update_container("c1", [](Container& c) { c.allocated.memory_limit_bytes = 128 * Mi; }));
  rb_->touch("c1");
  EXPECT_TRUE(store_->container("c1")->drift.empty()) << "judged an allocation the runtime is still writing";
  // Never written: drift once settled.
  loop_.advance(5000ms);
  EXPECT_EQ(store_->container("c1")->drift.size(), 1u);
}

TEST_F(ReadBackTest, DriftSurvivesAnUpsertThatDropsIt) {
  start_with_c1();
  tree_.set("kubepods/pod1/c1", "memory.max", "max\n");
  loop_.advance(5000ms);
  ASSERT_EQ(store_->container("c1")->drift.size(), 1u);
  // A runtime event rebuilds the container without podshim's fields.
  add_container("c1", a_);
  loop_.advance(0ms);
  EXPECT_EQ(store_->container("c1")->drift.size(), 1u);
  EXPECT_EQ(count_lines("Drift:"), 1);
}

// While a Synchronize arrives, its upserts queue containers but no slice
// reads them; touch_all() (the last page) reads them all, and a hold that
// is never ended lapses.
TEST_F(ReadBackTest, HoldDefersReadsUntilTheSyncEnds) {
  make(options());
  add_pod();
  rb_->hold();
  for (const char* id : {"c1", "c2", "c3"}) {
    add_cgroup(id, a_);
    add_container(id, a_);
  }
  loop_.advance(1ms);
  EXPECT_EQ(rb_->stats().reads, 0u) << "read between the pages of a sync";
  rb_->touch_all();
  loop_.advance(1ms);
  EXPECT_EQ(rb_->stats().reads, 3u);

  rb_->hold();  // a sync the runtime never finishes
  add_cgroup("c4", a_);
  add_container("c4", a_);
  loop_.advance(1ms);
  EXPECT_EQ(rb_->stats().reads, 3u);
  loop_.advance(ReadBack::kMaxHold);
  EXPECT_EQ(rb_->stats().reads, 4u) << "the hold lapsed";
}

TEST(ReadBackConfig, KeysParseAndBadValuesNameTheKey) {
  auto c = parse_config("readback:\n  interval_ms: 1000\n  slice_budget_us: 500\n  fd_cache: 0\n  repair_drift: true\n",
                        "t");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->readback_interval, 1000ms);
  EXPECT_EQ(c->readback_slice_budget, 500us);
  EXPECT_EQ(c->readback_fd_cache, 0u);
  EXPECT_TRUE(c->repair_drift);
  auto d = parse_config("", "t");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->readback_interval, 5000ms);
  EXPECT_FALSE(d->repair_drift);
  for (const char* bad : {"readback:\n  interval_ms: 10\n", "readback:\n  slice_budget_us: 1\n",
                          "readback:\n  repair_drift: maybe\n", "readback:\n  period: 1\n"}) {
    auto r = parse_config(bad, "t");
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("readback"), std::string::npos) << r.error().message;
  }
}

// docs/config.yaml.example lists the readback defaults.
TEST(ReadBackConfig, DocumentedExampleHasTheDefaults) {
  const char* src = getenv("PODSHIM_SRC");
  if (!src) GTEST_SKIP() << "run through meson test";
  auto c = load_config(std::string(src) + "/docs/config.yaml.example", true);
  ASSERT_TRUE(c) << c.error().message;
  Config d;
  EXPECT_EQ(c->readback_interval, d.readback_interval);
  EXPECT_EQ(c->readback_slice_budget, d.readback_slice_budget);
  EXPECT_EQ(c->readback_fd_cache, d.readback_fd_cache);
  EXPECT_EQ(c->repair_drift, d.repair_drift);
}

}  // namespace
}  // namespace podshim::core
