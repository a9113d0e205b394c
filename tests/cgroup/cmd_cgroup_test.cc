// podshimctl cgroup-values, called through its registry entry.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "shim/ctl/registry.h"
#include "tests/testutil/ctl_run.h"

namespace podshim::ctl {
namespace {

testutil::CtlRun run(std::vector<std::string> args) { return testutil::run_ctl("cgroup-values", std::move(args)); }

TEST(CgroupValues, PrintsTheStringsWritten) {
  auto r = run({"--cpu-request", "250m", "--cpu-limit", "500m", "--memory-limit", "128Mi"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cpu.weight"], "35");
  EXPECT_EQ(j["cpu.max"], "50000 100000");
  EXPECT_EQ(j["memory.max"], "134217728");
  EXPECT_EQ(j["weight_formula"], "quadratic");
}

TEST(CgroupValues, LinearAndUnsetValues) {
  auto r = run({"--cpu-request=1", "--weight-formula", "linear"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cpu.weight"], "39");
  EXPECT_EQ(j["cpu.max"], "max 100000");
  EXPECT_EQ(j["memory.max"], "max");
}

TEST(CgroupValues, WeightFollowsLimitWithoutRequest) {
  auto r = run({"--cpu-limit", "2"});
  ASSERT_EQ(r.code, kExitOk);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cpu.weight"], "174");
  EXPECT_EQ(j["cpu.max"], "200000 100000");
  r = run({});
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cpu.weight"], "1");  // MinShares
}

TEST(CgroupValues, SystemdRounding) {
  auto r = run({"--cpu-limit", "125m", "--cgroup-driver", "systemd"});
  ASSERT_EQ(r.code, kExitOk);
  EXPECT_EQ(nlohmann::json::parse(r.out)["cpu.max"], "13000 100000");
}

TEST(CgroupValues, BadInputIsAUsageError) {
  for (std::vector<std::string> a : std::vector<std::vector<std::string>>{
           {"--cpu-request", "lots"}, {"--memory-limit", "-1Gi"}, {"--weight-formula", "cubic"},
           {"--cpu-limit"}, {"--frobnicate", "1"}}) {
    auto r = run(a);
    EXPECT_EQ(r.code, kExitUsage) << a[0];
    EXPECT_TRUE(r.out.empty());
    EXPECT_NE(r.err.find("cgroup-values"), std::string::npos);
  }
  auto r = run({"--cpu-request", "lots"});
  EXPECT_NE(r.err.find("'lots'"), std::string::npos) << r.err;
}

TEST(CgroupValues, RefusesWhatTheKernelWouldRefuse) {
  // 10^13 cores once printed a cpu.max the kernel answers with EINVAL (the quota
  // must fit the kernel's max_cfs_runtime, kernel/sched/core.c).
  auto r = run({"--cpu-limit", "10000000000000"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("cpu limit 10000000000000: cpu.max quota 1000000000000000000 us exceeds the kernel's "
                       "maximum 17592186044415 us (max_cfs_runtime"),
            std::string::npos) << r.err;
  // The largest limit the kernel takes still prints.
  r = run({"--cpu-limit", "175921860444m"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["cpu.max"], "17592186044400 100000");
  // systemd's 10 ms round-up raises the quota written: the bound is lower there.
  r = run({"--cpu-limit", "175921860444m", "--cgroup-driver", "systemd"});
  EXPECT_EQ(r.code, kExitUsage) << r.out;
  r = run({"--memory-limit", "100"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("below one page"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace podshim::ctl
