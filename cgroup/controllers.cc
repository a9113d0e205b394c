#include "cgroup/controllers.h"

#include <array>
#include <limits>

#include "base/str.h"
#include "cgroup/engine.h"

namespace podshim::cgroup {
namespace {

constexpr long double kInf = std::numeric_limits<long double>::infinity();
using Props = Result<std::vector<UnitProperty>>;

// ---- cpu.weight: the request, through shares (kuberuntime
// calculateLinuxResources: from the limit when the request is unset).
std::optional<std::string> want_cpu_weight(const K8sResources& r, const ConvertContext& c) {
  std::optional<int64_t> from = r.cpu_request_milli ? r.cpu_request_milli : r.cpu_limit_milli;
  if (!from) return std::nullopt;
  return std::to_string(milli_cpu_to_weight(*from, c.formula));
}
bool strings_differ(std::string_view, std::string_view) { return true; }  // after the trimmed compare
long double weight_magnitude(std::string_view v) {
  auto w = str::parse_u64(v);
  return w ? static_cast<long double>(*w) : 0;
}
Props cpu_weight_properties(std::string_view v) {
  auto w = str::parse_u64(v);
  if (!w) return wrap(w, "cpu.weight");
  return std::vector<UnitProperty>{{"CPUWeight", *w}};
}
Result<void> read_cpu_weight(std::string_view raw, Actual& a, WeightFormula f) {
  a.formula = f;
  auto w = str::parse_u64(raw);
  if (!w) return wrap(w, "cpu.weight");
  a.cpu_weight = *w;
  a.cpu_request_milli = weight_to_milli_cpu(*w, f);
  return {};
}

// ---- cpu.max: the limit as quota and period.
std::optional<std::string> want_cpu_max(const K8sResources& r, const ConvertContext& c) {
  return cpu_max_value(r.cpu_limit_milli, c.systemd_rounding);
}
bool cpu_max_differs(std::string_view cur, std::string_view want) {
  auto a = parse_cpu_max(cur), b = parse_cpu_max(want);
  return !a || !b || a->quota_us != b->quota_us || a->period_us != b->period_us;
}
long double cpu_max_magnitude(std::string_view v) {  // cpus
  auto m = parse_cpu_max(v);
  if (!m) return 0;
  if (!m->quota_us) return kInf;
  return static_cast<long double>(*m->quota_us) / static_cast<long double>(m->period_us);
}
Props cpu_max_properties(std::string_view v) {
  auto m = parse_cpu_max(v);
  if (!m) return Unexpected(m.error());
  uint64_t per_sec = kUnitInfinity;
  if (m->quota_us) {
    per_sec = static_cast<uint64_t>(static_cast<unsigned __int128>(*m->quota_us) * 1000000 / m->period_us);
  }
  // Period first: systemd computes the written quota from both.
  return std::vector<UnitProperty>{{"CPUQuotaPeriodUSec", m->period_us}, {"CPUQuotaPerSecUSec", per_sec}};
}
Result<void> read_cpu_max(std::string_view raw, Actual& a, WeightFormula) {
  a.cpu_max_raw = std::string(raw);
  auto m = parse_cpu_max(raw);
  if (!m) return Unexpected(m.error());
  if (m->quota_us) a.cpu_limit_milli = quota_us_to_milli_cpu(*m->quota_us, m->period_us);
  a.cpu_max = *m;
  return {};
}

// ---- memory byte limits ("max" or bytes; the kernel keeps pages).
std::optional<std::string> want_memory_max(const K8sResources& r, const ConvertContext&) {
  return memory_max_value(r.memory_limit_bytes);
}
bool bytes_differ(std::string_view cur, std::string_view want) {
  auto a = parse_memory_max(cur), b = parse_memory_max(want);
  if (!a || !b || a->has_value() != b->has_value()) return true;
  return a->has_value() && page_round_down(**a) != page_round_down(**b);
}
long double bytes_magnitude(std::string_view v) {
  auto m = parse_memory_max(v);
  if (!m) return 0;
  if (!*m) return kInf;
  return static_cast<long double>(page_round_down(**m));
}
template <const char* Attr, const char* Prop>
Props limit_properties(std::string_view v) {
  auto m = parse_memory_max(v);
  if (!m) return wrap(m, Attr);
  return std::vector<UnitProperty>{{Prop, m->value_or(kUnitInfinity)}};
}
Result<void> read_memory_max(std::string_view raw, Actual& a, WeightFormula) {
  a.memory_max_raw = std::string(raw);
  auto m = parse_memory_max(raw);
  if (!m) return Unexpected(m.error());
  if (*m) a.memory_limit_bytes = static_cast<int64_t>(**m);
  return {};
}

constexpr char kMemoryMax[] = "memory.max", kMemoryHigh[] = "memory.high", kMemoryLow[] = "memory.low",
               kMemoryMin[] = "memory.min";
constexpr char kPMemoryMax[] = "MemoryMax", kPMemoryHigh[] = "MemoryHigh", kPMemoryLow[] = "MemoryLow",
               kPMemoryMin[] = "MemoryMin";

// The built-in rows. Resized attributes first, in the order a step writes
// them (a container's cpu step: weight, then max); then attributes that only
// have a systemd mapping (memory.high is the shrink's clamp, written to the
// file directly).
constexpr size_t kBuiltIn = 7;
const std::array<Controller, kBuiltIn> kBuiltInRows{{
    {"cpu.weight", "cpu", Resource::Cpu, false, want_cpu_weight, strings_differ, weight_magnitude,
     cpu_weight_properties, read_cpu_weight, Lowering::Write},
    {"cpu.max", "cpu", Resource::Cpu, true, want_cpu_max, cpu_max_differs, cpu_max_magnitude, cpu_max_properties,
     read_cpu_max, Lowering::Write},
    {"memory.max", "memory", Resource::Memory, true, want_memory_max, bytes_differ, bytes_magnitude,
     limit_properties<kMemoryMax, kPMemoryMax>, read_memory_max, Lowering::Shrink},
    {"memory.high", "memory", Resource::Memory, true, nullptr, bytes_differ, bytes_magnitude,
     limit_properties<kMemoryHigh, kPMemoryHigh>, nullptr, Lowering::Write},
    {"memory.low", "memory", Resource::Memory, false, nullptr, strings_differ, bytes_magnitude,
     limit_properties<kMemoryLow, kPMemoryLow>, nullptr, Lowering::Write},
    {"memory.min", "memory", Resource::Memory, false, nullptr, strings_differ, bytes_magnitude,
     limit_properties<kMemoryMin, kPMemoryMin>, nullptr, Lowering::Write},
    // memory.reclaim: written by the shrink, no property, nothing to compare.
    {"memory.reclaim", "memory", Resource::Memory, false, nullptr, strings_differ, bytes_magnitude, nullptr,
     nullptr, Lowering::Write},
}};

// The table: the built-in rows, then registered ones. A fixed array, so a
// row's address (PlanAttr::row, controller_for) never moves.
struct Table {
  static constexpr size_t kCapacity = 32;
  std::array<Controller, kCapacity> rows{};
  size_t size = 0;
  Table() {
    for (const auto& r : kBuiltInRows) rows[size++] = r;
  }
};
Table& table() {
  static Table t;  // built on first use, so static registrations may come first
  return t;
}

}  // namespace

std::span<const Controller> controllers() {
  const Table& t = table();
  return {t.rows.data(), t.size};
}

std::span<const Controller> registered_resources() { return controllers().subspan(kBuiltIn); }

const Controller* controller_for(std::string_view file) {
  for (const auto& c : controllers())
    if (c.file == file) return &c;
  return nullptr;
}

const Controller* resource_named(std::string_view name) {
  for (const auto& c : registered_resources())
    if (c.name == name) return &c;
  return nullptr;
}

Result<void> register_resource(const Controller& row) {
  if (row.name.empty() || row.file.empty() || row.controller.empty() || !row.want || !row.read_back)
    return fail(EINVAL, "resource row '{}' ({}) needs a name, a file, a controller, want and read_back", row.name,
                row.file);
  // Names the built-in model spells out itself.
  if (row.name == "cpu" || row.name == "memory" || resource_named(row.name))
    return fail(EEXIST, "a resource named '{}' is already in the table", row.name);
  if (controller_for(row.file)) return fail(EEXIST, "attribute '{}' is already in the table", row.file);
  Table& t = table();
  if (t.size == Table::kCapacity) return fail(ENOSPC, "the controller table is full ({} rows)", Table::kCapacity);
  Controller r = row;
  r.resource = Resource::Other;
  t.rows[t.size++] = r;
  return {};
}

std::optional<int64_t> extra_value(const K8sResources& r, std::string_view name) {
  auto it = r.extra.find(name);
  if (it == r.extra.end()) return std::nullopt;
  return it->second;
}

Result<std::vector<UnitProperty>> properties_for_attr(std::string_view attr, std::string_view value) {
  const Controller* c = controller_for(attr);
  if (!c || !c->properties) return std::vector<UnitProperty>{};
  return c->properties(str::trim(value));
}

}  // namespace podshim::cgroup
