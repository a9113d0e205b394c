// Prometheus metrics in the text exposition format (version 0.0.4): counters,
// gauges and histograms with labels, rendered with `# HELP`/`# TYPE` and the
// format's escaping rules. Hand-written because Debian 12 has no C++ client
// we could depend on; the surface is deliberately small.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cgroup/convert.h"

namespace podshim::core {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Escapes a label value: backslash, double quote and newline.
std::string escape_label_value(std::string_view v);
// Escapes HELP text: backslash and newline.
std::string escape_help(std::string_view v);

// One metric family. An unlabelled family always has its one series (0
// until first set, zero buckets for a histogram). A labelled family declares
// its label names; preset() creates the series of its known label values at
// 0, so the first increment of any of them is visible to increase() and
// rate() (a series that appears already at 1 is not). A labelled family
// with no series renders its HELP/TYPE only, never an unlabelled 0.
class Family {
  struct Series;

 public:
  enum class Kind { Counter, Gauge, Histogram };
  Family(std::string name, std::string help, Kind kind, std::vector<std::string> label_names = {},
         std::vector<double> buckets = {});

  // Every combination of the given values, in label_names order (one list
  // per label), at 0; kept across clear().
  void preset(const std::vector<std::vector<std::string>>& values);

  // One series, looked up once: a hot path (a counter bumped on every
  // request) keeps the cell and adds through it without building and
  // comparing label lists each time. The series is pinned: clear() and
  // erase() set it back to 0 instead of dropping it, so the cell stays valid
  // for the family's life. Cheap to copy.
  class Cell {
   public:
    void inc(double by = 1) const;

   private:
    friend class Family;
    Cell(Family* f, Series* s) : f_(f), s_(s) {}
    Family* f_;
    Series* s_;  // one of f_'s, pinned
  };
  Cell cell(const Labels& labels);

  void inc(const Labels& labels = {}, double by = 1);      // counter/gauge
  void set(const Labels& labels, double value);           // gauge
  void observe(const Labels& labels, double value);       // histogram
  void clear();                                           // drops every series but the pinned ones (back at 0)
  void erase(const Labels& labels);                       // drops one series (a pinned one goes back to 0)
  double value(const Labels& labels = {}) const;          // counter/gauge (tests)
  uint64_t count(const Labels& labels = {}) const;        // histogram sample count

  void render(std::string& out) const;
  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 private:
  struct Series {
    double value = 0;
    std::vector<uint64_t> bucket_counts;
    uint64_t count = 0;
    double sum = 0;
    bool pinned = false;  // a preset, or one a Cell points at
  };
  Series zero(bool pinned = false) const;

  std::string name_, help_;
  Kind kind_;
  std::vector<std::string> label_names_;
  std::vector<double> buckets_;
  mutable std::mutex mu_;
  std::map<Labels, Series> series_;
};

// All of podshimd's node-wide metrics, each declared here with its name,
// help text and labels. Families are created once; code updates them
// through the named members. The per-container families
// (podshim_container_*, podshim_drift) are rendered from the model by
// status::ContainerMetrics.
class Metrics {
 public:
  Metrics();

  Family build_info{"podshim_build_info",
      "Always 1: the podshimd version and the git commit it was built from.", Family::Kind::Gauge,
      {"version", "commit"}};
  Family resize_requests{"podshim_resize_requests_total",
      "Resize requests by result (applied, applied_with_oom_kill, unchanged, deferred, infeasible, "
      "restart_required, error, in_progress, invalid).",
      Family::Kind::Counter, {"result"}};
  Family resize_latency{"podshim_resize_duration_seconds",
      "Time from a resize request to its outcome, actuation included.",
      Family::Kind::Histogram, {},
      {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
  Family shrinks_refused{"podshim_memory_shrinks_refused_total",
      "Memory limit decreases refused because usage stayed above the target.",
      Family::Kind::Counter};
  Family bytes_reclaimed{"podshim_memory_reclaimed_bytes_total",
      "Bytes reclaimed from cgroups ahead of memory limit decreases.",
      Family::Kind::Counter};
  Family oom_kills{"podshim_oom_kills_total",
      "OOM kills seen in managed cgroups (memory.events oom_kill), all containers; per container: "
      "podshim_container_oom_kills_total.",
      Family::Kind::Counter};
  Family nri_connected{"podshim_nri_connected", "1 while connected to the runtime's NRI socket.",
      Family::Kind::Gauge};
  Family nri_events{"podshim_nri_events_total", "NRI events received, by event type.",
      Family::Kind::Counter, {"event"}};
  Family cdi_injections{"podshim_cdi_injections_total", "CDI devices injected into containers.",
      Family::Kind::Counter};
  Family cdi_spec_errors{"podshim_cdi_spec_errors_total", "CDI spec files that failed to load.",
      Family::Kind::Counter};
  Family cdi_hook_injected{"podshim_cdi_hook_injected",
      "1 when podshimd adds podshim-hook to containers that get CDI devices (the hook was "
      "found at its host path), 0 when it does not (no SELinux labels on CDI mounts).",
      Family::Kind::Gauge};
  Family containers{"podshim_containers", "Containers known to podshimd.", Family::Kind::Gauge};
  Family pods{"podshim_pods", "Pods known to podshimd.", Family::Kind::Gauge};
  Family http_requests{"podshim_http_requests_total", "Status socket requests by method and code.",
      Family::Kind::Counter, {"method", "code"}};
  Family http_denied{"podshim_http_denied_total", "Status socket requests denied by access control.",
      Family::Kind::Counter};
  Family watch_dropped{"podshim_watch_dropped_total",
      "/v1/watch streams disconnected for falling behind, by reason: backlog (the watcher's own "
      "queue limit, http.max_watch_backlog_bytes), total (the ceiling across all watchers, "
      "http.max_watch_total_bytes).",
      Family::Kind::Counter, {"reason"}};
  Family weight_formula{"podshim_cpu_weight_formula",
      "The shares-to-cpu.weight formula podshimd reads container cgroups with, per runtime seen "
      "(1: the runtime connected now; source: configured, learned from the weights the "
      "runtime wrote, or fallback until there is evidence).",
      Family::Kind::Gauge, {"runtime", "formula", "source"}};
  Family weight_samples{"podshim_cpu_weight_formula_samples",
      "Containers whose cpu.weight matched the linear formula, the quadratic one, both or "
      "neither, per runtime (weight_formula: auto).",
      Family::Kind::Gauge, {"runtime", "vote"}};
  Family drift_repairs{"podshim_drift_repairs_total",
      "Drifted containers rewritten to their allocated values (readback.repair_drift), by result.",
      Family::Kind::Counter, {"result"}};
  Family readback_pass{"podshim_readback_pass_seconds",
      "Wall time of the last full read-back pass over every container (all slices).",
      Family::Kind::Gauge};
  Family readback_passes{"podshim_readback_passes_total",
      "Full read-back passes completed over every container; a rate of 0 while containers exist means the "
      "read-back has stopped.",
      Family::Kind::Counter};
  Family shrink_pressure{"podshim_memory_shrink_pressure_ratio",
      "Highest memory PSI avg10 (kind: some, full) seen while a memory limit decrease held "
      "memory.high at its target, as a ratio (0..1, the kernel's percent / 100), one "
      "observation per staged shrink.",
      Family::Kind::Histogram, {"kind"}, {0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1}};
  Family shrink_refusals{"podshim_memory_shrink_refusals_total",
      "Memory limit decreases refused, by why: usage (anon/shmem above the target), growth "
      "(usage would cross it within the growth window), pressure (PSI above the threshold "
      "under the clamp), timeout (reclaim ran out of time).",
      Family::Kind::Counter, {"why"}};

  // The whole exposition, families in a fixed order.
  std::string render() const;

 private:
  std::vector<const Family*> all_;
};

// Rebuilds podshim_cpu_weight_formula and _samples from the tracker (before
// each /metrics render).
void export_weight_formulas(Metrics& m, const cgroup::WeightFormulaTracker& t);

}  // namespace podshim::core
