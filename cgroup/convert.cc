#include "cgroup/convert.h"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

#include "base/names.h"
#include "base/str.h"

namespace podshim::cgroup {

namespace {
constexpr Names<WeightFormula, 2> kFormulaNames{{{{WeightFormula::Quadratic, "quadratic"},
                                                  {WeightFormula::Linear, "linear"}}}};
constexpr Names<WeightFormulaSetting, 3> kSettingNames{{{{WeightFormulaSetting::Auto, "auto"},
                                                         {WeightFormulaSetting::Linear, "linear"},
                                                         {WeightFormulaSetting::Quadratic, "quadratic"}}}};
constexpr Names<WeightVote, 4> kVoteNames{{{{WeightVote::Neither, "neither"},
                                            {WeightVote::Linear, "linear"},
                                            {WeightVote::Quadratic, "quadratic"},
                                            {WeightVote::Both, "both"}}}};
constexpr Names<WeightFormulaTracker::Source, 3> kTrackerSourceNames{
    {{{WeightFormulaTracker::Source::Fallback, "fallback"},
      {WeightFormulaTracker::Source::Configured, "configured"},
      {WeightFormulaTracker::Source::Learned, "learned"}}}};
}  // namespace

std::string_view formula_name(WeightFormula f) { return kFormulaNames.name(f); }

Result<WeightFormula> parse_formula(std::string_view s) { return kFormulaNames.parse(s, "cpu weight formula"); }

std::string_view setting_name(WeightFormulaSetting s) { return kSettingNames.name(s); }

Result<WeightFormulaSetting> parse_formula_setting(std::string_view s) {
  return kSettingNames.parse(s, "cpu weight formula");
}

std::string_view vote_name(WeightVote v) { return kVoteNames.name(v); }

WeightVote classify_weight(uint64_t shares, uint64_t weight) {
  const bool lin = shares_to_weight(shares, WeightFormula::Linear) == weight;
  const bool quad = shares_to_weight(shares, WeightFormula::Quadratic) == weight;
  if (lin && quad) return WeightVote::Both;
  if (lin) return WeightVote::Linear;
  if (quad) return WeightVote::Quadratic;
  return WeightVote::Neither;
}

void WeightEvidence::add(WeightVote v) {
  switch (v) {
    case WeightVote::Linear: ++linear; break;
    case WeightVote::Quadratic: ++quadratic; break;
    case WeightVote::Both: ++both; break;
    case WeightVote::Neither: ++neither; break;
  }
}

std::optional<WeightFormula> WeightEvidence::learned() const {
  if (linear > quadratic) return WeightFormula::Linear;
  if (quadratic > linear) return WeightFormula::Quadratic;
  return std::nullopt;
}

WeightFormulaTracker::WeightFormulaTracker(WeightFormulaSetting setting, WeightFormula fallback)
    : setting_(setting), fallback_(fallback) {}

void WeightFormulaTracker::set_runtime(std::string identity) {
  std::lock_guard lock(mu_);
  current_ = std::move(identity);
  evidence_[current_];
}

WeightVote WeightFormulaTracker::observe(uint64_t shares, uint64_t weight) {
  const WeightVote v = classify_weight(shares, weight);
  std::lock_guard lock(mu_);
  evidence_[current_].add(v);
  return v;
}

WeightFormulaTracker::Learned WeightFormulaTracker::learn(uint64_t shares, uint64_t weight,
                                                          std::string_view container) {
  const WeightVote v = classify_weight(shares, weight);
  std::lock_guard lock(mu_);
  WeightEvidence& e = evidence_[current_];
  const auto before = e.learned();
  e.add(v);
  const auto after = e.learned();
  Learned out{v, std::nullopt};
  if (after && before != after)
    out.notice = fmt::format("The runtime{} writes cpu.weight with the {} formula (container {}: {} shares → weight {})",
                             current_.empty() ? std::string() : " (" + current_ + ")", formula_name(*after),
                             container, shares, weight);
  return out;
}

bool WeightFormulaTracker::wants_samples() const {
  if (setting_ != WeightFormulaSetting::Auto) return false;
  std::lock_guard lock(mu_);
  auto it = evidence_.find(current_);
  return it == evidence_.end() || it->second.decisive() < kEnoughSamples;
}

WeightFormula WeightFormulaTracker::formula_locked() const {
  if (setting_ == WeightFormulaSetting::Linear) return WeightFormula::Linear;
  if (setting_ == WeightFormulaSetting::Quadratic) return WeightFormula::Quadratic;
  auto it = evidence_.find(current_);
  if (it != evidence_.end())
    if (auto f = it->second.learned()) return *f;
  return fallback_;
}

std::optional<WeightFormula> WeightFormulaTracker::learned() const {
  std::lock_guard lock(mu_);
  auto it = evidence_.find(current_);
  return it == evidence_.end() ? std::nullopt : it->second.learned();
}

WeightFormula WeightFormulaTracker::formula() const {
  std::lock_guard lock(mu_);
  return formula_locked();
}

std::vector<WeightFormulaTracker::RuntimeStatus> WeightFormulaTracker::status() const {
  std::lock_guard lock(mu_);
  std::vector<RuntimeStatus> out;
  for (const auto& [rt, ev] : evidence_) {
    RuntimeStatus s{rt, fallback_, Source::Fallback, ev, rt == current_};
    if (setting_ != WeightFormulaSetting::Auto) {
      s.formula = setting_ == WeightFormulaSetting::Linear ? WeightFormula::Linear : WeightFormula::Quadratic;
      s.source = Source::Configured;
    } else if (auto f = ev.learned()) {
      s.formula = *f;
      s.source = Source::Learned;
    }
    out.push_back(std::move(s));
  }
  if (out.empty())
    out.push_back({"", formula_locked(),
                   setting_ == WeightFormulaSetting::Auto ? Source::Fallback : Source::Configured, {}, true});
  return out;
}

std::string_view source_name(WeightFormulaTracker::Source s) { return kTrackerSourceNames.name(s); }

uint64_t milli_cpu_to_shares(int64_t milli_cpu) {
  if (milli_cpu <= 0) return kMinShares;
  // Same integer arithmetic as the kubelet; __int128 keeps huge inputs exact
  // before the clamp.
  __int128 shares = static_cast<__int128>(milli_cpu) * kSharesPerCpu / kMilliCpuPerCpu;
  if (shares < static_cast<__int128>(kMinShares)) return kMinShares;
  if (shares > static_cast<__int128>(kMaxShares)) return kMaxShares;
  return static_cast<uint64_t>(shares);
}

int64_t shares_to_milli_cpu(uint64_t shares) {
  return static_cast<int64_t>((shares * kMilliCpuPerCpu + kSharesPerCpu - 1) / kSharesPerCpu);
}

uint64_t shares_to_weight(uint64_t shares, WeightFormula f) {
  if (f == WeightFormula::Linear) {
    if (shares == 0) return 0;
    if (shares < kMinShares) shares = kMinShares;
    if (shares > kMaxShares) shares = kMaxShares;
    return 1 + ((shares - 2) * 9999) / 262142;
  }
  if (shares == 0) return 0;
  if (shares <= kMinShares) return kMinWeight;
  if (shares >= kMaxShares) return kMaxWeight;
  // The exponent is a parabola in log2(shares) through (2,1), (1024,100) and
  // (262144,10000) (opencontainers/cgroups ConvertCPUSharesToCgroupV2Value).
  double l = std::log2(static_cast<double>(shares));
  double exponent = (l * l + 125 * l) / 612.0 - 7.0 / 34.0;
  return static_cast<uint64_t>(std::ceil(std::pow(10.0, exponent)));
}

uint64_t weight_to_shares(uint64_t weight, WeightFormula f) {
  if (weight <= kMinWeight) return kMinShares;
  // Both formulas are non-decreasing in shares: binary-search the smallest
  // shares value reaching `weight`.
  uint64_t lo = kMinShares, hi = kMaxShares;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (shares_to_weight(mid, f) >= weight)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

uint64_t milli_cpu_to_weight(int64_t milli_cpu, WeightFormula f) {
  return shares_to_weight(milli_cpu_to_shares(milli_cpu), f);
}

int64_t weight_to_milli_cpu(uint64_t weight, WeightFormula f) {
  return shares_to_milli_cpu(weight_to_shares(weight, f));
}

int64_t held_cpu_request(uint64_t weight, std::optional<int64_t> target_milli, WeightFormula f) {
  if (target_milli && milli_cpu_to_weight(*target_milli, f) == weight) return *target_milli;
  return weight_to_milli_cpu(weight, f);
}

uint64_t milli_cpu_to_quota_us(int64_t milli_cpu, uint64_t period_us) {
  if (milli_cpu <= 0) return 0;
  __int128 quota = static_cast<__int128>(milli_cpu) * period_us / kMilliCpuPerCpu;
  if (quota < static_cast<__int128>(kMinQuotaPeriodUs)) return kMinQuotaPeriodUs;
  if (quota > static_cast<__int128>(INT64_MAX)) return INT64_MAX;
  return static_cast<uint64_t>(quota);
}

uint64_t systemd_round_quota_us(uint64_t quota_us, uint64_t period_us) {
  if (period_us == 0) period_us = kQuotaPeriodUs;
  unsigned __int128 per_sec = static_cast<unsigned __int128>(quota_us) * 1000000 / period_us;
  if (per_sec % kSystemdQuotaGranularityUs != 0)
    per_sec = (per_sec / kSystemdQuotaGranularityUs + 1) * kSystemdQuotaGranularityUs;
  return static_cast<uint64_t>(per_sec * period_us / 1000000);
}

int64_t quota_us_to_milli_cpu(uint64_t quota_us, uint64_t period_us) {
  if (period_us == 0) period_us = kQuotaPeriodUs;
  // Ceil so that milli→quota→milli→quota is stable for any period; for the
  // default period quota is a multiple of 100 and this equals the kubelet's
  // floor(quota*1000/period).
  unsigned __int128 m = (static_cast<unsigned __int128>(quota_us) * kMilliCpuPerCpu + period_us - 1) /
                        period_us;
  return static_cast<int64_t>(m);
}

std::string cpu_max_value(std::optional<int64_t> limit_milli, bool systemd_rounding,
                          uint64_t period_us) {
  // libcontainer fs2 setCPU writes "max" for no quota, always with the period.
  if (!limit_milli || *limit_milli <= 0) return fmt::format("max {}", period_us);
  uint64_t quota = milli_cpu_to_quota_us(*limit_milli, period_us);
  if (systemd_rounding) quota = systemd_round_quota_us(quota, period_us);
  return fmt::format("{} {}", quota, period_us);
}

Result<CpuMax> parse_cpu_max(std::string_view s) {
  auto fields = str::split(str::trim(s), ' ');
  if (fields.empty() || fields.size() > 2 || fields[0].empty())
    return fail(EINVAL, "invalid cpu.max value '{}'", s);
  CpuMax out;
  if (fields[0] != "max") {
    auto q = str::parse_u64(fields[0]);
    if (!q) return fail(EINVAL, "invalid cpu.max quota in '{}'", s);
    out.quota_us = *q;
  }
  if (fields.size() == 2) {
    auto p = str::parse_u64(fields[1]);
    if (!p || *p == 0) return fail(EINVAL, "invalid cpu.max period in '{}'", s);
    out.period_us = *p;
  }
  return out;
}

std::string memory_max_value(std::optional<int64_t> limit_bytes) {
  if (!limit_bytes || *limit_bytes <= 0) return "max";
  return std::to_string(*limit_bytes);
}

Result<std::optional<uint64_t>> parse_memory_max(std::string_view s) {
  std::string_view t = str::trim(s);
  if (t == "max") return std::optional<uint64_t>();
  auto v = str::parse_u64(t);
  if (!v) return fail(EINVAL, "invalid memory limit value '{}'", s);
  return std::optional<uint64_t>(*v);
}

uint64_t page_size() {
  static const uint64_t ps = [] {
    long v = ::sysconf(_SC_PAGESIZE);
    return v > 0 ? static_cast<uint64_t>(v) : 4096;
  }();
  return ps;
}

uint64_t page_round_down(uint64_t bytes) { return bytes / page_size() * page_size(); }

K8sResources from_linux_resources(const LinuxResourceValues& v, const K8sResources& current) {
  K8sResources out = current;
  if (v.cpu_shares > 0) out.cpu_request_milli = shares_to_milli_cpu(v.cpu_shares);
  if (v.cpu_quota > 0) {
    out.cpu_limit_milli = quota_us_to_milli_cpu(static_cast<uint64_t>(v.cpu_quota),
                                                v.cpu_period ? v.cpu_period : kQuotaPeriodUs);
  } else if (v.cpu_quota < 0) {
    out.cpu_limit_milli.reset();
  }
  if (v.memory_limit > 0)
    out.memory_limit_bytes = v.memory_limit;
  else if (v.memory_limit < 0)
    out.memory_limit_bytes.reset();
  return out;
}

LinuxResourceValues to_linux_resources(const K8sResources& r) {
  LinuxResourceValues out;
  std::optional<int64_t> shares_from = r.cpu_request_milli ? r.cpu_request_milli : r.cpu_limit_milli;
  out.cpu_shares = milli_cpu_to_shares(shares_from.value_or(0));
  out.cpu_period = kQuotaPeriodUs;
  out.cpu_quota = r.cpu_limit_milli && *r.cpu_limit_milli > 0
                      ? static_cast<int64_t>(milli_cpu_to_quota_us(*r.cpu_limit_milli))
                      : -1;
  out.memory_limit = r.memory_limit_bytes && *r.memory_limit_bytes > 0 ? *r.memory_limit_bytes : -1;
  return out;
}

// ---- Kernel limits (the constants and their sources are in convert.h).

namespace {

std::string cpu_text(int64_t milli) {
  return milli % kMilliCpuPerCpu == 0 ? fmt::format("{}", milli / kMilliCpuPerCpu) : fmt::format("{}m", milli);
}

std::string prefixed(std::string_view what, std::string msg) {
  return what.empty() ? msg : fmt::format("{}: {}", what, msg);
}

uint64_t effective_page_size(const KernelLimitOptions& o) { return o.page_size ? o.page_size : page_size(); }

Result<void> check_period(uint64_t period_us, std::string_view what) {
  if (period_us < kKernelMinCfsPeriodUs || period_us > kKernelMaxCfsPeriodUs) {
    return fail(EINVAL, "{}", prefixed(what, fmt::format(
        "cpu.max period {} us is outside the kernel's range {}..{} us "
        "(min_cfs_quota_period..max_cfs_quota_period, kernel/sched/core.c)",
        period_us, kKernelMinCfsPeriodUs, kKernelMaxCfsPeriodUs)));
  }
  return {};
}

// The quota as written, exactly (no clamp to INT64_MAX): what the kernel
// would be asked to take.
unsigned __int128 quota_for(int64_t milli, const KernelLimitOptions& o) {
  unsigned __int128 q = static_cast<unsigned __int128>(milli) * o.period_us / kMilliCpuPerCpu;
  if (q < kMinQuotaPeriodUs) q = kMinQuotaPeriodUs;  // the kubelet's MinQuotaPeriod
  if (o.systemd_rounding && q <= kKernelMaxCfsQuotaUs * 2) q = systemd_round_quota_us(static_cast<uint64_t>(q), o.period_us);
  return q;
}

std::string u128_text(unsigned __int128 v) {
  if (v <= UINT64_MAX) return std::to_string(static_cast<uint64_t>(v));
  std::string s;
  while (v) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

Result<void> check_memory_limit(int64_t bytes, const KernelLimitOptions& o, std::string_view what) {
  const uint64_t ps = effective_page_size(o);
  if (static_cast<uint64_t>(bytes) < ps) {
    return fail(EINVAL, "{}", prefixed(what, fmt::format(
        "memory limit {} bytes is below one page ({} bytes): the kernel would set memory.max to 0 "
        "(page_counter_memparse rounds down to whole pages, mm/page_counter.c)", bytes, ps)));
  }
  const uint64_t max = kernel_max_memory_bytes(ps);
  if (static_cast<uint64_t>(bytes) > max) {
    return fail(EINVAL, "{}", prefixed(what, fmt::format(
        "memory limit {} bytes exceeds the kernel's maximum {} bytes (PAGE_COUNTER_MAX pages, "
        "include/linux/page_counter.h, read back as \"max\"): the kernel would make it unlimited", bytes, max)));
  }
  return {};
}

}  // namespace

uint64_t kernel_max_memory_bytes(uint64_t page_size_bytes) {
  if (page_size_bytes == 0) page_size_bytes = page_size();
  // PAGE_COUNTER_MAX pages read back as "max"; one byte less stays a number.
  return static_cast<uint64_t>(INT64_MAX) / page_size_bytes * page_size_bytes - 1;
}

int64_t kernel_max_cpu_limit_milli(const KernelLimitOptions& o) {
  // quota = m*period/1000 (floor) ≤ max  ⇔  m ≤ ((max+1)*1000 - 1)/period.
  unsigned __int128 m = (static_cast<unsigned __int128>(kKernelMaxCfsQuotaUs + 1) * kMilliCpuPerCpu - 1) /
                        (o.period_us ? o.period_us : kQuotaPeriodUs);
  // The systemd round-up can push the largest value over; step down until it fits.
  while (m > 0 && quota_for(static_cast<int64_t>(m), o) > kKernelMaxCfsQuotaUs) --m;
  return static_cast<int64_t>(m);
}

Result<void> check_kernel_limits(const K8sResources& r, const KernelLimitOptions& o, std::string_view what) {
  const std::pair<const char*, const std::optional<int64_t>*> fields[] = {
      {"cpu request", &r.cpu_request_milli}, {"cpu limit", &r.cpu_limit_milli},
      {"memory request", &r.memory_request_bytes}, {"memory limit", &r.memory_limit_bytes}};
  for (const auto& [name, v] : fields) {
    if (*v && **v < 0) return fail(EINVAL, "{}", prefixed(what, fmt::format("{} {} is negative", name, **v)));
  }
  if (r.cpu_limit_milli && *r.cpu_limit_milli > 0) {
    PODSHIM_TRY(check_period(o.period_us, what));
    const unsigned __int128 quota = quota_for(*r.cpu_limit_milli, o);
    if (quota > kKernelMaxCfsQuotaUs) {
      return fail(EINVAL, "{}", prefixed(what, fmt::format(
          "cpu limit {}: cpu.max quota {} us exceeds the kernel's maximum {} us (max_cfs_runtime, "
          "kernel/sched/core.c); the largest cpu limit at period {} us is {}",
          cpu_text(*r.cpu_limit_milli), u128_text(quota), kKernelMaxCfsQuotaUs, o.period_us,
          cpu_text(kernel_max_cpu_limit_milli(o)))));
    }
  }
  // A zero memory limit means "unset" (memory.max "max"), as the kubelet sends it.
  if (r.memory_limit_bytes && *r.memory_limit_bytes > 0) PODSHIM_TRY(check_memory_limit(*r.memory_limit_bytes, o, what));
  return {};
}

Result<void> check_kernel_limits(const LinuxResourceValues& v, const KernelLimitOptions& o, std::string_view what) {
  const uint64_t period = v.cpu_period ? v.cpu_period : o.period_us;
  if (v.cpu_period) PODSHIM_TRY(check_period(v.cpu_period, what));
  if (v.cpu_quota > 0) {
    PODSHIM_TRY(check_period(period, what));
    const auto quota = static_cast<uint64_t>(v.cpu_quota);
    if (quota < kKernelMinCfsQuotaUs) {
      return fail(EINVAL, "{}", prefixed(what, fmt::format(
          "cpu.max quota {} us is below the kernel's minimum {} us (min_cfs_quota_period, kernel/sched/core.c)",
          quota, kKernelMinCfsQuotaUs)));
    }
    if (quota > kKernelMaxCfsQuotaUs) {
      return fail(EINVAL, "{}", prefixed(what, fmt::format(
          "cpu.max quota {} us exceeds the kernel's maximum {} us (max_cfs_runtime, kernel/sched/core.c)",
          quota, kKernelMaxCfsQuotaUs)));
    }
  }
  if (v.memory_limit > 0) PODSHIM_TRY(check_memory_limit(v.memory_limit, o, what));
  return {};
}

}  // namespace podshim::cgroup
