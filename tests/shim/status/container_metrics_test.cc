// The per-container series of what each actuation did
// (podshim_container_last_resize_duration_seconds and
// podshim_container_memory_shrinks_refused_total), as the resize manager
// reports it (ResizeManager::on_actuation) to status::ContainerMetrics.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "cgroup/engine.h"
#include "shim/core/resize.h"
#include "shim/status/container_metrics.h"
#include "tests/testutil/model.h"

namespace podshim::core {
namespace {

using namespace std::chrono_literals;
constexpr int64_t Mi = 1 << 20;

// Takes `delay` and then applies, or refuses every shrink as the engine does
// when usage stays above the target.
struct ScriptedActuator : Actuator {
  bool refuse = false;
  std::chrono::milliseconds delay{0};
  void apply(const Actuation& a, Done done) override {
    std::this_thread::sleep_for(delay);  // the time the series must report
    if (!refuse) return done(cgroup::ResizeReport{});
    cgroup::ShrinkRefusal r;
    r.id = a.plan.containers.empty() ? "" : a.plan.containers[0].id;
    r.target = 128 * Mi;
    r.usage = 200 * Mi;
    done(Unexpected(cgroup::shrink_refused(r)));
  }
};

class ContainerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = Store::in_memory();
    ASSERT_TRUE(testutil::add_web_app(*store_, K8sResources{250, 500, 256 * Mi, 256 * Mi}));
    metrics_ = std::make_unique<status::ContainerMetrics>(*store_, 100, false);
    mgr_ = std::make_unique<ResizeManager>(*store_, act_, NodeAllocatable{4000, 1024 * Mi});
    metrics_->observe(*mgr_);
  }
  ResizeOutcome resize_memory(int64_t bytes) {
    ContainerResize req;
    req.container_id = "c1";
    req.resources.memory_limit_bytes = bytes;
    req.resources.memory_request_bytes = std::min<int64_t>(bytes, 128 * Mi);
    auto r = mgr_->resize_container(req);
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->outcome : ResizeOutcome::Error;
  }
  // The value of `family`'s series for c1 (-1: none rendered).
  double series(const std::string& family) const {
    std::string out;
    metrics_->render(out);
    const std::string key =
        "\n" + family + "{namespace=\"default\",pod=\"web\",uid=\"p1\",container=\"app\"} ";
    auto at = out.find(key);
    if (at == std::string::npos) return -1;
    return std::stod(out.substr(at + key.size()));
  }

  ScriptedActuator act_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<status::ContainerMetrics> metrics_;
  std::unique_ptr<ResizeManager> mgr_;
};

TEST_F(ContainerMetricsTest, ARefusedShrinkIsCountedOnTheContainer) {
  act_.refuse = true;
  EXPECT_EQ(resize_memory(128 * Mi), ResizeOutcome::Error);
  EXPECT_EQ(series("podshim_container_memory_shrinks_refused_total"), 1);
  // A refused change that lowers no memory limit is not a refused shrink.
  EXPECT_EQ(resize_memory(512 * Mi), ResizeOutcome::Error);
  EXPECT_EQ(series("podshim_container_memory_shrinks_refused_total"), 1);
}

TEST_F(ContainerMetricsTest, TheLastResizeDurationIsTheActuationsTime) {
  act_.delay = 20ms;
  EXPECT_EQ(resize_memory(384 * Mi), ResizeOutcome::Applied);
  EXPECT_GE(series("podshim_container_last_resize_duration_seconds"), 0.020);
  EXPECT_EQ(series("podshim_container_memory_shrinks_refused_total"), 0);
  // Nothing to write: no actuation, and the duration says so.
  act_.delay = 0ms;
  EXPECT_EQ(resize_memory(384 * Mi), ResizeOutcome::Unchanged);
  EXPECT_EQ(series("podshim_container_last_resize_duration_seconds"), 0);
}

}  // namespace
}  // namespace podshim::core
