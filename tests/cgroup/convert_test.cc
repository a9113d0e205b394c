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

}  // namespace
}  // namespace podshim::cgroup
