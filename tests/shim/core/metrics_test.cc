#include <gtest/gtest.h>

#include "shim/core/metrics.h"

namespace podshim::core {
namespace {

TEST(Metrics, ExpositionFormat) {
  Metrics m;
  m.resize_requests.inc({{"result", "applied"}});
  m.resize_requests.inc({{"result", "applied"}});
  m.nri_events.inc({{"event", "weird\"name\\\n"}});
  m.resize_latency.observe({}, 0.003);
  m.resize_latency.observe({}, 5);
  std::string out = m.render();
  EXPECT_NE(out.find("# TYPE podshim_resize_requests_total counter\n"), std::string::npos);
  EXPECT_NE(out.find("podshim_resize_requests_total{result=\"applied\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("podshim_nri_events_total{event=\"weird\\\"name\\\\\\n\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("podshim_resize_duration_seconds_bucket{le=\"0.0025\"} 0\n"), std::string::npos);
  EXPECT_NE(out.find("podshim_resize_duration_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("podshim_resize_duration_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("podshim_resize_duration_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(out.find("# TYPE podshim_nri_connected gauge\npodshim_nri_connected 0\n"), std::string::npos);
}

TEST(Metrics, EscapeHelp) { EXPECT_EQ(escape_help("a\\b\nc\""), "a\\\\b\\nc\""); }

// A labelled counter never starts as one unlabelled 0 that later
// turns into labelled series; its known label values are there at 0 from the
// start, so increase() sees the first increment.
TEST(Metrics, LabelledFamiliesStartWithEveryKnownSeriesAtZero) {
  Metrics m;
  const std::string out = m.render();
  for (const char* want : {
           "podshim_resize_requests_total{result=\"applied\"} 0\n",
           "podshim_resize_requests_total{result=\"applied_with_oom_kill\"} 0\n",
           "podshim_resize_requests_total{result=\"unchanged\"} 0\n",
           "podshim_resize_requests_total{result=\"deferred\"} 0\n",
           "podshim_resize_requests_total{result=\"infeasible\"} 0\n",
           "podshim_resize_requests_total{result=\"restart_required\"} 0\n",
           "podshim_resize_requests_total{result=\"error\"} 0\n",
           "podshim_resize_requests_total{result=\"in_progress\"} 0\n",
           "podshim_resize_requests_total{result=\"invalid\"} 0\n",
           "podshim_memory_shrink_refusals_total{why=\"usage\"} 0\n",
           "podshim_memory_shrink_refusals_total{why=\"growth\"} 0\n",
           "podshim_memory_shrink_refusals_total{why=\"pressure\"} 0\n",
           "podshim_memory_shrink_refusals_total{why=\"timeout\"} 0\n",
           "podshim_http_requests_total{method=\"GET\",code=\"200\"} 0\n",
           "podshim_http_requests_total{method=\"other\",code=\"505\"} 0\n",
           "podshim_watch_dropped_total{reason=\"backlog\"} 0\n",
           "podshim_watch_dropped_total{reason=\"total\"} 0\n",
           "podshim_drift_repairs_total{result=\"applied\"} 0\n",
           "podshim_drift_repairs_total{result=\"failed\"} 0\n",
           "podshim_nri_events_total{event=\"UpdateContainer\"} 0\n",
           "podshim_memory_shrink_pressure_ratio_bucket{kind=\"some\",le=\"0.1\"} 0\n",
           "podshim_memory_shrink_pressure_ratio_count{kind=\"full\"} 0\n",
           // Unlabelled: one series, a histogram with its zero buckets.
           "podshim_resize_duration_seconds_bucket{le=\"+Inf\"} 0\n",
           "podshim_resize_duration_seconds_count 0\n",
           "podshim_oom_kills_total 0\n",
       }) {
    EXPECT_NE(out.find(want), std::string::npos) << "missing " << want;
  }
  for (const char* never : {"podshim_resize_requests_total 0\n", "podshim_http_requests_total 0\n",
                            "podshim_nri_events_total 0\n", "podshim_cpu_weight_formula 0\n",
                            "podshim_cpu_weight_formula_samples 0\n", "podshim_memory_shrink_refusals_total 0\n"}) {
    EXPECT_EQ(out.find(never), std::string::npos) << "unlabelled series in a labelled family: " << never;
  }
  // A labelled family with no known values shows HELP/TYPE and no sample.
  EXPECT_NE(out.find("# TYPE podshim_cpu_weight_formula gauge\n# HELP podshim_cpu_weight_formula_samples"),
            std::string::npos);
  // The first increment moves the preset series; no other series appears.
  m.http_requests.inc({{"method", "POST"}, {"code", "409"}});
  EXPECT_NE(m.render().find("podshim_http_requests_total{method=\"POST\",code=\"409\"} 1\n"), std::string::npos);
}

TEST(Metrics, ClearKeepsThePresetsAtZero) {
  Family f("t_total", "t", Family::Kind::Counter, {"a", "b"});
  f.preset({{"x", "y"}, {"1"}});
  f.inc({{"a", "x"}, {"b", "1"}}, 3);
  f.inc({{"a", "z"}, {"b", "2"}});
  f.clear();
  std::string out;
  f.render(out);
  EXPECT_EQ(out, "# HELP t_total t\n# TYPE t_total counter\nt_total{a=\"x\",b=\"1\"} 0\nt_total{a=\"y\",b=\"1\"} 0\n");
  EXPECT_THROW(f.preset({{"x"}}), std::logic_error);  // one list per label
}

// A cell is its series, found once: what it adds shows in value() and the
// exposition, and it stays valid across clear() and erase(), which set its
// series back to 0 rather than drop it; an unpinned series is still dropped.
TEST(Metrics, ACellAddsToItsSeriesAndOutlivesClearAndErase) {
  Family f("t_total", "help", Family::Kind::Counter, {"k"});
  f.preset({{"a"}});
  auto preset = f.cell({{"k", "a"}});
  auto fresh = f.cell({{"k", "b"}});  // not a preset: created, then pinned
  preset.inc();
  fresh.inc(2);
  f.inc({{"k", "c"}}, 5);
  EXPECT_EQ(f.value({{"k", "a"}}), 1);
  EXPECT_EQ(f.value({{"k", "b"}}), 2);
  std::string out;
  f.render(out);
  EXPECT_NE(out.find("t_total{k=\"a\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("t_total{k=\"b\"} 2\n"), std::string::npos) << out;
  f.clear();
  out.clear();
  f.render(out);
  EXPECT_NE(out.find("t_total{k=\"b\"} 0\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("k=\"c\""), std::string::npos) << out;  // unpinned: dropped
  fresh.inc();
  EXPECT_EQ(f.value({{"k", "b"}}), 1);
  f.erase({{"k", "b"}});
  EXPECT_EQ(f.value({{"k", "b"}}), 0);
  fresh.inc(3);
  preset.inc();
  EXPECT_EQ(f.value({{"k", "b"}}), 3);
  EXPECT_EQ(f.value({{"k", "a"}}), 1);
}

TEST(Metrics, BuildInfo) {
  const std::string out = Metrics().render();
  const auto at = out.find("\npodshim_build_info{version=\"");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  EXPECT_NE(line.find(",commit=\""), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 3), "} 1") << line;
  EXPECT_EQ(line.find("version=\"\""), std::string::npos) << line;
}

}  // namespace
}  // namespace podshim::core
