#include "shim/status/container_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "cgroup/controllers.h"
#include "shim/core/metrics.h"
#include "shim/core/readback.h"

namespace podshim::status {

namespace {

using core::Container;
using core::Labels;

// One family's header, in the text exposition format 0.0.4.
void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, core::escape_help(help), name, type);
}

void series(std::string& out, std::string_view name, const Labels& labels, double v) {
  out += name;
  out += '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first;
    out += "=\"";
    out += core::escape_label_value(labels[i].second);
    out += '"';
  }
  out += "} ";
  out += fmt::format("{}", v);
  out += '\n';
}

Labels with(Labels l, std::string_view k, std::string_view v) {
  l.emplace_back(std::string(k), std::string(v));
  return l;
}

std::string annotation(const Container& c, const char* key) {
  return std::string(c.annotations.get(key).value_or(std::string_view()));
}

}  // namespace

Labels container_labels(const Container& c, const std::map<std::string, core::Pod>& pods) {
  std::string ns, pod;
  if (auto p = pods.find(c.pod_uid); p != pods.end()) {
    ns = p->second.namespace_;
    pod = p->second.name;
  }
  // Hook-registered containers may come without a pod object; the CRI
  // annotations carry the same names (cri-api pkg/annotations).
  if (ns.empty()) ns = annotation(c, "io.kubernetes.pod.namespace");
  if (pod.empty()) pod = annotation(c, "io.kubernetes.pod.name");
  std::string uid = c.pod_uid.empty() ? annotation(c, "io.kubernetes.pod.uid") : c.pod_uid;
  return {{"namespace", std::move(ns)},
          {"pod", std::move(pod)},
          {"uid", std::move(uid)},
          {"container", c.name.empty() ? c.id : c.name}};
}

namespace {

// Outcome names are a fixed set, so the outcome label stays bounded:
// applied, unchanged, deferred, infeasible, restart_required, error.
std::string outcome_of(const Container& c, const core::K8sResources& previous_allocated) {
  if (c.conditions.pending) {
    return c.conditions.pending->reason == core::kReasonInfeasible ? "infeasible" : "deferred";
  }
  if (c.conditions.in_progress && c.conditions.in_progress->reason == core::kReasonError) return "error";
  if (c.restart_required) return "restart_required";
  return c.allocated == previous_allocated ? "unchanged" : "applied";
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

ContainerMetrics::ContainerMetrics(core::Store& store, size_t max_containers, bool nri_enabled)
    : store_(store), max_containers_(max_containers), nri_enabled_(nri_enabled) {
  sub_ = store_.subscribe([this](const core::Event& ev) { on_event(ev); });
}

ContainerMetrics::~ContainerMetrics() { store_.unsubscribe(sub_); }

void ContainerMetrics::observe(core::ResizeManager& resize) {
  resize.on_actuation([this](const core::ResizeManager::ActuationRecord& r) {
    record_actuation(std::string(r.container_id), r.seconds, r.shrink_refused);
  });
}

void ContainerMetrics::record_actuation(const std::string& container_id, double seconds, bool shrink_refused) {
  std::lock_guard lk(mu_);
  auto& t = tracks_[container_id];
  t.pending_duration += seconds;
  if (shrink_refused) t.shrinks_refused++;
}

// Called under the store's lock: takes only mu_, never the store.
void ContainerMetrics::on_event(const core::Event& ev) {
  if (!ev.container) return;
  const Container& c = *ev.container;
  std::lock_guard lk(mu_);
  if (ev.type == core::EventType::ContainerRemoved) {
    tracks_.erase(c.id);  // its series go with it
    return;
  }
  auto [it, fresh] = tracks_.try_emplace(c.id);
  Track& t = it->second;
  const bool unseen = t.generation < 0;
  // PodResizeInProgress without a reason: an actuation is running (the
  // manager stores the new generation, and the allocated values before it,
  // until it ends). Its outcome is taken when it ends, against those.
  if (c.conditions.in_progress && c.conditions.in_progress->reason.empty()) {
    t.running = true;
    t.generation = c.generation;
    t.allocated = c.allocated;
    return;
  }
  bool resized = false;
  if (t.running) {
    t.running = false;
    resized = true;
  } else if (unseen) {
    // First sight (registration, or the first resize after a restart of
    // podshimd): an outcome only if something already happened to it.
    resized = t.pending_duration > 0 || !c.conditions.empty();
  } else if (c.generation != t.generation) {
    resized = true;
  } else if ((t.outcome == "deferred" || t.outcome == "error") && c.conditions.empty()) {
    // A deferred resize admitted later (ResizeManager::retry_deferred keeps
    // the generation), or an actuation error cleared by a later success.
    resized = true;
  }
  if (resized) {
    t.outcome = outcome_of(c, unseen ? c.allocated : t.allocated);
    if (unseen && t.outcome == "unchanged" && t.pending_duration > 0) t.outcome = "applied";
    t.timestamp_seconds = ev.time_unix_ms > 0 ? static_cast<double>(ev.time_unix_ms) / 1000 : unix_seconds_now();
    t.duration_seconds = t.pending_duration;
    t.pending_duration = 0;
  }
  t.generation = c.generation;
  t.allocated = c.allocated;
}

namespace {

// The containers one render covers, with their labels, in the same order.
struct Rows {
  const std::vector<Container>& containers;
  const std::vector<Labels>& labels;
  template <typename F>
  void each(F&& fn) const {
    for (size_t i = 0; i < containers.size(); ++i) fn(containers[i], labels[i]);
  }
};

// A cpu (cores) and a memory (bytes) series of one family, each when known,
// then one for each registered resource of `extra` whose row is a limit
// (`limits`) or a request (not), in the row's unit.
void cpu_mem(std::string& out, std::string_view name, const Labels& l, const std::optional<int64_t>& cpu_milli,
             const std::optional<int64_t>& mem_bytes, const cgroup::ExtraValues& extra,
             bool limits) {
  if (cpu_milli) series(out, name, with(with(l, "resource", "cpu"), "unit", "core"), static_cast<double>(*cpu_milli) / 1000);
  if (mem_bytes) series(out, name, with(with(l, "resource", "memory"), "unit", "byte"), static_cast<double>(*mem_bytes));
  for (const auto& [res, v] : extra) {
    const cgroup::Controller* row = cgroup::resource_named(res);
    if (!row || row->limit != limits) continue;  // a name this build does not register
    series(out, name, with(with(l, "resource", res), "unit", row->unit), static_cast<double>(v));
  }
}

// The pod resize conditions each container has now.
void render_conditions(std::string& out, const Rows& rows) {
  header(out, "podshim_container_resize_condition", "gauge",
         "1 while the container's pod resize condition of this type and reason is present "
         "(PodResizePending: Deferred|Infeasible; PodResizeInProgress: \"\"|Error).");
  rows.each([&](const Container& c, const Labels& l) {
    if (const auto& p = c.conditions.pending) {
      series(out, "podshim_container_resize_condition",
             with(with(l, "type", core::kPodResizePending), "reason", p->reason), 1);
    }
    if (const auto& p = c.conditions.in_progress) {
      series(out, "podshim_container_resize_condition",
             with(with(l, "type", core::kPodResizeInProgress), "reason", p->reason), 1);
    }
  });
}

// What podshim allocated and what the kernel holds, with usage and kills.
void render_values(std::string& out, const Rows& rows) {
  header(out, "podshim_container_allocated_requests", "gauge",
         "Requests podshim accepted for the container (cpu in cores, memory in bytes, others in their unit label).");
  rows.each([&](const Container& c, const Labels& l) {
    cpu_mem(out, "podshim_container_allocated_requests", l, c.allocated.cpu_request_milli,
            c.allocated.memory_request_bytes, c.allocated.extra, false);
  });
  header(out, "podshim_container_allocated_limits", "gauge",
         "Limits podshim accepted for the container (cpu in cores, memory in bytes, others in their unit label).");
  rows.each([&](const Container& c, const Labels& l) {
    cpu_mem(out, "podshim_container_allocated_limits", l, c.allocated.cpu_limit_milli, c.allocated.memory_limit_bytes,
            c.allocated.extra, true);
  });
  header(out, "podshim_container_actual_requests", "gauge",
         "CPU request the kernel holds, converted back from cpu.weight (cores); read after each resize.");
  rows.each([&](const Container& c, const Labels& l) {
    if (c.actual) {
      cpu_mem(out, "podshim_container_actual_requests", l, c.actual->resources.cpu_request_milli, std::nullopt,
              c.actual->resources.extra, false);
    }
  });
  header(out, "podshim_container_actual_limits", "gauge",
         "Limits the kernel holds (cpu.max in cores, memory.max in bytes, others in their unit label); read after each "
         "resize.");
  rows.each([&](const Container& c, const Labels& l) {
    if (c.actual) {
      cpu_mem(out, "podshim_container_actual_limits", l, c.actual->resources.cpu_limit_milli,
              c.actual->resources.memory_limit_bytes, c.actual->resources.extra, true);
    }
  });
  header(out, "podshim_container_memory_usage_bytes", "gauge",
         "memory.current of the container's cgroup at the last read-back.");
  rows.each([&](const Container& c, const Labels& l) {
    if (c.actual) series(out, "podshim_container_memory_usage_bytes", l, static_cast<double>(c.actual->memory_current));
  });
  header(out, "podshim_container_oom_kills_total", "counter",
         "oom_kill of the container's memory.events at the last read-back.");
  rows.each([&](const Container& c, const Labels& l) {
    if (c.actual) series(out, "podshim_container_oom_kills_total", l, static_cast<double>(c.actual->oom_kill));
  });
}

void render_drift(std::string& out, const Rows& rows) {
  header(out, "podshim_drift", "gauge",
         "1 while the kernel holds a value other than the one podshim last gave it for the container "
         "(resource: cpu_request, cpu_limit, memory_limit, or a registered resource's name), 0 while it is in "
         "step; from the first read-back. Not a resize state: a refused or failed resize is "
         "podshim_container_resize_condition {type=\"PodResizeInProgress\",reason=\"Error\"}, not drift.");
  rows.each([&](const Container& c, const Labels& l) {
    if (!c.actual || c.state == "stopped") return;
    auto one = [&](std::string_view r) {
      const bool drifting =
          std::any_of(c.drift.begin(), c.drift.end(), [&](const core::Drift& d) { return d.resource == r; });
      series(out, "podshim_drift", with(l, "resource", r), drifting ? 1 : 0);
    };
    for (std::string_view r : {core::kDriftCpuRequest, core::kDriftCpuLimit, core::kDriftMemoryLimit}) one(r);
    // A registered resource is judged where it is allocated (and read).
    for (const auto& [name, v] : c.allocated.extra)
      if (cgroup::resource_named(name)) one(name);
  });
}

}  // namespace

void ContainerMetrics::render(std::string& out) const {
  // Copies first, so mu_ is never held while the store's lock is taken.
  std::vector<Container> containers = store_.containers();
  std::map<std::string, core::Pod> pods;
  for (auto& p : store_.pods()) {
    std::string uid = p.uid;
    pods.emplace(std::move(uid), std::move(p));
  }
  size_t dropped = containers.size() > max_containers_ ? containers.size() - max_containers_ : 0;
  if (dropped) containers.resize(max_containers_);
  std::map<std::string, Track> tracks;
  {
    std::lock_guard lk(mu_);
    for (const auto& c : containers) {
      if (auto it = tracks_.find(c.id); it != tracks_.end()) tracks.emplace(c.id, it->second);
    }
  }

  // kube-state-metrics' labels, in its order (kube_pod_container_*:
  // namespace, pod, uid, container), so `on (namespace, pod, container)` or
  // `on (uid, container)` joins podshim's series with its.
  std::vector<Labels> base;
  base.reserve(containers.size());
  for (const auto& c : containers) base.push_back(container_labels(c, pods));
  const Rows rows{containers, base};

  render_conditions(out, rows);
  render_values(out, rows);
  // The containers whose last resize has an outcome, with its track.
  auto each_last_resize = [&](auto&& fn) {
    rows.each([&](const Container& c, const Labels& l) {
      auto t = tracks.find(c.id);
      if (t != tracks.end() && !t->second.outcome.empty()) fn(t->second, l);
    });
  };
  header(out, "podshim_container_last_resize_outcome", "gauge",
         "1 for the outcome of the container's last resize (applied, unchanged, deferred, infeasible, "
         "restart_required, error).");
  each_last_resize([&](const Track& t, const Labels& l) {
    series(out, "podshim_container_last_resize_outcome", with(l, "outcome", t.outcome), 1);
  });
  header(out, "podshim_container_last_resize_timestamp_seconds", "gauge",
         "Unix time of the container's last resize outcome.");
  each_last_resize([&](const Track& t, const Labels& l) {
    series(out, "podshim_container_last_resize_timestamp_seconds", l, t.timestamp_seconds);
  });
  header(out, "podshim_container_last_resize_duration_seconds", "gauge",
         "Time the container's last resize spent in cgroup actuation (0 when it was not actuated).");
  each_last_resize([&](const Track& t, const Labels& l) {
    series(out, "podshim_container_last_resize_duration_seconds", l, t.duration_seconds);
  });
  header(out, "podshim_container_memory_shrinks_refused_total", "counter",
         "Memory limit decreases of this container refused because usage stayed above the target.");
  rows.each([&](const Container& c, const Labels& l) {
    auto t = tracks.find(c.id);
    series(out, "podshim_container_memory_shrinks_refused_total", l,
           t == tracks.end() ? 0 : static_cast<double>(t->second.shrinks_refused));
  });
  render_drift(out, rows);
  header(out, "podshim_container_metrics_dropped", "gauge",
         "Containers left out of the per-container families by metrics.max_containers.");
  out += fmt::format("podshim_container_metrics_dropped {}\n", dropped);
  header(out, "podshim_nri_enabled", "gauge", "1 when podshimd runs as an NRI plugin (nri.enabled).");
  out += fmt::format("podshim_nri_enabled {}\n", nri_enabled_ ? 1 : 0);
}

}  // namespace podshim::status
