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

}  // namespace
}  // namespace podshim::core
