#include "shim/core/metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace podshim::core {

namespace {

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void render_labels(std::string& out, const Labels& labels, const char* extra_key = nullptr,
                   const std::string& extra_value = {}) {
  if (labels.empty() && !extra_key) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += escape_label_value(v);
    out += '"';
  }
  if (extra_key) {
    if (!first) out += ',';
    out += extra_key;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Family::Family(std::string name, std::string help, Kind kind, std::vector<double> buckets)
    : name_(std::move(name)), help_(std::move(help)), kind_(kind), buckets_(std::move(buckets)) {}

void Family::inc(const Labels& labels, double by) {
  std::lock_guard lk(mu_);
  series_[labels].value += by;
}

void Family::set(const Labels& labels, double value) {
  std::lock_guard lk(mu_);
  series_[labels].value = value;
}

void Family::clear() {
  std::lock_guard lk(mu_);
  series_.clear();
}

void Family::erase(const Labels& labels) {
  std::lock_guard lk(mu_);
  series_.erase(labels);
}

void Family::observe(const Labels& labels, double value) {
  std::lock_guard lk(mu_);
  auto& s = series_[labels];
  if (s.bucket_counts.empty()) s.bucket_counts.assign(buckets_.size(), 0);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (value <= buckets_[i]) s.bucket_counts[i]++;
  }
  s.count++;
  s.sum += value;
}

double Family::value(const Labels& labels) const {
  std::lock_guard lk(mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.value;
}

uint64_t Family::count(const Labels& labels) const {
  std::lock_guard lk(mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.count;
}

void Family::render(std::string& out) const {
  static constexpr const char* kinds[] = {"counter", "gauge", "histogram"};
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, escape_help(help_), name_,
                     kinds[static_cast<int>(kind_)]);
  std::lock_guard lk(mu_);
  if (series_.empty() && kind_ != Kind::Histogram) {
    // An unlabelled family shows its zero so dashboards see the metric exists.
    out += fmt::format("{} 0\n", name_);
    return;
  }
  for (const auto& [labels, s] : series_) {
    if (kind_ != Kind::Histogram) {
      out += name_;
      render_labels(out, labels);
      out += ' ';
      out += format_value(s.value);
      out += '\n';
      continue;
    }
    for (size_t i = 0; i < buckets_.size(); ++i) {
      out += name_ + "_bucket";
      render_labels(out, labels, "le", format_value(buckets_[i]));
      out += fmt::format(" {}\n", i < s.bucket_counts.size() ? s.bucket_counts[i] : 0);
    }
    out += name_ + "_bucket";
    render_labels(out, labels, "le", "+Inf");
    out += fmt::format(" {}\n", s.count);
    out += name_ + "_sum";
    render_labels(out, labels);
    out += ' ' + format_value(s.sum) + '\n';
    out += name_ + "_count";
    render_labels(out, labels);
    out += fmt::format(" {}\n", s.count);
  }
}

Metrics::Metrics()
    : resize_requests("podshim_resize_requests_total",
                      "Resize requests by result (applied, unchanged, deferred, infeasible, "
                      "restart_required, error, invalid).",
                      Family::Kind::Counter),
      resize_latency("podshim_resize_duration_seconds",
                     "Time from a resize request to its outcome, actuation included.",
                     Family::Kind::Histogram,
                     {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                      0.5, 1, 2.5}),
      shrinks_refused("podshim_memory_shrinks_refused_total",
                      "Memory limit decreases refused because usage stayed above the target.",
                      Family::Kind::Counter),
      bytes_reclaimed("podshim_memory_reclaimed_bytes_total",
                      "Bytes reclaimed from cgroups ahead of memory limit decreases.",
                      Family::Kind::Counter),
      oom_kills("podshim_oom_kills_total",
                "OOM kills seen in managed cgroups (memory.events oom_kill).", Family::Kind::Counter),
      nri_connected("podshim_nri_connected", "1 while connected to the runtime's NRI socket.",
                    Family::Kind::Gauge),
      nri_events("podshim_nri_events_total", "NRI events received, by event type.",
                 Family::Kind::Counter),
      cdi_injections("podshim_cdi_injections_total", "CDI devices injected into containers.",
                     Family::Kind::Counter),
      cdi_spec_errors("podshim_cdi_spec_errors_total", "CDI spec files that failed to load.",
                      Family::Kind::Counter),
      containers("podshim_containers", "Containers known to podshimd.", Family::Kind::Gauge),
      pods("podshim_pods", "Pods known to podshimd.", Family::Kind::Gauge),
      http_requests("podshim_http_requests_total", "Status socket requests by method and code.",
                    Family::Kind::Counter),
      http_denied("podshim_http_denied_total", "Status socket requests denied by access control.",
                  Family::Kind::Counter),
      weight_formula("podshim_cpu_weight_formula",
                     "The shares-to-cpu.weight formula podshimd reads container cgroups with, per runtime seen "
                     "(1: the runtime connected now; source: configured, learned from the weights the "
                     "runtime wrote, or fallback until there is evidence).",
                     Family::Kind::Gauge),
      weight_samples("podshim_cpu_weight_formula_samples",
                     "Containers whose cpu.weight matched the linear formula, the quadratic one, both or "
                     "neither, per runtime (weight_formula: auto).",
                     Family::Kind::Gauge),
      drift("podshim_drift",
            "1 while the kernel holds a value other than the allocated one for a container "
            "(resource: cpu_request, cpu_limit, memory_limit), 0 once it is back in step.",
            Family::Kind::Gauge),
      drift_repairs("podshim_drift_repairs_total",
                    "Drifted containers rewritten to their allocated values (readback.repair_drift), by result.",
                    Family::Kind::Counter),
      readback_pass("podshim_readback_pass_seconds",
                    "Wall time of the last full read-back pass over every container (all slices).",
                    Family::Kind::Gauge),
      shrink_pressure("podshim_memory_shrink_pressure_percent",
                      "Highest memory PSI avg10 (kind: some, full) seen while a memory limit decrease held "
                      "memory.high at its target, one observation per staged shrink.",
                      Family::Kind::Histogram, {1, 2.5, 5, 10, 20, 40, 60, 80, 100}),
      shrink_refusals("podshim_memory_shrink_refusals_total",
                      "Memory limit decreases refused, by why: usage (anon/shmem above the target), growth "
                      "(usage would cross it within the growth window), pressure (PSI above the threshold "
                      "under the clamp), timeout (reclaim ran out of time).",
                      Family::Kind::Counter) {
  all_ = {&resize_requests, &resize_latency, &shrinks_refused, &bytes_reclaimed, &oom_kills,
          &nri_connected,   &nri_events,     &cdi_injections,  &cdi_spec_errors, &containers,
          &pods,            &http_requests,  &http_denied,     &weight_formula,  &weight_samples,
          &drift,           &drift_repairs,  &readback_pass,   &shrink_pressure, &shrink_refusals};
}

std::string Metrics::render() const {
  std::string out;
  out.reserve(4096);
  for (const auto* f : all_) f->render(out);
  return out;
}

void export_weight_formulas(Metrics& m, const cgroup::WeightFormulaTracker& t) {
  m.weight_formula.clear();
  m.weight_samples.clear();
  for (const auto& s : t.status()) {
    m.weight_formula.set({{"runtime", s.runtime},
                          {"formula", std::string(cgroup::formula_name(s.formula))},
                          {"source", std::string(cgroup::source_name(s.source))}},
                         s.current ? 1 : 0);
    using V = cgroup::WeightVote;
    for (auto [v, n] : {std::pair{V::Linear, s.evidence.linear}, std::pair{V::Quadratic, s.evidence.quadratic},
                        std::pair{V::Both, s.evidence.both}, std::pair{V::Neither, s.evidence.neither}})
      m.weight_samples.set({{"runtime", s.runtime}, {"vote", std::string(cgroup::vote_name(v))}},
                           static_cast<double>(n));
  }
}

}  // namespace podshim::core
