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

class Family {
 public:
  enum class Kind { Counter, Gauge, Histogram };
  Family(std::string name, std::string help, Kind kind, std::vector<double> buckets = {});

  void inc(const Labels& labels = {}, double by = 1);      // counter/gauge
  void set(const Labels& labels, double value);           // gauge
  void observe(const Labels& labels, double value);       // histogram
  void clear();                                           // drops every series (gauges rebuilt on render)
  void erase(const Labels& labels);                       // drops one series
  double value(const Labels& labels = {}) const;          // counter/gauge (tests)
  uint64_t count(const Labels& labels = {}) const;        // histogram sample count

  void render(std::string& out) const;
  const std::string& name() const { return name_; }

 private:
  struct Series {
    double value = 0;
    std::vector<uint64_t> bucket_counts;
    uint64_t count = 0;
    double sum = 0;
  };
  std::string name_, help_;
  Kind kind_;
  std::vector<double> buckets_;
  mutable std::mutex mu_;
  std::map<Labels, Series> series_;
};

// All of podshimd's metrics. Families are created once; code updates them
// through the named members.
class Metrics {
 public:
  Metrics();

  Family resize_requests;        // podshim_resize_requests_total{result}
  Family resize_latency;         // podshim_resize_duration_seconds (histogram)
  Family shrinks_refused;        // podshim_memory_shrinks_refused_total
  Family bytes_reclaimed;        // podshim_memory_reclaimed_bytes_total
  Family oom_kills;              // podshim_oom_kills_total{container}
  Family nri_connected;          // podshim_nri_connected (0/1)
  Family nri_events;             // podshim_nri_events_total{event}
  Family cdi_injections;         // podshim_cdi_injections_total
  Family cdi_spec_errors;        // podshim_cdi_spec_errors_total
  Family containers;             // podshim_containers (gauge)
  Family pods;                   // podshim_pods (gauge)
  Family http_requests;          // podshim_http_requests_total{method,code}
  Family http_denied;            // podshim_http_denied_total
  Family weight_formula;         // podshim_cpu_weight_formula{runtime,formula,source}: 1 = the runtime connected now
  Family weight_samples;         // podshim_cpu_weight_formula_samples{runtime,vote}
  Family drift;                  // podshim_drift{container,pod,resource}: 1 while kernel ≠ allocated
  Family drift_repairs;          // podshim_drift_repairs_total{result}
  Family readback_pass;          // podshim_readback_pass_seconds: the last full read-back pass
  Family shrink_pressure;        // podshim_memory_shrink_pressure_percent{kind}: PSI avg10 seen per shrink (histogram)
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
