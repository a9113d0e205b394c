// Kubernetes resources ↔ cgroup v2 attribute values, as pure functions with
// named constants (after pkg/kubelet/cm/helpers_linux.go).
//
// Container cpu.weight depends on which runtime converts cpu shares: runc and
// crun changed their formula in 2025 (runc#4772, crun#1721), so podshim names
// both and lets configuration pick the one it writes and expects.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "base/result.h"

namespace podshim::cgroup {

// Values of registered resources by name (controllers.h). A sorted vector:
// one pointer-sized triple when empty, which it is on every node that
// registers none, in each of a container's four resource sets.
using ExtraValues = boost::container::flat_map<std::string, int64_t, std::less<>>;

// How cgroup v1 cpu shares become a cgroup v2 cpu.weight.
enum class WeightFormula {
  // 1 + ((shares-2)*9999)/262142: runc < 1.3.2, crun < 1.23, and the kubelet
  // itself for pod/QoS cgroups. 1024 shares (1 CPU) → 39.
  Linear,
  // ceil(10^((l²+125l)/612 - 7/34)), l = log2(shares): runc ≥ 1.3.2 / 1.4.0
  // (opencontainers/cgroups#20), crun ≥ 1.23. 1024 shares → 100, the
  // cgroup v2 default, so "one CPU" weighs what an unconfigured cgroup does.
  Quadratic,
};

// What Kubernetes wants for one cgroup; nullopt = unset (cpu request: no
// cpu.weight change, or follow the limit; cpu limit: "max" quota; memory
// limit: "max"). memory_request_bytes is carried for MemoryQoS callers.
struct K8sResources {
  std::optional<int64_t> cpu_request_milli, cpu_limit_milli;
  std::optional<int64_t> memory_request_bytes, memory_limit_bytes;
  // Resources beyond cpu and memory, by the name of their row in the
  // controller table (register_resource, controllers.h): a limit or request
  // as the row says, in the row's own unit. Empty on every node that
  // registers none.
  ExtraValues extra = {};
  bool operator==(const K8sResources&) const = default;
};

// What the scheduler counts a container for: its request, or its limit where
// no request is set (the apiserver defaults a missing request to the limit).
inline int64_t effective_cpu_request(const K8sResources& r) {
  return r.cpu_request_milli ? *r.cpu_request_milli : r.cpu_limit_milli.value_or(0);
}
inline int64_t effective_memory_request(const K8sResources& r) {
  return r.memory_request_bytes ? *r.memory_request_bytes : r.memory_limit_bytes.value_or(0);
}

inline constexpr int64_t kMilliCpuPerCpu = 1000;
inline constexpr uint64_t kSharesPerCpu = 1024;
inline constexpr uint64_t kMinShares = 2;       // kubelet MinShares
inline constexpr uint64_t kMaxShares = 262144;  // kubelet MaxShares
inline constexpr uint64_t kMinWeight = 1;       // cgroup v2 cpu.weight range
inline constexpr uint64_t kMaxWeight = 10000;
inline constexpr uint64_t kQuotaPeriodUs = 100000;   // kubelet QuotaPeriod, kernel default
inline constexpr uint64_t kMinQuotaPeriodUs = 1000;  // kubelet MinQuotaPeriod; kernel EINVAL below
// systemd's CPUQuotaPerSecUSec granularity: runc and crun round the quota up
// to whole 10 ms per second (runc#4622).
inline constexpr uint64_t kSystemdQuotaGranularityUs = 10000;

std::string_view formula_name(WeightFormula f);
Result<WeightFormula> parse_formula(std::string_view s);  // "linear" | "quadratic"

// The `cgroup.weight_formula` setting: one formula, or learn the one the
// runtime in front of podshim uses from what it wrote (runc 1.1.5 in
// containerd 1.7 is linear, runc >= 1.3.2 quadratic; the operator should not
// have to know which runc a node runs).
enum class WeightFormulaSetting { Auto, Linear, Quadratic };
std::string_view setting_name(WeightFormulaSetting s);
Result<WeightFormulaSetting> parse_formula_setting(std::string_view s);  // auto|linear|quadratic

// MilliCPUToShares: 0 → 2; m*1024/1000 clamped to [2, 262144].
uint64_t milli_cpu_to_shares(int64_t milli_cpu);
// The kubelet's read-back of shares: ceil(shares*1000/1024).
int64_t shares_to_milli_cpu(uint64_t shares);

// shares → cpu.weight under the given formula (result in [1, 10000]; 0 → 0
// for the quadratic formula as runc does, i.e. "unset").
uint64_t shares_to_weight(uint64_t shares, WeightFormula f);
// The smallest shares value whose weight is ≥ `weight` (exact inverse on the
// formula's image).
uint64_t weight_to_shares(uint64_t weight, WeightFormula f);

// milliCPU → cpu.weight (through shares, as runtimes do).
uint64_t milli_cpu_to_weight(int64_t milli_cpu, WeightFormula f);
// cpu.weight → the smallest milliCPU request that produces that weight, so a
// read-back value re-applied writes the same cpu.weight again.
int64_t weight_to_milli_cpu(uint64_t weight, WeightFormula f);

// The milliCPU request a cgroup holds, read from its cpu.weight: `target`
// (what podshim last gave it) when the weight is exactly the target's, since
// many requests map onto one weight and the kernel holding the target's weight
// is holding the target; otherwise weight_to_milli_cpu(). The one rule every
// report of an actual CPU request goes through.
int64_t held_cpu_request(uint64_t weight, std::optional<int64_t> target_milli, WeightFormula f);

// MilliCPUToQuota: m*period/1000, at least 1000 µs.
uint64_t milli_cpu_to_quota_us(int64_t milli_cpu, uint64_t period_us = kQuotaPeriodUs);
// runc's systemd rounding: the quota per second rounded up to 10 ms, converted
// back to the period (opencontainers/cgroups#4, the runc#4622 fix).
uint64_t systemd_round_quota_us(uint64_t quota_us, uint64_t period_us = kQuotaPeriodUs);
// quota → the smallest milliCPU limit that produces it (kubelet: quota*1000/period).
int64_t quota_us_to_milli_cpu(uint64_t quota_us, uint64_t period_us = kQuotaPeriodUs);

// The cpu.max string: "max 100000" when unset, "<quota> <period>" otherwise.
std::string cpu_max_value(std::optional<int64_t> limit_milli, bool systemd_rounding = false,
                          uint64_t period_us = kQuotaPeriodUs);
struct CpuMax {
  std::optional<uint64_t> quota_us;  // nullopt = "max"
  uint64_t period_us = kQuotaPeriodUs;
};
// Parses "max 100000", "50000 100000" or a bare "max"/"50000" (period default).
Result<CpuMax> parse_cpu_max(std::string_view s);

// The memory.max string: "max" when unset, the byte count otherwise.
std::string memory_max_value(std::optional<int64_t> limit_bytes);
// Parses memory.max/memory.high ("max" → nullopt).
Result<std::optional<uint64_t>> parse_memory_max(std::string_view s);
// The kernel stores memory limits in pages (page_counter_memparse rounds
// down), so this is what memory.max reads back after writing `bytes`.
uint64_t page_round_down(uint64_t bytes);
uint64_t page_size();

// ---- Learning the runtime's formula from the kernel.
//
// For a container whose cpu shares are known (the runtime's own spec, as NRI
// sends it), the cpu.weight the runtime wrote equals linear(shares),
// quadratic(shares), both (the formulas agree at 2 and 262144 shares and a
// handful of others: no evidence) or neither (someone rewrote it since).
enum class WeightVote { Linear, Quadratic, Both, Neither };
std::string_view vote_name(WeightVote v);
WeightVote classify_weight(uint64_t shares, uint64_t weight);

// One runtime's evidence. The learned formula is the one with more decisive
// votes; undecided (nullopt) before the first one or on a tie.
struct WeightEvidence {
  uint64_t linear = 0, quadratic = 0, both = 0, neither = 0;
  void add(WeightVote v);
  std::optional<WeightFormula> learned() const;
  uint64_t decisive() const { return linear + quadratic; }
};

// The container formula podshim uses, per runtime. With an explicit setting
// that is the setting; with `auto` it is what the current runtime's
// containers show (evidence is kept per runtime identity, "name version", so
// a runtime upgraded between two connections is learned afresh), and the
// fallback until there is evidence. Thread-safe: the engine reads it, the NRI
// handlers feed it.
class WeightFormulaTracker {
 public:
  explicit WeightFormulaTracker(WeightFormulaSetting setting,
                                WeightFormula fallback = WeightFormula::Quadratic);

  WeightFormulaSetting setting() const { return setting_; }
  // Selects (creating) the evidence of the runtime now connected.
  void set_runtime(std::string identity);
  // Records one sample for the current runtime; returns its vote.
  WeightVote observe(uint64_t shares, uint64_t weight);
  // observe(), for every place that learns the formula: container
  // `container` was given `shares` and its cgroup holds `weight`. `notice`:
  // what to tell the operator when this sample settled (or changed) the
  // current runtime's formula.
  struct Learned {
    WeightVote vote;
    std::optional<std::string> notice;
  };
  Learned learn(uint64_t shares, uint64_t weight, std::string_view container);
  // Whether more samples would still help (auto, and few decisive ones yet).
  bool wants_samples() const;
  WeightFormula formula() const;
  // What the current runtime's samples say (nullopt: undecided).
  std::optional<WeightFormula> learned() const;

  enum class Source { Configured, Learned, Fallback };
  struct RuntimeStatus {
    std::string runtime;
    WeightFormula formula;
    Source source;
    WeightEvidence evidence;
    bool current;
  };
  // Every runtime seen (the current one flagged), or one row for an explicit
  // setting / no runtime yet.
  std::vector<RuntimeStatus> status() const;

  // Decisive samples after which sampling stops (the formulas never agree by
  // chance on a decisive value, so a few suffice).
  static constexpr uint64_t kEnoughSamples = 8;

 private:
  WeightFormula formula_locked() const;
  const WeightFormulaSetting setting_;
  const WeightFormula fallback_;
  mutable std::mutex mu_;
  std::string current_;
  std::map<std::string, WeightEvidence> evidence_;
};
std::string_view source_name(WeightFormulaTracker::Source s);

// ---- OCI / NRI LinuxResources (a CRI update that sets only memory reaches
// NRI with the cpu fields present but zero, as observed with containerd
// 1.7.27 and NRI v0.8.0, so 0 means "unchanged").
struct LinuxResourceValues {
  uint64_t cpu_shares = 0;
  int64_t cpu_quota = 0;     // < 0: unlimited ("max")
  uint64_t cpu_period = 0;   // 0: kQuotaPeriodUs
  int64_t memory_limit = 0;  // < 0: unlimited ("max")
};


// Applies NRI/OCI values on top of `current`: zero fields leave the current
// value, negative limits mean unlimited. shares → request milliCPU and quota →
// limit milliCPU as the kubelet reads them back.
K8sResources from_linux_resources(const LinuxResourceValues& v, const K8sResources& current);
// K8s values → OCI values as the kubelet would send them: shares from the
// request (or the limit when the request is unset), quota with period 100000,
// unset limits as -1 (runc writes "max" for a negative limit).
LinuxResourceValues to_linux_resources(const K8sResources& r);

// ---- What the kernel accepts (checked before anything is recorded).
//
// cpu.max: cpu_max_write parses "$QUOTA $PERIOD" in microseconds and the
// bandwidth setter (tg_set_cfs_bandwidth, tg_set_bandwidth since the 2025
// sched_ext rework; kernel/sched/core.c) returns EINVAL when
//   period < min_cfs_quota_period (1 ms) or period > max_cfs_quota_period (1 s),
//   quota  < 1 ms, or quota > max_cfs_runtime = MAX_BW µs, where
//   MAX_BW = 2^(64 - BW_SHIFT) - 1 and BW_SHIFT = 20 (kernel/sched/sched.h):
//   17592186044415 µs, "more than 203 days" per period.
inline constexpr uint64_t kKernelMinCfsPeriodUs = 1000;     // min_cfs_quota_period
inline constexpr uint64_t kKernelMaxCfsPeriodUs = 1000000;  // max_cfs_quota_period
inline constexpr uint64_t kKernelMinCfsQuotaUs = 1000;      // quota < 1 ms: EINVAL
inline constexpr uint64_t kKernelMaxCfsQuotaUs = (uint64_t{1} << 44) - 1;  // max_cfs_runtime
// cpu.weight: cpu_weight_write_u64 returns ERANGE outside
// [CGROUP_WEIGHT_MIN, CGROUP_WEIGHT_MAX] = [1, 10000] (kernel/sched/core.c,
// include/linux/cgroup.h). Shares are clamped to [2, 262144] before the
// conversion, so a Kubernetes request always lands inside.
//
// memory.max: memory_max_write → page_counter_memparse (mm/page_counter.c)
// never fails on a number: it stores min(bytes / PAGE_SIZE, PAGE_COUNTER_MAX)
// pages, PAGE_COUNTER_MAX = LONG_MAX / PAGE_SIZE on 64-bit
// (include/linux/page_counter.h). So a limit below one page becomes 0 (every
// charge fails, the cgroup OOM-kills at once) and one of
// PAGE_COUNTER_MAX pages or more silently becomes "max" (memory_max_show prints
// "max" for exactly PAGE_COUNTER_MAX). Both are refused here.
// The largest memory.max byte count that does not become "max".
uint64_t kernel_max_memory_bytes(uint64_t page_size_bytes);

struct KernelLimitOptions {
  uint64_t period_us = kQuotaPeriodUs;
  bool systemd_rounding = false;  // the quota runc writes after the 10 ms round-up
  uint64_t page_size = 0;         // 0: this machine's (sysconf)
};

// The largest cpu limit (milliCPU) whose cpu.max quota the kernel takes at
// this period (and rounding).
int64_t kernel_max_cpu_limit_milli(const KernelLimitOptions& o = {});

// Refuses (EINVAL) any value of `r` whose cgroup value the kernel would refuse
// or silently change, naming the field, the value and the kernel's limit with
// its source, e.g. "cpu limit 10000000000000000m: cpu.max quota
// 1000000000000000000 µs exceeds the kernel's maximum 17592186044415 µs
// (max_cfs_runtime, kernel/sched/core.c); the largest cpu limit is
// 175921860444m". `what` prefixes the message ("container 'c1'").
Result<void> check_kernel_limits(const K8sResources& r, const KernelLimitOptions& o = {},
                                 std::string_view what = {});
// The same for OCI/NRI values as the runtime sends them (quota/period as
// given, 0 = unchanged, negative = unlimited).
Result<void> check_kernel_limits(const LinuxResourceValues& v, const KernelLimitOptions& o = {},
                                 std::string_view what = {});

}  // namespace podshim::cgroup
