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
 public:
  enum class Kind { Counter, Gauge, Histogram };
  Family(std::string name, std::string help, Kind kind, std::vector<std::string> label_names = {},
         std::vector<double> buckets = {});

  // Every combination of the given values, in label_names order (one list
  // per label), at 0; kept across clear().
  void preset(const std::vector<std::vector<std::string>>& values);

  void inc(const Labels& labels = {}, double by = 1);      // counter/gauge
  void set(const Labels& labels, double value);           // gauge
  void observe(const Labels& labels, double value);       // histogram
  void clear();                                           // drops every series but the presets (back at 0)
  void erase(const Labels& labels);                       // drops one series
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
  };
  Series zero() const;

  std::string name_, help_;
  Kind kind_;
  std::vector<std::string> label_names_;
  std::vector<double> buckets_;
  std::vector<Labels> presets_;
  mutable std::mutex mu_;
  std::map<Labels, Series> series_;
};

// All of podshimd's node-wide metrics. Families are created once; code
// updates them through the named members. The per-container families
// (podshim_container_*, podshim_drift) are rendered from the model by
// status::ContainerMetrics.
class Metrics {
 public:
  Metrics();

  Family build_info;             // podshim_build_info{version,commit} 1
  Family resize_requests;        // podshim_resize_requests_total{result}
  Family resize_latency;         // podshim_resize_duration_seconds (histogram)
  Family shrinks_refused;        // podshim_memory_shrinks_refused_total
  Family bytes_reclaimed;        // podshim_memory_reclaimed_bytes_total
  Family oom_kills;              // podshim_oom_kills_total (per container: podshim_container_oom_kills_total)
  Family nri_connected;          // podshim_nri_connected (0/1)
  Family nri_events;             // podshim_nri_events_total{event}
  Family cdi_injections;         // podshim_cdi_injections_total
  Family cdi_spec_errors;        // podshim_cdi_spec_errors_total
  Family cdi_hook_injected;      // podshim_cdi_hook_injected (0/1): podshim-hook found on the host and injected
  Family containers;             // podshim_containers (gauge)
  Family pods;                   // podshim_pods (gauge)
  Family http_requests;          // podshim_http_requests_total{method,code}
  Family http_denied;            // podshim_http_denied_total
  Family watch_dropped;          // podshim_watch_dropped_total{reason}: backlog, total
  Family weight_formula;         // podshim_cpu_weight_formula{runtime,formula,source}: 1 = the runtime connected now
  Family weight_samples;         // podshim_cpu_weight_formula_samples{runtime,vote}
  Family drift_repairs;          // podshim_drift_repairs_total{result}
  Family readback_pass;          // podshim_readback_pass_seconds: the last full read-back pass
  Family shrink_pressure;        // podshim_memory_shrink_pressure_ratio{kind}: PSI avg10 / 100 seen per shrink (histogram)
  Family shrink_refusals;        // podshim_memory_shrink_refusals_total{why}: usage, growth, pressure, timeout

  // The whole exposition, families in a fixed order.
  std::string render() const;

 private:
  std::vector<const Family*> all_;
};

// Rebuilds podshim_cpu_weight_formula and _samples from the tracker (before
// each /metrics render).
void export_weight_formulas(Metrics& m, const cgroup::WeightFormulaTracker& t);

}  // namespace podshim::core
