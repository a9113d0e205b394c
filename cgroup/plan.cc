#include "cgroup/plan.h"

#include <limits>

#include "cgroup/convert.h"
#include "base/str.h"

namespace podshim::cgroup {
namespace {

constexpr long double kInf = std::numeric_limits<long double>::infinity();

// A comparable magnitude for an attribute value: bytes, cpus per period, or
// weight. Unparseable values compare as NaN-free 0 so they always differ.
long double magnitude(const std::string& file, const std::string& v) {
  if (file == "cpu.max") {
    auto m = parse_cpu_max(v);
    if (!m) return 0;
    if (!m->quota_us) return kInf;
    return static_cast<long double>(*m->quota_us) / static_cast<long double>(m->period_us);
  }
  if (file == "cpu.weight") {
    auto w = str::parse_u64(v);
    return w ? static_cast<long double>(*w) : 0;
  }
  auto m = parse_memory_max(v);
  if (!m) return 0;
  if (!*m) return kInf;
  return static_cast<long double>(page_round_down(**m));
}

}  // namespace

bool attr_differs(const std::string& file, const std::string& cur, const std::string& want) {
  std::string_view c = str::trim(cur), w = str::trim(want);
  if (c == w) return false;
  if (file == "cpu.max") {
    auto a = parse_cpu_max(c), b = parse_cpu_max(w);
    return !a || !b || a->quota_us != b->quota_us || a->period_us != b->period_us;
  }
  if (file == "memory.max" || file == "memory.high") {
    auto a = parse_memory_max(c), b = parse_memory_max(w);
    if (!a || !b || a->has_value() != b->has_value()) return true;
    return a->has_value() && page_round_down(**a) != page_round_down(**b);
  }
  return true;
}

std::vector<PlanStep> plan_resize(const std::vector<PlanTarget>& targets) {
  std::vector<PlanStep> out;
  for (Resource res : {Resource::Memory, Resource::Cpu}) {
    std::vector<PlanStep> pod_inc, ctr_dec, pod_dec, ctr_inc;
    for (size_t i = 0; i < targets.size(); ++i) {
      const PlanTarget& t = targets[i];
      auto change = [&](const char* file, const std::string& cur,
                        const std::optional<std::string>& want) -> std::optional<AttrChange> {
        if (!want || !attr_differs(file, cur, *want)) return std::nullopt;
        return AttrChange{file, cur, *want};
      };
      auto grows = [](const AttrChange& c) {
        return magnitude(c.file, c.after) > magnitude(c.file, c.before);
      };
      if (res == Resource::Memory) {
        auto c = change("memory.max", t.cur_memory_max, t.want_memory_max);
        if (!c) continue;
        PlanStep s{i, res, grows(*c), {*c}};
        auto& list = t.is_pod ? (s.increase ? pod_inc : pod_dec) : (s.increase ? ctr_inc : ctr_dec);
        list.push_back(std::move(s));
        continue;
      }
      auto weight = change("cpu.weight", t.cur_cpu_weight, t.want_cpu_weight);
      auto max = change("cpu.max", t.cur_cpu_max, t.want_cpu_max);
      if (t.is_pod) {
        // The kubelet moves the pod's limit and request independently
        // (resizeContainers: setPodCgroupConfig for the limit, then the request).
        for (auto* c : {&max, &weight}) {
          if (!*c) continue;
          PlanStep s{i, res, grows(**c), {**c}};
          (s.increase ? pod_inc : pod_dec).push_back(std::move(s));
        }
        continue;
      }
      if (!weight && !max) continue;
      // computePodResizeAction orders a container by its cpu limit when the
      // limit changes, otherwise by its request.
      bool inc = max ? grows(*max) : grows(*weight);
      PlanStep s{i, res, inc, {}};
      if (weight) s.changes.push_back(*weight);
      if (max) s.changes.push_back(*max);
      (inc ? ctr_inc : ctr_dec).push_back(std::move(s));
    }
    for (auto* l : {&pod_inc, &ctr_dec, &pod_dec, &ctr_inc})
      for (auto& s : *l) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace podshim::cgroup
