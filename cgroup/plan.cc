#include "cgroup/plan.h"

#include "base/str.h"

namespace podshim::cgroup {

bool attr_differs(const std::string& file, const std::string& cur, const std::string& want) {
  std::string_view c = str::trim(cur), w = str::trim(want);
  if (c == w) return false;
  const Controller* row = controller_for(file);
  return !row || !row->differs || row->differs(c, w);
}

std::vector<PlanStep> plan_resize(const std::vector<PlanTarget>& targets) {
  std::vector<PlanStep> out;
  for (Resource res : {Resource::Memory, Resource::Cpu, Resource::Other}) {
    std::vector<PlanStep> pod_inc, ctr_dec, pod_dec, ctr_inc;
    for (size_t i = 0; i < targets.size(); ++i) {
      const PlanTarget& t = targets[i];
      // This resource's changes, in table order, and which of them are limits.
      std::vector<AttrChange> changes;
      std::vector<bool> limit;
      std::vector<bool> grows;
      for (const PlanAttr& a : t.attrs) {
        if (!a.row || a.row->resource != res || !attr_differs(std::string(a.row->file), a.cur, a.want)) continue;
        changes.push_back(AttrChange{std::string(a.row->file), a.cur, a.want});
        limit.push_back(a.row->limit);
        grows.push_back(a.row->magnitude && a.row->magnitude(str::trim(a.want)) > a.row->magnitude(str::trim(a.cur)));
      }
      if (changes.empty()) continue;
      if (t.is_pod) {
        // The kubelet moves the pod's limit and request independently
        // (resizeContainers: setPodCgroupConfig for the limit, then the
        // request): one step each, limits first.
        for (bool limits : {true, false}) {
          for (size_t k = 0; k < changes.size(); ++k) {
            if (limit[k] != limits) continue;
            PlanStep s{i, res, grows[k], {changes[k]}};
            (s.increase ? pod_inc : pod_dec).push_back(std::move(s));
          }
        }
        continue;
      }
      // computePodResizeAction orders a container by its limit when the
      // limit changes, otherwise by its request.
      size_t by = 0;
      for (size_t k = 0; k < changes.size(); ++k) {
        if (limit[k]) {
          by = k;
          break;
        }
      }
      PlanStep s{i, res, grows[by], std::move(changes)};
      (s.increase ? ctr_inc : ctr_dec).push_back(std::move(s));
    }
    for (auto* l : {&pod_inc, &ctr_dec, &pod_dec, &ctr_inc})
      for (auto& s : *l) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace podshim::cgroup
