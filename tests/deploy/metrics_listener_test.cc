// metrics.listen parsing and the per-container families' bounds, without a
// daemon (the daemon end to end: deploy-alert-rules).
#include <gtest/gtest.h>

#include <string>

#include "shim/core/config.h"
#include "shim/core/state.h"
#include "shim/status/container_metrics.h"
#include "shim/status/metrics_listener.h"

namespace podshim {
namespace {

TEST(ListenAddress, AcceptsLiteralsOnly) {
  for (const char* ok : {"127.0.0.1:9464", ":9464", "0.0.0.0:0", "[::1]:9464", "[::]:80"}) {
    EXPECT_TRUE(status::parse_listen_address(ok)) << ok;
  }
  for (const char* bad : {"9464", "localhost:9464", "127.0.0.1:", "127.0.0.1:65536", "[::1:9464", "1.2.3:4",
                          "127.0.0.1:-1", "[nothost]:1"}) {
    auto r = status::parse_listen_address(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("metrics.listen"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
}

TEST(Config, MetricsKeys) {
  auto c = core::parse_config("metrics:\n  listen: 127.0.0.1:9464\n  max_containers: 10\n", "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(c->metrics_max_containers, 10u);
  EXPECT_TRUE(core::Config{}.metrics_listen.empty()) << "off by default";
  auto bad = core::parse_config("metrics:\n  lisen: x\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("metrics.lisen"), std::string::npos) << bad.error().message;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) n++;
  return n;
}

// Every container at its most (both conditions, all resources, actual read
// back, a resize outcome) stays within kSeriesPerContainer, the cap on
// containers holds, and a removed container's series go.
TEST(ContainerMetrics, CardinalityIsBounded) {
  auto store = core::Store::in_memory();
  status::ContainerMetrics m(*store, 3, true);
  for (int i = 0; i < 5; ++i) {
    core::Container c;
    c.id = "c" + std::to_string(i);
    c.pod_uid = "p";
    c.name = "n" + std::to_string(i);
    c.allocated = {100, 200, 1 << 20, 2 << 20};
    core::ActualResources a;
    a.resources = {100, 200, std::nullopt, 2 << 20};
    c.actual = a;
    ASSERT_TRUE(store->upsert_container(c));
    c.generation = 1;
    c.conditions.pending = core::Condition{"Deferred", "m", 1, 1};
    c.conditions.in_progress = core::Condition{"Error", "m", 1, 1};
    ASSERT_TRUE(store->upsert_container(c));
  }
  std::string out;
  m.render(out);
  size_t series = 0;
  for (size_t p = 0; (p = out.find("podshim_container_", p)) != std::string::npos; ++p) {
    if (p == 0 || out[p - 1] == '\n') series++;
  }
  EXPECT_LE(series, 3 * status::kSeriesPerContainer) << out;
  EXPECT_EQ(count(out, "container=\"n3\""), 0u) << "beyond max_containers";
  EXPECT_NE(out.find("podshim_container_metrics_dropped 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("outcome=\"deferred\""), std::string::npos) << out;
  EXPECT_NE(out.find("podshim_nri_enabled 1\n"), std::string::npos) << out;
  ASSERT_TRUE(store->remove_container("c0"));
  out.clear();
  m.render(out);
  EXPECT_EQ(count(out, "container=\"n0\""), 0u) << out;
}

}  // namespace
}  // namespace podshim
