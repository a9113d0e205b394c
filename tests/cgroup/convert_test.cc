#include "cgroup/convert.h"

#include <gtest/gtest.h>

namespace podshim::cgroup {
namespace {

TEST(Convert, SharesLikeTheKubelet) {
  EXPECT_EQ(milli_cpu_to_shares(0), 2u);
  EXPECT_EQ(milli_cpu_to_shares(1), 2u);
  EXPECT_EQ(milli_cpu_to_shares(2), 2u);
  EXPECT_EQ(milli_cpu_to_shares(3), 3u);
  EXPECT_EQ(milli_cpu_to_shares(100), 102u);
  EXPECT_EQ(milli_cpu_to_shares(1000), 1024u);
  EXPECT_EQ(milli_cpu_to_shares(256000), 262144u);
  EXPECT_EQ(milli_cpu_to_shares(10000000), 262144u);
  EXPECT_EQ(shares_to_milli_cpu(1024), 1000);
  EXPECT_EQ(shares_to_milli_cpu(102), 100);
  EXPECT_EQ(shares_to_milli_cpu(2), 2);
}

TEST(Convert, WeightFormulasPassTheirAnchors) {
  // Linear: runc < 1.3.2, crun < 1.23 (runc#4772: "1024 … translates to 39").
  EXPECT_EQ(shares_to_weight(2, WeightFormula::Linear), 1u);
  EXPECT_EQ(shares_to_weight(1024, WeightFormula::Linear), 39u);
  EXPECT_EQ(shares_to_weight(262144, WeightFormula::Linear), 10000u);
  EXPECT_EQ(shares_to_weight(8192, WeightFormula::Linear), 313u);  // kubernetes#139790: 8 CPUs
  // Quadratic: runc ≥ 1.3.2, crun ≥ 1.23 through (2,1), (1024,100), (262144,10000).
  EXPECT_EQ(shares_to_weight(2, WeightFormula::Quadratic), 1u);
  EXPECT_EQ(shares_to_weight(1024, WeightFormula::Quadratic), 100u);
  EXPECT_EQ(shares_to_weight(262144, WeightFormula::Quadratic), 10000u);
  EXPECT_EQ(shares_to_weight(0, WeightFormula::Quadratic), 0u);
  EXPECT_EQ(milli_cpu_to_weight(100, WeightFormula::Quadratic), 17u);
  EXPECT_EQ(milli_cpu_to_weight(100, WeightFormula::Linear), 4u);
  EXPECT_EQ(milli_cpu_to_weight(500, WeightFormula::Quadratic), 59u);
  EXPECT_EQ(*parse_formula("linear"), WeightFormula::Linear);
  EXPECT_FALSE(parse_formula("cubic"));
}

TEST(Convert, FormulaSettings) {
  EXPECT_EQ(*parse_formula_setting("auto"), WeightFormulaSetting::Auto);
  EXPECT_EQ(*parse_formula_setting("linear"), WeightFormulaSetting::Linear);
  EXPECT_EQ(*parse_formula_setting("quadratic"), WeightFormulaSetting::Quadratic);
  EXPECT_FALSE(parse_formula_setting("Auto"));
  EXPECT_EQ(setting_name(WeightFormulaSetting::Auto), "auto");
}

// The premise of weight_formula: auto — for most share values exactly one
// formula produces the weight a runtime wrote.
TEST(Convert, FormulasDisagreeForMostShares) {
  uint64_t both = 0, total = 0;
  for (uint64_t s = kMinShares; s <= kMaxShares; ++s, ++total) {
    const WeightVote lin = classify_weight(s, shares_to_weight(s, WeightFormula::Linear));
    const WeightVote quad = classify_weight(s, shares_to_weight(s, WeightFormula::Quadratic));
    if (lin == WeightVote::Both) {
      ASSERT_EQ(quad, WeightVote::Both) << s;
      ++both;
      continue;
    }
    ASSERT_EQ(lin, WeightVote::Linear) << s;
    ASSERT_EQ(quad, WeightVote::Quadratic) << s;
  }
  EXPECT_LT(both * 100, total) << both << " of " << total << " share values map alike";
  // Every milliCPU request a kubelet sends from 10m up is decisive, except
  // where both formulas meet.
  EXPECT_EQ(classify_weight(2, 1), WeightVote::Both);
  EXPECT_EQ(classify_weight(262144, 10000), WeightVote::Both);
  EXPECT_EQ(classify_weight(512, 20), WeightVote::Linear);     // 500m on runc 1.1.5
  EXPECT_EQ(classify_weight(512, 59), WeightVote::Quadratic);  // 500m on runc >= 1.3.2
  EXPECT_EQ(classify_weight(512, 100), WeightVote::Neither);
}

TEST(Convert, TrackerLearnsPerRuntime) {
  WeightFormulaTracker t(WeightFormulaSetting::Auto);
  EXPECT_EQ(t.formula(), WeightFormula::Quadratic);  // fallback, no evidence
  EXPECT_FALSE(t.learned());
  t.set_runtime("containerd v1.7.27");
  EXPECT_TRUE(t.wants_samples());
  EXPECT_EQ(t.observe(2, 1), WeightVote::Both);  // no evidence
  EXPECT_FALSE(t.learned());
  EXPECT_EQ(t.observe(512, 20), WeightVote::Linear);
  EXPECT_EQ(t.formula(), WeightFormula::Linear);
  EXPECT_EQ(t.observe(1024, 50), WeightVote::Neither);  // rewritten since: no vote
  EXPECT_EQ(t.formula(), WeightFormula::Linear);
  auto st = t.status();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].runtime, "containerd v1.7.27");
  EXPECT_EQ(st[0].source, WeightFormulaTracker::Source::Learned);
  EXPECT_EQ(st[0].evidence.linear, 1u);
  EXPECT_EQ(st[0].evidence.both, 1u);
  EXPECT_EQ(st[0].evidence.neither, 1u);

  // Another runtime (upgraded): learned afresh; the first one is remembered.
  t.set_runtime("containerd v2.3.4");
  EXPECT_EQ(t.formula(), WeightFormula::Quadratic);
  EXPECT_FALSE(t.learned());
  t.observe(1024, 100);
  EXPECT_EQ(t.learned(), WeightFormula::Quadratic);
  t.set_runtime("containerd v1.7.27");
  EXPECT_EQ(t.formula(), WeightFormula::Linear);
  for (int i = 0; i < 8; ++i) t.observe(512, 20);
  EXPECT_FALSE(t.wants_samples());
  EXPECT_EQ(t.status().size(), 2u);
}

TEST(Convert, TrackerMajorityAndExplicitSettings) {
  WeightFormulaTracker t(WeightFormulaSetting::Auto);
  t.set_runtime("r");
  t.observe(512, 20);
  t.observe(512, 59);
  EXPECT_FALSE(t.learned());  // a tie is undecided
  t.observe(1024, 100);
  EXPECT_EQ(t.learned(), WeightFormula::Quadratic);

  WeightFormulaTracker lin(WeightFormulaSetting::Linear);
  lin.set_runtime("r");
  lin.observe(1024, 100);  // an explicit setting is never overridden
  EXPECT_EQ(lin.formula(), WeightFormula::Linear);
  EXPECT_FALSE(lin.wants_samples());
  EXPECT_EQ(lin.status()[0].source, WeightFormulaTracker::Source::Configured);
}

// Every milliCPU 1..2000 under both formulas: the read-back request re-applied
// writes the same cpu.weight (so a re-run is a no-op), is the smallest request
// doing so, and never exceeds what was asked.
TEST(Convert, WeightRoundTripEveryMilliCpu) {
  for (WeightFormula f : {WeightFormula::Linear, WeightFormula::Quadratic}) {
    uint64_t prev_w = 0;
    for (int64_t m = 1; m <= 2000; ++m) {
      uint64_t w = milli_cpu_to_weight(m, f);
      ASSERT_GE(w, prev_w) << "weight not monotonic at " << m;
      prev_w = w;
      int64_t back = weight_to_milli_cpu(w, f);
      ASSERT_EQ(milli_cpu_to_weight(back, f), w) << formula_name(f) << " m=" << m;
      ASSERT_LE(back, std::max<int64_t>(m, 2)) << formula_name(f) << " m=" << m;
      if (back > 2) {
        ASSERT_LT(milli_cpu_to_weight(back - 1, f), w) << formula_name(f) << " m=" << m;
      }
      ASSERT_EQ(weight_to_milli_cpu(milli_cpu_to_weight(back, f), f), back);
    }
  }
}

TEST(Convert, QuotaRoundTripEveryMilliCpu) {
  for (int64_t m = 1; m <= 2000; ++m) {
    uint64_t q = milli_cpu_to_quota_us(m);
    ASSERT_GE(q, kMinQuotaPeriodUs);
    int64_t back = quota_us_to_milli_cpu(q);
    ASSERT_EQ(back, m < 10 ? 10 : m) << m;
    ASSERT_EQ(milli_cpu_to_quota_us(back), q);
  }
  EXPECT_EQ(milli_cpu_to_quota_us(0), 0u);
  EXPECT_EQ(milli_cpu_to_quota_us(1), 1000u);
  EXPECT_EQ(milli_cpu_to_quota_us(250), 25000u);
  EXPECT_EQ(milli_cpu_to_quota_us(250, 50000), 12500u);
  EXPECT_EQ(quota_us_to_milli_cpu(12500, 50000), 250);
}

TEST(Convert, CpuMaxStrings) {
  EXPECT_EQ(cpu_max_value(std::nullopt), "max 100000");
  EXPECT_EQ(cpu_max_value(500), "50000 100000");
  EXPECT_EQ(cpu_max_value(5), "1000 100000");
  // runc#4622: systemd rounds the quota per second up to 10 ms, and runc then
  // writes the rounded quota to cpu.max too.
  EXPECT_EQ(cpu_max_value(125, true), "13000 100000");  // 125 ms/s → 130 ms/s
  EXPECT_EQ(cpu_max_value(500, true), "50000 100000");
  EXPECT_EQ(cpu_max_value(1, true), "1000 100000");
  EXPECT_EQ(cpu_max_value(11, true), "2000 100000");
  EXPECT_EQ(systemd_round_quota_us(1100), 2000u);
  auto m = parse_cpu_max("max 100000\n");
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->quota_us);
  m = parse_cpu_max("50000 100000");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m->quota_us, 50000u);
  EXPECT_EQ(parse_cpu_max("max")->period_us, kQuotaPeriodUs);
  EXPECT_FALSE(parse_cpu_max("x 100000"));
  EXPECT_FALSE(parse_cpu_max("1 2 3"));
  EXPECT_FALSE(parse_cpu_max("100 0"));
  EXPECT_FALSE(parse_cpu_max(""));
}

TEST(Convert, MemoryStrings) {
  EXPECT_EQ(memory_max_value(std::nullopt), "max");
  EXPECT_EQ(memory_max_value(134217728), "134217728");
  EXPECT_FALSE(*parse_memory_max("max\n"));
  EXPECT_EQ(**parse_memory_max("4096"), 4096u);
  EXPECT_FALSE(parse_memory_max("lots"));
  uint64_t ps = page_size();
  EXPECT_EQ(page_round_down(ps + 1), ps);
  EXPECT_EQ(page_round_down(ps - 1), 0u);
}

TEST(Convert, LinuxResourcesZeroMeansUnchanged) {
  K8sResources cur{250, 500, std::nullopt, 128 << 20};
  // A memory-only CRI update reaches NRI with cpu fields present but zero.
  LinuxResourceValues memonly;
  memonly.memory_limit = 64 << 20;
  K8sResources r = from_linux_resources(memonly, cur);
  EXPECT_EQ(r.cpu_request_milli, 250);
  EXPECT_EQ(r.cpu_limit_milli, 500);
  EXPECT_EQ(r.memory_limit_bytes, 64 << 20);
  LinuxResourceValues cpu;
  cpu.cpu_shares = 1024;
  cpu.cpu_quota = 150000;
  cpu.cpu_period = 100000;
  r = from_linux_resources(cpu, cur);
  EXPECT_EQ(r.cpu_request_milli, 1000);
  EXPECT_EQ(r.cpu_limit_milli, 1500);
  EXPECT_EQ(r.memory_limit_bytes, 128 << 20);
  LinuxResourceValues unlimited;
  unlimited.cpu_quota = -1;
  unlimited.memory_limit = -1;
  r = from_linux_resources(unlimited, cur);
  EXPECT_FALSE(r.cpu_limit_milli);
  EXPECT_FALSE(r.memory_limit_bytes);

  LinuxResourceValues back = to_linux_resources(K8sResources{100, 250, std::nullopt, 1 << 30});
  EXPECT_EQ(back.cpu_shares, 102u);
  EXPECT_EQ(back.cpu_quota, 25000);
  EXPECT_EQ(back.cpu_period, 100000u);
  EXPECT_EQ(back.memory_limit, 1 << 30);
  back = to_linux_resources(K8sResources{std::nullopt, 2000, std::nullopt, std::nullopt});
  EXPECT_EQ(back.cpu_shares, 2048u);  // shares follow the limit
  EXPECT_EQ(back.memory_limit, -1);
  // Round trip through OCI values for every milliCPU the shares can express.
  for (int64_t m = 2; m <= 2000; ++m) {
    K8sResources k{m, m, std::nullopt, std::nullopt};
    K8sResources again = from_linux_resources(to_linux_resources(k), K8sResources{});
    ASSERT_EQ(milli_cpu_to_shares(*again.cpu_request_milli), milli_cpu_to_shares(m)) << m;
    ASSERT_EQ(milli_cpu_to_quota_us(*again.cpu_limit_milli), milli_cpu_to_quota_us(m)) << m;
  }
}

// ---- Kernel limits (kernel/sched/core.c tg_set_cfs_bandwidth / tg_set_bandwidth,
// mm/page_counter.c page_counter_memparse, include/linux/page_counter.h).

TEST(KernelLimits, ConstantsAreTheKernels) {
  EXPECT_EQ(kKernelMaxCfsQuotaUs, 17592186044415u);  // MAX_BW = 2^(64-20) - 1
  EXPECT_EQ(kKernelMinCfsPeriodUs, 1000u);
  EXPECT_EQ(kKernelMaxCfsPeriodUs, 1000000u);
  // PAGE_COUNTER_MAX = LONG_MAX / PAGE_SIZE pages read back as "max": one byte below that.
  EXPECT_EQ(kernel_max_memory_bytes(4096), 9223372036854771711u);   // (LONG_MAX/4096)*4096 - 1
  EXPECT_EQ(kernel_max_memory_bytes(65536), 9223372036854710271u);  // 64k pages (arm64)
}

TEST(KernelLimits, TheLargestCpuLimitIsExactlyAtTheBound) {
  const int64_t max = kernel_max_cpu_limit_milli();
  EXPECT_EQ(max, 175921860444);
  EXPECT_LE(milli_cpu_to_quota_us(max), kKernelMaxCfsQuotaUs);
  EXPECT_GT(milli_cpu_to_quota_us(max + 1), kKernelMaxCfsQuotaUs);
  EXPECT_TRUE(check_kernel_limits(K8sResources{std::nullopt, max, std::nullopt, std::nullopt}));
  EXPECT_FALSE(check_kernel_limits(K8sResources{std::nullopt, max + 1, std::nullopt, std::nullopt}));
  // With runc's systemd round-up the quota written is larger, so the bound is lower.
  KernelLimitOptions sd;
  sd.systemd_rounding = true;
  const int64_t sd_max = kernel_max_cpu_limit_milli(sd);
  EXPECT_EQ(sd_max, 175921860440);
  EXPECT_LE(systemd_round_quota_us(milli_cpu_to_quota_us(sd_max)), kKernelMaxCfsQuotaUs);
  EXPECT_GT(systemd_round_quota_us(milli_cpu_to_quota_us(sd_max + 1)), kKernelMaxCfsQuotaUs);
  EXPECT_TRUE(check_kernel_limits(K8sResources{std::nullopt, max, std::nullopt, std::nullopt}, {}));
  EXPECT_FALSE(check_kernel_limits(K8sResources{std::nullopt, max, std::nullopt, std::nullopt}, sd));
}

TEST(KernelLimits, TenToTheThirteenCoresIsRefusedNamingTheLimit) {
  // The case: a cpu limit of 10^13 cores, quota 10^18 us.
  auto r = check_kernel_limits(K8sResources{std::nullopt, 10'000'000'000'000'000, std::nullopt, std::nullopt}, {},
                               "container 'c1'");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("container 'c1': cpu limit 10000000000000:"), std::string::npos) << m;
  EXPECT_NE(m.find("quota 1000000000000000000 us"), std::string::npos) << m;
  EXPECT_NE(m.find("maximum 17592186044415 us (max_cfs_runtime, kernel/sched/core.c)"), std::string::npos) << m;
  EXPECT_NE(m.find("largest cpu limit at period 100000 us is 175921860444m"), std::string::npos) << m;
  // Values past the int64 quota (the conversion would otherwise clamp) too.
  EXPECT_FALSE(check_kernel_limits(K8sResources{std::nullopt, INT64_MAX, std::nullopt, std::nullopt}));
}

TEST(KernelLimits, PeriodOutsideTheKernelsRange) {
  KernelLimitOptions o;
  o.period_us = 999;
  auto r = check_kernel_limits(K8sResources{std::nullopt, 1000, std::nullopt, std::nullopt}, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("period 999 us is outside the kernel's range 1000..1000000 us"),
            std::string::npos) << r.error().message;
  o.period_us = 1000001;
  EXPECT_FALSE(check_kernel_limits(K8sResources{std::nullopt, 1000, std::nullopt, std::nullopt}, o));
  o.period_us = 1000000;
  EXPECT_TRUE(check_kernel_limits(K8sResources{std::nullopt, 1000, std::nullopt, std::nullopt}, o));
  // No limit: the period is never written with a quota, nothing to check.
  o.period_us = 5;
  EXPECT_TRUE(check_kernel_limits(K8sResources{500, std::nullopt, std::nullopt, std::nullopt}, o));
}

TEST(KernelLimits, MemoryBelowAPageOrAbovePageCounterMax) {
  KernelLimitOptions o;
  o.page_size = 4096;
  auto below = check_kernel_limits(K8sResources{std::nullopt, std::nullopt, std::nullopt, 4095}, o, "pod 'p1'");
  ASSERT_FALSE(below);
  EXPECT_NE(below.error().message.find("pod 'p1': memory limit 4095 bytes is below one page (4096 bytes)"),
            std::string::npos) << below.error().message;
  EXPECT_TRUE(check_kernel_limits(K8sResources{std::nullopt, std::nullopt, std::nullopt, 4096}, o));
  EXPECT_TRUE(check_kernel_limits(K8sResources{std::nullopt, std::nullopt, std::nullopt, 9223372036854771711}, o));
  auto above = check_kernel_limits(K8sResources{std::nullopt, std::nullopt, std::nullopt, 9223372036854771712}, o);
  ASSERT_FALSE(above);
  EXPECT_NE(above.error().message.find("exceeds the kernel's maximum 9223372036854771711 bytes (PAGE_COUNTER_MAX"),
            std::string::npos) << above.error().message;
  // 0 is "unset" (memory.max "max"), as the kubelet sends it.
  EXPECT_TRUE(check_kernel_limits(K8sResources{std::nullopt, std::nullopt, std::nullopt, 0}, o));
}

TEST(KernelLimits, NegativeValuesNameTheField) {
  auto r = check_kernel_limits(K8sResources{-1, std::nullopt, std::nullopt, std::nullopt});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cpu request -1 is negative");
  EXPECT_FALSE(check_kernel_limits(K8sResources{std::nullopt, std::nullopt, -5, std::nullopt}));
}

TEST(KernelLimits, OrdinaryValuesPass) {
  // Every limit 1m..10 CPUs (quota clamps to 1000 us below 10m) and a spread of sizes.
  for (int64_t m = 1; m <= 10000; ++m)
    ASSERT_TRUE(check_kernel_limits(K8sResources{m, m, std::nullopt, std::nullopt})) << m;
  for (int64_t b : {int64_t{4096}, int64_t{1} << 20, int64_t{300} << 20, int64_t{1} << 40})
    EXPECT_TRUE(check_kernel_limits(K8sResources{std::nullopt, std::nullopt, b, b})) << b;
}

TEST(KernelLimits, NriValuesAsTheRuntimeSendsThem) {
  KernelLimitOptions o;
  o.page_size = 4096;
  LinuxResourceValues v;
  EXPECT_TRUE(check_kernel_limits(v, o));  // all zero: nothing changes
  v.cpu_quota = -1;                         // unlimited
  v.memory_limit = -1;
  EXPECT_TRUE(check_kernel_limits(v, o));
  v.cpu_quota = 999;
  v.cpu_period = 100000;
  auto low = check_kernel_limits(v, o, "container 'c1'");
  ASSERT_FALSE(low);
  EXPECT_NE(low.error().message.find("container 'c1': cpu.max quota 999 us is below the kernel's minimum 1000 us"),
            std::string::npos) << low.error().message;
  v.cpu_quota = static_cast<int64_t>(kKernelMaxCfsQuotaUs);
  EXPECT_TRUE(check_kernel_limits(v, o));
  v.cpu_quota = static_cast<int64_t>(kKernelMaxCfsQuotaUs) + 1;
  EXPECT_FALSE(check_kernel_limits(v, o));
  v.cpu_quota = 50000;
  v.cpu_period = 2000000;
  EXPECT_FALSE(check_kernel_limits(v, o));
  v.cpu_period = 0;  // unchanged: the default period
  EXPECT_TRUE(check_kernel_limits(v, o));
  v.memory_limit = 100;
  EXPECT_FALSE(check_kernel_limits(v, o));
}

}  // namespace
}  // namespace podshim::cgroup
