// The labels of podshimd's metrics, without a daemon:
//   - every per-container series, podshim_drift included, carries
//     kube-state-metrics' namespace, pod, uid and container (names), in that
//     order, for NRI-registered and hook-registered containers alike;
//   - podshim_drift is 0 in step, 1 while drifting, and goes with the
//     container;
//   - the label values core::Metrics presets at 0 cover every value the code
//     can produce where that set lives in another component: every status the
//     status server has a reason phrase for, every NRI event name.
// The daemon end to end (every series of a real scrape): deploy-alert-rules.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "shim/core/metrics.h"
#include "shim/core/readback.h"
#include "shim/core/state.h"
#include "shim/nri/events.h"
#include "shim/status/container_metrics.h"
#include "shim/status/http.h"

namespace podshim {
namespace {

// name{labels} value lines of `family`, labels as written.
std::vector<std::pair<std::string, std::string>> lines_of(const std::string& out, const std::string& family) {
  std::vector<std::pair<std::string, std::string>> v;
  const std::regex line("^" + family + "\\{([^}]*)\\} (\\S+)$");
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::smatch m;
    std::string l = out.substr(start, end - start);
    if (std::regex_match(l, m, line)) v.emplace_back(m[1], m[2]);
    start = end + 1;
  }
  return v;
}

class Labels : public ::testing::Test {
 protected:
  void SetUp() override {
    core::Pod p;
    p.uid = "0f1e2d3c-uid";
    p.name = "web-1";
    p.namespace_ = "shop";
    ASSERT_TRUE(store_->upsert_pod(p));
    core::Container c;
    c.id = "c0ffee";
    c.pod_uid = p.uid;
    c.name = "app";
    c.state = "running";
    c.allocated = {250, 500, 64 << 20, 128 << 20};
    core::ActualResources a;
    a.resources = {250, 500, std::nullopt, 128 << 20};
    a.memory_current = 1000;
    c.actual = a;
    c.generation = 1;
    c.conditions.pending = core::Condition{"Deferred", "m", 1, 1};
    ASSERT_TRUE(store_->upsert_container(c));
    // podshim-hook registers containers with the CRI annotations and no pod.
    core::Container h;
    h.id = "beef";
    h.name = "sidecar";
    h.state = "running";
    h.allocated = {100, std::nullopt, std::nullopt, 64 << 20};
    h.actual = a;
    h.annotations = {{"io.kubernetes.pod.namespace", "jobs"},
                     {"io.kubernetes.pod.name", "batch-1"},
                     {"io.kubernetes.pod.uid", "9a8b-uid"}};
    ASSERT_TRUE(store_->upsert_container(h));
  }
  std::string render() const {
    std::string out;
    m_.render(out);
    return out;
  }
  std::unique_ptr<core::Store> store_ = core::Store::in_memory();
  status::ContainerMetrics m_{*store_, 100, true};
};

TEST_F(Labels, EveryPerContainerSeriesCarriesNamespacePodUidContainer) {
  const std::string out = render();
  std::set<std::string> families;
  const std::regex type("# TYPE (\\S+) ");
  for (std::sregex_iterator it(out.begin(), out.end(), type), end; it != end; ++it)
    families.insert((*it)[1]);
  ASSERT_TRUE(families.count("podshim_drift")) << out;
  size_t per_container = 0;
  for (const auto& f : families) {
    for (const auto& [labels, value] : lines_of(out, f)) {
      ++per_container;
      const bool app = labels.rfind(R"(namespace="shop",pod="web-1",uid="0f1e2d3c-uid",container="app")", 0) == 0;
      const bool hook =
          labels.rfind(R"(namespace="jobs",pod="batch-1",uid="9a8b-uid",container="sidecar")", 0) == 0;
      EXPECT_TRUE(app || hook) << f << "{" << labels << "} does not start with namespace, pod, uid, container";
    }
  }
  // Only podshim_container_metrics_dropped and podshim_nri_enabled are node-wide here.
  EXPECT_GE(per_container, 20u) << out;
  EXPECT_NE(out.find("\npodshim_container_metrics_dropped 0\n"), std::string::npos) << out;
}

TEST_F(Labels, DriftIsZeroInStepOneWhileDriftingAndGoesWithTheContainer) {
  const std::string prefix = R"(podshim_drift{namespace="shop",pod="web-1",uid="0f1e2d3c-uid",container="app",)";
  std::string out = render();
  for (const char* r : {"cpu_request", "cpu_limit", "memory_limit"})
    EXPECT_NE(out.find(prefix + "resource=\"" + r + "\"} 0\n"), std::string::npos) << out;
  ASSERT_TRUE(store_->update_container("c0ffee", [](core::Container& c) {
    c.drift.push_back(core::Drift{std::string(core::kDriftMemoryLimit), "memory.max", "134217728", "100", 1});
  }));
  out = render();
  EXPECT_NE(out.find(prefix + R"(resource="memory_limit"} 1)" "\n"), std::string::npos) << out;
  EXPECT_NE(out.find(prefix + R"(resource="cpu_limit"} 0)" "\n"), std::string::npos) << out;
  // Stopped: the runtime removes its cgroup, nothing is judged.
  ASSERT_TRUE(store_->update_container("c0ffee", [](core::Container& c) {
    c.state = "stopped";
    c.drift.clear();
  }));
  EXPECT_EQ(render().find(prefix), std::string::npos);
  ASSERT_TRUE(store_->remove_container("c0ffee"));
  EXPECT_EQ(render().find("container=\"app\""), std::string::npos);
}

// Every final status the server has a reason phrase for is preset for every
// method the server counts (server.cc count_metric: GET, HEAD, POST, DELETE,
// other), so a new status code cannot be added without its zero series.
TEST(Presets, HttpCodesAreEveryStatusTheServerCanSend) {
  const std::string out = core::Metrics().render();
  std::set<std::string> preset_codes;
  for (const auto& [labels, value] : lines_of(out, "podshim_http_requests_total")) {
    EXPECT_EQ(value, "0") << labels;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(labels, m, std::regex(R"re(method="(\w+)",code="(\d+)")re"))) << labels;
    preset_codes.insert(m[2]);
  }
  std::set<std::string> sent;
  for (int code = 200; code < 600; ++code)
    if (status::reason_phrase(code) != status::reason_phrase(599)) sent.insert(std::to_string(code));
  EXPECT_EQ(preset_codes, sent);
  for (const char* m : {"GET", "HEAD", "POST", "DELETE", "other"})
    EXPECT_NE(out.find(std::string("podshim_http_requests_total{method=\"") + m + "\",code=\"200\"} 0\n"),
              std::string::npos)
        << m;
}

TEST(Presets, NriEventsAreEveryEventName) {
  const std::string out = core::Metrics().render();
  std::set<std::string> preset;
  for (const auto& [labels, value] : lines_of(out, "podshim_nri_events_total")) preset.insert(labels);
  std::set<std::string> names;
  for (int e = nri::api::Event_MIN; e <= nri::api::Event_MAX; ++e) {
    const auto n = nri::event_name(static_cast<nri::api::Event>(e));
    if (n != "Unknown") names.insert("event=\"" + std::string(n) + "\"");
  }
  EXPECT_EQ(preset, names);
}

}  // namespace
}  // namespace podshim
