// Read-back and drift on a real cgroup v2 kernel, inside the
// qemu guest (tests/vm/vm-run): podshimd --nri=off owns the guest's
// /sys/fs/cgroup; a container registered as podshim-hook registers it gets its
// actual values from the kernel without any resize; a hand edit of memory.max
// (with podshimd's fds on the file already open: a pread at offset 0 must see
// the new value) shows up as drift within one period — in the status API, in
// podshimctl get, in podshim_drift — and is logged once; restored, it ends;
// with readback.repair_drift the allocated value is written back.
// Skips outside the VM.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/str.h"
#include "shim/status/client.h"
#include "tests/kernel/kernel_env.h"
#include "tests/kernel/podshimd_under_test.h"
#include "tests/testutil/shell.h"

namespace {

// put, slurp, wait_for, PodshimdUnderTest, kMi, kCg, ...
using namespace podshim::kernel_test;
using nlohmann::json;
using namespace std::chrono_literals;
namespace status = podshim::status;
constexpr int kPeriodMs = 2000;

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

class ReadBackKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS();
    ASSERT_TRUE(d_.init("/run/podshim-readback", "d71f0000-0000-4000-8000-"));
    podshimctl_ = d_.podshimctl();
    ASSERT_TRUE(make_pod_cgroup(d_.uid(), &pod_));
    ctr_ = kCg + "/" + pod_ + "/c1";
    ASSERT_EQ(mkdir(ctr_.c_str(), 0755), 0);
    // As runc leaves it for a 500m / 256Mi limit; cpu.weight in set_weight().
    ASSERT_TRUE(put(ctr_ + "/memory.max", std::to_string(256 * kMi)));
    ASSERT_TRUE(put(ctr_ + "/cpu.max", "50000 100000"));
  }
  void TearDown() override {
    d_.stop(SIGTERM);
    if (!pod_.empty()) {
      rmdir(ctr_.c_str());
      rmdir((kCg + "/" + pod_).c_str());
    }
    if (::testing::Test::HasFailure() && !d_.dir().empty())
      std::printf("---- podshimd log ----\n%s\n----\n", d_.log().c_str());
  }

  void start_daemon(bool repair) {
    ASSERT_TRUE(d_.start("log_level: info\n"
                         "state_dir: " + d_.dir() + "/state\n"
                         "socket:\n  path: " + d_.socket() + "\n"
                         "cgroup:\n  root: /sys/fs/cgroup\n  driver: cgroupfs\n  weight_formula: quadratic\n"
                         "readback:\n  interval_ms: " + std::to_string(kPeriodMs) + "\n  repair_drift: " +
                         (repair ? "true" : "false") + "\n"));
  }

  podshim::Result<status::HttpResponse> request(std::string_view method, std::string_view target,
                                                std::string_view body = {}) {
    return d_.request(method, target, body);
  }
  json container() {
    auto r = request("GET", "/v1/containers/c1");
    if (!r || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }
  void register_container() { ASSERT_TRUE(d_.register_container("c1", d_.uid(), pod_, "drift")); }
  // Writes the weight the runtime would have for 250m, read from what
  // podshimctl cgroup-values prints (the same conversion podshimd uses).
  void set_weight() {
    ASSERT_FALSE(podshimctl_.empty()) << "PODSHIM_PODSHIMCTL must name podshimctl";
    std::string out = run(podshimctl_ + " cgroup-values --cpu-request 250m --cpu-limit 500m --memory-limit 256Mi");
    json v = json::parse(out, nullptr, false);
    ASSERT_TRUE(v.is_object() && v["cpu.weight"].is_string()) << out;
    const std::string w = v["cpu.weight"];
    ASSERT_TRUE(put(ctr_ + "/cpu.weight", w));
  }
  static std::string run(const std::string& cmd) { return podshim::testutil::run_shell(cmd); }
  std::string metrics() {
    auto r = request("GET", "/metrics");
    return r && r->status == 200 ? r->body : "";
  }
  // Full read-back passes so far (podshim_readback_passes_total); -1 when
  // the metric cannot be read.
  long passes() {
    const std::string m = metrics(), key = "\npodshim_readback_passes_total ";
    auto at = m.find(key);
    return at == std::string::npos ? -1 : std::strtol(m.c_str() + at + key.size(), nullptr, 10);
  }
  // Waits until `n` more passes have completed (each within two periods).
  bool passes_go_by(long n) {
    const long p0 = passes();
    return p0 >= 0 && wait_for([&] { return passes() >= p0 + n; }, std::chrono::milliseconds(2 * n * kPeriodMs));
  }

  PodshimdUnderTest d_;
  std::string podshimctl_, pod_, ctr_;
};

TEST_F(ReadBackKernel, HandEditedMemoryMaxIsDriftWithinOnePeriod) {
  set_weight();
  start_daemon(false);
  register_container();
  // Actual from the kernel without any resize.
  ASSERT_TRUE(wait_for([&] { return container()["actual"].is_object(); }, 5s)) << container().dump();
  json c = container();
  EXPECT_EQ(c["actual"]["memoryLimitBytes"], 256 * kMi) << c.dump();
  EXPECT_EQ(c["actual"]["cpuLimitMilli"], 500) << c.dump();
  EXPECT_EQ(c["actual"]["cpuRequestMilli"], 250) << c.dump();
  EXPECT_TRUE(c["drift"].empty()) << c.dump();
  // Let one periodic pass go by so podshimd reads through its kept fds.
  ASSERT_TRUE(passes_go_by(1)) << "no read-back pass within two periods: " << metrics();
  ASSERT_TRUE(container()["drift"].empty()) << container().dump();

  ASSERT_TRUE(put(ctr_ + "/memory.max", std::to_string(512 * kMi)));
  const auto edited = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_for([&] { return !container()["drift"].empty(); }, std::chrono::milliseconds(3 * kPeriodMs)))
      << "no drift after 3 periods: " << container().dump();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - edited);
  std::printf("drift seen %lld ms after the edit (period %d ms)\n", static_cast<long long>(took.count()), kPeriodMs);
  // One period, plus the timer's coalescing (sd-event: 250 ms) and the
  // slices of the pass under TCG.
  EXPECT_LE(took.count(), kPeriodMs + 750) << "drift not within one period";
  c = container();
  ASSERT_EQ(c["drift"].size(), 1u) << c.dump();
  EXPECT_EQ(c["drift"][0]["resource"], "memory_limit");
  EXPECT_EQ(c["drift"][0]["allocated"], std::to_string(256 * kMi));
  EXPECT_EQ(c["drift"][0]["actual"], std::to_string(512 * kMi));
  EXPECT_EQ(c["actual"]["memoryLimitBytes"], 512 * kMi);
  bool cond = false;
  for (const auto& k : c["conditions"]) cond |= k["type"] == "PodshimDrift";
  EXPECT_TRUE(cond) << c.dump();
  const std::string m = metrics();
  const std::string drift_series =
      "podshim_drift{namespace=\"default\",pod=\"drift\",uid=\"" + d_.uid() + "\",container=\"c1\",resource=\"memory_limit\"} ";
  EXPECT_NE(m.find(drift_series + "1\n"), std::string::npos) << m;
  if (!podshimctl_.empty()) {
    std::string out = run(podshimctl_ + " --socket " + d_.socket() + " get containers c1 2>&1");
    EXPECT_NE(out.find("PodshimDrift"), std::string::npos) << out;
  }
  // Two more passes: still one line, and nothing written back.
  ASSERT_TRUE(passes_go_by(2)) << "no two read-back passes within four periods: " << metrics();
  EXPECT_EQ(count(d_.log(), "Drift: memory.max"), 1) << d_.log();
  EXPECT_EQ(slurp(ctr_ + "/memory.max"), std::to_string(512 * kMi)) << "repair_drift is off";

  ASSERT_TRUE(put(ctr_ + "/memory.max", std::to_string(256 * kMi)));
  ASSERT_TRUE(wait_for([&] { return container()["drift"].empty(); }, std::chrono::milliseconds(kPeriodMs + 1500)))
      << container().dump();
  EXPECT_NE(metrics().find(drift_series + "0\n"), std::string::npos);
  EXPECT_EQ(count(d_.log(), "Drift ended: memory.max"), 1);
}

TEST_F(ReadBackKernel, RepairDriftWritesTheAllocatedValueBack) {
  set_weight();
  start_daemon(true);
  register_container();
  ASSERT_TRUE(wait_for([&] { return container()["actual"].is_object(); }, 5s));
  ASSERT_TRUE(put(ctr_ + "/memory.max", "max"));
  ASSERT_TRUE(wait_for([&] { return slurp(ctr_ + "/memory.max") == std::to_string(256 * kMi); },
                       std::chrono::milliseconds(3 * kPeriodMs)))
      << "memory.max not repaired: " << slurp(ctr_ + "/memory.max");
  ASSERT_TRUE(wait_for([&] { return container()["drift"].empty(); }, std::chrono::milliseconds(2 * kPeriodMs)));
  const std::string log = d_.log();
  EXPECT_EQ(count(log, "Drift repaired: container c1"), 1) << log;
  EXPECT_NE(metrics().find("podshim_drift_repairs_total{result=\"applied\"} 1"), std::string::npos);
}

}  // namespace
