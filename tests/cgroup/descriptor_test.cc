// A resource added through one row of the controller table, and nowhere
// else: pids.max (the pids controller, Documentation/admin-guide/cgroup-v2.rst
// "PID"), registered below, goes from the status API's limits through the
// planner, the engine's write on a fake cgroup tree, both read-backs, the
// model's JSON, the metrics, the drift report and the systemd driver's
// property mapping, with no other file of the tree naming it. This file and
// its line in meson.build are the whole change that adds it.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "base/str.h"
#include "cgroup/controllers.h"
#include "cgroup/engine.h"
#include "cgroup/plan.h"
#include "cgroup/unit_manager.h"
#include "shim/core/engine_actuator.h"
#include "shim/core/json.h"
#include "shim/core/metrics.h"
#include "shim/core/readback.h"
#include "shim/core/resize.h"
#include "shim/status/api.h"
#include "shim/status/container_metrics.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/testutil/model.h"

namespace podshim {
namespace {

using namespace std::chrono_literals;
using cgroup::K8sResources;

// ---- The row: pids.max holds a count or "max" (kernel/cgroup/pids.c
// pids_max_write); systemd carries it as TasksMax (runc's mapping,
// opencontainers/cgroups systemd/v2.go).
std::optional<int64_t> pids_count(std::string_view v) {
  auto n = str::parse_u64(v);
  if (!n || *n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(*n);
}
std::optional<std::string> want_pids(const K8sResources& r, const cgroup::ConvertContext&) {
  auto v = cgroup::extra_value(r, "pids");
  if (!v) return std::nullopt;
  return std::to_string(*v);
}
bool pids_differ(std::string_view a, std::string_view b) { return a != b; }
long double pids_magnitude(std::string_view v) {
  if (v == "max") return std::numeric_limits<long double>::infinity();
  return static_cast<long double>(pids_count(v).value_or(0));
}
Result<std::vector<cgroup::UnitProperty>> pids_properties(std::string_view v) {
  if (v == "max") return std::vector<cgroup::UnitProperty>{{"TasksMax", cgroup::kUnitInfinity}};
  auto n = pids_count(v);
  if (!n) return fail(EINVAL, "pids.max: '{}' is not a count", v);
  return std::vector<cgroup::UnitProperty>{{"TasksMax", static_cast<uint64_t>(*n)}};
}
Result<void> read_pids(std::string_view raw, cgroup::Actual& a, cgroup::WeightFormula) {
  if (raw == "max") return {};
  auto n = pids_count(raw);
  if (!n) return fail(EINVAL, "pids.max: '{}' is not a count", raw);
  a.extra["pids"] = *n;
  return {};
}
Result<int64_t> pids_quantity(std::string_view text) {
  auto n = pids_count(text);
  if (!n) return fail(EINVAL, "'{}' is not a number of tasks", text);
  return *n;
}

const cgroup::Controller kPids{
    .file = "pids.max",
    .controller = "pids",
    .limit = true,
    .want = want_pids,
    .differs = pids_differ,
    .magnitude = pids_magnitude,
    .properties = pids_properties,
    .read_back = read_pids,
    .name = "pids",
    .unit = "1",
    .quantity = pids_quantity,
};
const Result<void> registered = cgroup::register_resource(kPids);

// ---- Everything below only uses it.

constexpr int64_t Mi = 1 << 20;

class DescriptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registered) << registered.error().message;
    tree_.add("kubepods/pod1");
    tree_.add("kubepods/pod1/c1", std::to_string(256 * Mi), cgroup::cpu_max_value(500),
              std::to_string(cgroup::milli_cpu_to_weight(250, cgroup::WeightFormula::Quadratic)));
    tree_.set("kubepods/pod1/c1", "pids.max", "max\n");
    cgroup::EngineOptions eo;
    eo.cgroup_root = tree_.cg_root();
    eo.state_dir = tree_.state();
    eo.driver = cgroup::DriverKind::Cgroupfs;
    eo.settle = 0ms;
    eo.after_step = [this](const std::vector<cgroup::StepReport>& steps) {
      for (const auto& s : steps)
        if (s.id == "c1") written_.push_back(s.file);
    };
    auto e = cgroup::Engine::create(eo);
    ASSERT_TRUE(e) << e.error().message;
    actuator_ = std::make_unique<core::EngineActuator>(std::move(*e));
    store_ = core::Store::in_memory();
    ASSERT_TRUE(testutil::add_web_app(*store_, K8sResources{250, 500, 256 * Mi, 256 * Mi}));
    ctr_metrics_ = std::make_unique<status::ContainerMetrics>(*store_, 100, true);
    mgr_ = std::make_unique<core::ResizeManager>(*store_, *actuator_, core::NodeAllocatable{4000, 1024 * Mi},
                                                 &metrics_);
    core::ReadBackOptions o;
    o.cgroup_root = tree_.cg_root();
    o.driver = cgroup::DriverKind::Cgroupfs;
    o.settle = 0ms;
    o.log = [](log::Level, const std::string&, const std::string&) {};
    auto rb = core::ReadBack::create(*store_, &actuator_->engine(), &metrics_, std::move(o));
    ASSERT_TRUE(rb) << rb.error().message;
    rb_ = std::move(*rb);
    status::ServerDeps deps;
    deps.store = store_.get();
    deps.resize = mgr_.get();
    deps.metrics = &metrics_;
    deps.extra_metrics = [this](std::string& out) { ctr_metrics_->render(out); };
    api_ = std::make_unique<status::Api>(deps);
  }

  void periodic() {
    rb_->tick();
    while (rb_->run_slice() > 0) {
    }
  }
  status::Reply resize(const std::string& body) { return api_->handle("POST", "/v1/containers/c1/resize", body); }
  // The container as the API answers it, read with the model's reader.
  core::Container got() {
    status::Reply r = api_->handle("GET", "/v1/containers/c1", "");
    EXPECT_EQ(r.status, 200) << r.text();
    auto j = nlohmann::json::parse(r.text());
    auto c = core::container_from_json(j.is_array() ? j.at(0) : j);
    EXPECT_TRUE(c) << c.error().message << "\n" << r.text();
    return c ? *c : core::Container{};
  }
  std::string metrics() {
    status::Reply r = api_->handle("GET", "/metrics", "");
    EXPECT_EQ(r.status, 200);
    return std::string(r.text());
  }
  static std::string series(const char* family, int64_t v) {
    return fmt::format("\n{}{{namespace=\"default\",pod=\"web\",uid=\"p1\",container=\"app\",resource=\"pids\",unit="
                       "\"1\"}} {}\n",
                       family, v);
  }

  cgroup::testing::FakeTree tree_;
  std::vector<std::string> written_;  // the engine's steps in c1, in order
  std::unique_ptr<core::EngineActuator> actuator_;
  std::unique_ptr<core::Store> store_;
  core::Metrics metrics_;
  std::unique_ptr<status::ContainerMetrics> ctr_metrics_;
  std::unique_ptr<core::ResizeManager> mgr_;
  std::unique_ptr<core::ReadBack> rb_;
  std::unique_ptr<status::Api> api_;
};

TEST_F(DescriptorTest, TheRowIsInTheTableOnce) {
  ASSERT_TRUE(registered) << registered.error().message;
  EXPECT_EQ(cgroup::resource_named("pids"), cgroup::controller_for("pids.max"));
  ASSERT_EQ(cgroup::registered_resources().size(), 1u);
  EXPECT_EQ(cgroup::registered_resources()[0].resource, cgroup::Resource::Other);
  // Taken names and files, and an incomplete row, are refused.
  EXPECT_EQ(cgroup::register_resource(kPids).error().code, EEXIST);
  cgroup::Controller cpu = kPids;
  cpu.name = "cpu";
  cpu.file = "cpu.idle";
  EXPECT_EQ(cgroup::register_resource(cpu).error().code, EEXIST);
  cgroup::Controller on_memory_max = kPids;
  on_memory_max.name = "pids2";
  on_memory_max.file = "memory.max";
  EXPECT_EQ(cgroup::register_resource(on_memory_max).error().code, EEXIST);
  cgroup::Controller no_read = kPids;
  no_read.name = "pids3";
  no_read.file = "pids.other";
  no_read.read_back = nullptr;
  EXPECT_EQ(cgroup::register_resource(no_read).error().code, EINVAL);
  EXPECT_EQ(cgroup::registered_resources().size(), 1u);
}

TEST_F(DescriptorTest, ResizeWritesReadsBackReportsAndExports) {
  // The API's limit, planned after memory, applied to the fake tree.
  status::Reply r = resize(R"({"resources":{"limits":{"pids":"64","memory":"300Mi"}}})");
  ASSERT_EQ(r.status, 200) << r.text();
  EXPECT_EQ(tree_.get("kubepods/pod1/c1", "pids.max"), "64");
  EXPECT_EQ(tree_.get("kubepods/pod1/c1", "memory.max"), std::to_string(300 * Mi));
  EXPECT_EQ(nlohmann::json::parse(r.text()).value("result", ""), "applied") << r.text();
  EXPECT_EQ(written_, (std::vector<std::string>{"memory.max", "pids.max"}));

  // The model: allocated, and actual as the resize's read-back found it.
  core::Container c = got();
  EXPECT_EQ(c.allocated.extra, (cgroup::ExtraValues{{"pids", 64}}));
  ASSERT_TRUE(c.actual);
  EXPECT_EQ(c.actual->resources.extra, c.allocated.extra);

  // The metrics: allocated and actual limits, in the row's unit.
  std::string m = metrics();
  EXPECT_NE(m.find(series("podshim_container_allocated_limits", 64)), std::string::npos) << m;
  EXPECT_NE(m.find(series("podshim_container_actual_limits", 64)), std::string::npos) << m;
  // A limit row is not a request.
  const std::string request = series("podshim_container_allocated_requests", 64);
  EXPECT_EQ(m.find(request.substr(0, request.find('}'))), std::string::npos) << m;

  // The same value again: nothing to do.
  r = resize(R"({"resources":{"limits":{"pids":64}}})");
  ASSERT_EQ(r.status, 200) << r.text();
  EXPECT_EQ(nlohmann::json::parse(r.text()).value("result", ""), "unchanged") << r.text();
  EXPECT_EQ(written_.size(), 2u);
}

TEST_F(DescriptorTest, ThePeriodicReadBackReadsItAndReportsDrift) {
  ASSERT_EQ(resize(R"({"resources":{"limits":{"pids":"64"}}})").status, 200);
  periodic();
  EXPECT_TRUE(got().drift.empty());
  // Someone else writes the file: the periodic read-back reads it and
  // reports drift under the resource's name.
  tree_.set("kubepods/pod1/c1", "pids.max", "100\n");
  periodic();
  core::Container c = got();
  ASSERT_TRUE(c.actual);
  EXPECT_EQ(c.actual->resources.extra.at("pids"), 100);
  ASSERT_EQ(c.drift.size(), 1u);
  EXPECT_EQ(c.drift[0].resource, "pids");
  EXPECT_EQ(c.drift[0].file, "pids.max");
  EXPECT_EQ(c.drift[0].allocated, "64");
  EXPECT_EQ(c.drift[0].actual, "100");
  std::string m = metrics();
  EXPECT_NE(m.find(series("podshim_container_actual_limits", 100)), std::string::npos) << m;
  const std::string drift = "\npodshim_drift{namespace=\"default\",pod=\"web\",uid=\"p1\",container=\"app\",resource=\"pids\"}";
  EXPECT_NE(m.find(drift + " 1\n"), std::string::npos) << m;
  // Written back: the drift ends.
  tree_.set("kubepods/pod1/c1", "pids.max", "64\n");
  periodic();
  EXPECT_TRUE(got().drift.empty());
  EXPECT_NE(metrics().find(drift + " 0\n"), std::string::npos);
}

TEST_F(DescriptorTest, TheApiRefusesWhatTheRowDoesNotAllow) {
  struct Case {
    const char* body;
    const char* want;
  };
  for (const Case& k : {
           Case{R"({"resources":{"requests":{"pids":"64"}}})", "unknown field 'resources.requests.pids'"},
           Case{R"({"resources":{"limits":{"pidz":"64"}}})", "unknown field 'resources.limits.pidz'"},
           Case{R"({"resources":{"limits":{"pids":"many"}}})", "field 'resources.limits.pids'"},
           Case{R"({"resources":{"limits":{"pids":null}}})", "pids cannot be removed"},
           Case{R"({"resources":{"limits":{"pids":true}}})", "must be a quantity string"},
       }) {
    status::Reply r = resize(k.body);
    EXPECT_EQ(r.status, 400) << k.body << " → " << r.text();
    EXPECT_NE(r.text().find(k.want), std::string::npos) << k.body << " → " << r.text();
  }
  // Per container only: a pod's cgroup has no sum of it.
  status::Reply r = api_->handle("POST", "/v1/pods/p1/resize", R"({"resources":{"limits":{"pids":"64"}}})");
  EXPECT_EQ(r.status, 400) << r.text();
  EXPECT_EQ(tree_.get("kubepods/pod1/c1", "pids.max"), "max");
  EXPECT_TRUE(got().allocated.extra.empty());
}

TEST_F(DescriptorTest, PlannedAfterCpuAndMemoryAndMappedForSystemd) {
  const cgroup::Controller* pids = cgroup::controller_for("pids.max");
  const cgroup::Controller* mem = cgroup::controller_for("memory.max");
  const cgroup::Controller* cpu = cgroup::controller_for("cpu.max");
  // A container whose every limit goes down: memory, then cpu, then pids.
  std::vector<cgroup::PlanTarget> t{{"c1",
                                     false,
                                     {{cpu, "50000 100000", "20000 100000"},
                                      {mem, "1048576", "524288"},
                                      {pids, "100", "10"}}}};
  auto plan = cgroup::plan_resize(t);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].changes.at(0).file, "memory.max");
  EXPECT_EQ(plan[1].changes.at(0).file, "cpu.max");
  EXPECT_EQ(plan[2].changes.at(0).file, "pids.max");
  EXPECT_FALSE(plan[2].increase);
  auto p = cgroup::properties_for_attr("pids.max", "64\n");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].name, "TasksMax");
  EXPECT_EQ((*p)[0].value, 64u);
  p = cgroup::properties_for_attr("pids.max", "max");
  ASSERT_TRUE(p && p->size() == 1u);
  EXPECT_EQ((*p)[0].value, cgroup::kUnitInfinity);
}

}  // namespace
}  // namespace podshim
