// One kernel OOM kill, counted once: a kill in a container's cgroup (its
// memory.events oom_kill, and its pod's, which the kernel counts
// hierarchically, up by one) is seen by the periodic read-back, a resize's
// engine events and read-back, and the read-back after a runtime event; the
// container's counter, the pod's and podshim_oom_kills_total each say 1
// (shim/core/oom_kills.h), and so does every rendered metric.
#include <gtest/gtest.h>

#include <string>

#include "cgroup/engine.h"
#include "shim/core/engine_actuator.h"
#include "shim/core/metrics.h"
#include "shim/core/readback.h"
#include "shim/core/resize.h"
#include "shim/status/container_metrics.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/testutil/model.h"

namespace podshim::core {
namespace {

using namespace std::chrono_literals;
constexpr int64_t Mi = 1 << 20;

// The engine's actuation, its result delivered when the test says: what
// podshimd's asynchronous engine does (a shrink settles on timers of the
// loop, and the loop runs read-back passes meanwhile). Unless `hold`, the
// result is delivered at once.
class Later : public Actuator {
 public:
  explicit Later(Actuator& inner) : inner_(inner) {}
  void apply(const Actuation& a, Done done) override {
    inner_.apply(a, [this, done = std::move(done)](Result<cgroup::ResizeReport> r) {
      if (!hold) return done(std::move(r));
      held_ = [done, r = std::move(r)] { done(r); };
    });
  }
  Result<cgroup::Actual> read_actual(const std::string& path) override { return inner_.read_actual(path); }
  // Delivers the held result; false when there is none.
  bool complete() {
    auto fn = std::move(held_);
    held_ = nullptr;
    if (!fn) return false;
    fn();
    return true;
  }
  bool hold = false;

 private:
  Actuator& inner_;
  std::function<void()> held_;
};

class OomKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const K8sResources a{250, 500, 256 * Mi, 256 * Mi};
    tree_.add("kubepods/pod1");
    tree_.add("kubepods/pod1/c1", std::to_string(256 * Mi), cgroup::cpu_max_value(500),
              std::to_string(cgroup::milli_cpu_to_weight(250, cgroup::WeightFormula::Quadratic)));
    cgroup::EngineOptions eo;
    eo.cgroup_root = tree_.cg_root();
    eo.state_dir = tree_.state();
    eo.driver = cgroup::DriverKind::Cgroupfs;
    eo.settle = 0ms;
    // The kernel kills in c1 while the resize runs (after its first write).
    eo.after_step = [this](const std::vector<cgroup::StepReport>&) {
      if (!kill_during_resize_) return;
      kill_during_resize_ = false;
      kill();
    };
    auto e = cgroup::Engine::create(eo);
    ASSERT_TRUE(e) << e.error().message;
    actuator_ = std::make_unique<EngineActuator>(std::move(*e));
    later_ = std::make_unique<Later>(*actuator_);
    store_ = Store::in_memory();
    ASSERT_TRUE(testutil::add_web_app(*store_, a));
    ctr_metrics_ = std::make_unique<status::ContainerMetrics>(*store_, 100, true);
    mgr_ = std::make_unique<ResizeManager>(*store_, *later_, NodeAllocatable{4000, 1024 * Mi}, &metrics_);
    ctr_metrics_->observe(*mgr_);
    ReadBackOptions o;
    o.cgroup_root = tree_.cg_root();
    o.driver = cgroup::DriverKind::Cgroupfs;
    o.log = [](log::Level, const std::string&, const std::string&) {};
    auto rb = ReadBack::create(*store_, &actuator_->engine(), &metrics_, std::move(o));
    ASSERT_TRUE(rb) << rb.error().message;
    rb_ = std::move(*rb);
    periodic();  // the first read: oom_kill 0, the baseline
    ASSERT_TRUE(store_->container("c1")->actual);
  }

  // What the kernel does for one kill in c1: memory.events oom_kill + 1 in
  // c1 and, hierarchically, in every ancestor (mm/memcontrol.c
  // memcg_memory_event; Documentation/admin-guide/cgroup-v2.rst).
  void kill() {
    for (const char* rel : {"kubepods/pod1/c1", "kubepods/pod1", "kubepods"})
      tree_.set(rel, "memory.events", "low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\n");
  }
  void periodic() {
    rb_->tick();
    while (rb_->run_slice() > 0) {
    }
  }
  // Every counter that reports the kill must say 1.
  void expect_counted_once(const std::string& when) {
    SCOPED_TRACE(when);
    auto c = store_->container("c1");
    ASSERT_TRUE(c && c->actual);
    EXPECT_EQ(c->actual->oom_kill, 1u) << "container";
    auto p = store_->pod("p1");
    EXPECT_EQ(p && p->actual ? std::optional(p->actual->oom_kill) : std::nullopt, 1u) << "pod (nullopt: no counter)";
    EXPECT_EQ(metrics_.oom_kills.value(), 1) << "podshim_oom_kills_total";
    std::string out = metrics_.render();
    ctr_metrics_->render(out);
    EXPECT_NE(out.find("\npodshim_oom_kills_total 1\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\npodshim_container_oom_kills_total{namespace=\"default\",pod=\"web\",uid=\"p1\","
                       "container=\"app\"} 1\n"),
              std::string::npos)
        << out;
  }

  cgroup::testing::FakeTree tree_;
  bool kill_during_resize_ = false;
  std::unique_ptr<EngineActuator> actuator_;
  std::unique_ptr<Later> later_;
  std::unique_ptr<Store> store_;
  Metrics metrics_;
  std::unique_ptr<status::ContainerMetrics> ctr_metrics_;
  std::unique_ptr<ResizeManager> mgr_;
  std::unique_ptr<ReadBack> rb_;
};

// A status-API resize (the engine writes, WriteMode::All): the kill lands
// in the resize's memory.events deltas of c1 and of the pod cgroup, in the
// periodic pass that ran while it settled, and in the engine's read-back at
// the end.
TEST_F(OomKillTest, AKillDuringAnApiResizeIsCountedOnce) {
  kill_during_resize_ = true;
  later_->hold = true;
  ContainerResize req;
  req.container_id = "c1";
  req.resources.cpu_limit_milli = 800;
  req.resources.memory_limit_bytes = 300 * Mi;
  auto r = mgr_->resize_container(req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_FALSE(kill_during_resize_) << "the engine made no step";
  EXPECT_EQ(r->outcome, ResizeOutcome::InProgress) << r->message;
  periodic();  // while the resize settles
  ASSERT_TRUE(later_->complete());
  EXPECT_EQ(store_->container("c1")->last_outcome, "applied_with_oom_kill");
  expect_counted_once("after the resize");
  rb_->touch("c1");  // PostUpdateContainer's read
  expect_counted_once("after a runtime event");
  periodic();
  expect_counted_once("after the next periodic pass");
}

// A runtime's UpdateContainer (NRI): the resize does not record actual
// values (the runtime writes after podshim answers), the read at
// PostUpdateContainer does.
TEST_F(OomKillTest, AKillDuringARuntimeResizeIsCountedOnce) {
  kill_during_resize_ = true;
  later_->hold = true;
  ResizeIntent in;
  in.source = IntentSource::NriUpdateContainer;
  in.pod_uid = "p1";
  in.pod_cgroup_path = "/kubepods/pod1";
  in.pod_resources = K8sResources{250, 800, 300 * Mi, 300 * Mi};
  ContainerResize cr;
  cr.container_id = "c1";
  cr.resources = K8sResources{250, 800, 300 * Mi, 300 * Mi};
  in.containers.push_back(cr);
  std::optional<Result<ResizeResult>> got;
  mgr_->submit(std::move(in), [&](Result<ResizeResult> r) { got = std::move(r); });
  periodic();  // while the resize settles
  ASSERT_TRUE(later_->complete());
  ASSERT_TRUE(got && *got) << (got ? got->error().message : "no answer");
  ASSERT_FALSE(kill_during_resize_) << "the engine made no step";
  EXPECT_EQ((*got)->outcome, ResizeOutcome::AppliedWithOomKill) << (*got)->message;
  rb_->touch("c1");  // PostUpdateContainer's read
  expect_counted_once("after a runtime event");
  periodic();
  expect_counted_once("after the next periodic pass");
}

// A kill no resize saw: the periodic pass counts it, a later resize's
// read-back (whose own deltas are zero) does not count it again.
TEST_F(OomKillTest, AKillBeforeAResizeIsCountedOnce) {
  kill();
  periodic();
  expect_counted_once("after the periodic pass");
  ContainerResize req;
  req.container_id = "c1";
  req.resources.cpu_limit_milli = 800;
  auto r = mgr_->resize_container(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied) << r->message;
  expect_counted_once("after the resize");
}

// One rule for an actual CPU request, whichever path read it: many requests
// map onto one cpu.weight, and a cgroup holding exactly the weight of the
// request it was given is reported as holding that request. The resize's own
// read at the end of its write and the periodic read-back must agree (they
// once did not: the resize reported the smallest request of the weight).
using ActualTest = OomKillTest;
TEST_F(ActualTest, TheResizeAndTheReadBackReportOneCpuRequest) {
  constexpr auto q = cgroup::WeightFormula::Quadratic;
  int64_t ask = 0;  // a request that is not the smallest one of its weight
  for (int64_t m = 251; m < 500 && !ask; ++m)
    if (cgroup::weight_to_milli_cpu(cgroup::milli_cpu_to_weight(m, q), q) != m) ask = m;
  ASSERT_NE(ask, 0) << "every request in 251..499m is the smallest of its weight";
  ContainerResize req;
  req.container_id = "c1";
  req.resources.cpu_request_milli = ask;
  auto r = mgr_->resize_container(req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcome, ResizeOutcome::Applied) << r->message;
  EXPECT_EQ(tree_.get("kubepods/pod1/c1", "cpu.weight"), std::to_string(cgroup::milli_cpu_to_weight(ask, q)));
  auto c = store_->container("c1");
  ASSERT_TRUE(c && c->actual);
  EXPECT_EQ(c->actual->resources.cpu_request_milli, ask) << "the resize's read";
  periodic();
  c = store_->container("c1");
  EXPECT_EQ(c->actual->resources.cpu_request_milli, ask) << "the periodic read-back";
  rb_->touch("c1");
  EXPECT_EQ(store_->container("c1")->actual->resources.cpu_request_milli, ask) << "the read after a runtime event";
}

}  // namespace
}  // namespace podshim::core
