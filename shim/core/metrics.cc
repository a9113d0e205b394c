#include "shim/core/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "cgroup/engine.h"
#include "shim/core/resize.h"
#include "shim/core/version.h"

#ifndef PODSHIM_VERSION
#error "PODSHIM_VERSION is set by shim/core/meson.build (meson's project version)"
#endif

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

Family::Family(std::string name, std::string help, Kind kind, std::vector<std::string> label_names,
               std::vector<double> buckets)
    : name_(std::move(name)),
      help_(std::move(help)),
      kind_(kind),
      label_names_(std::move(label_names)),
      buckets_(std::move(buckets)) {
  if (label_names_.empty()) series_.emplace(Labels{}, zero(true));
}

Family::Series Family::zero(bool pinned) const {
  Series s;
  s.pinned = pinned;
  if (kind_ == Kind::Histogram) s.bucket_counts.assign(buckets_.size(), 0);
  return s;
}

void Family::preset(const std::vector<std::vector<std::string>>& values) {
  if (values.size() != label_names_.size()) {
    throw std::logic_error(fmt::format("{}: preset() takes one list per label ({})", name_, label_names_.size()));
  }
  std::vector<Labels> combos{Labels{}};
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<Labels> next;
    for (const auto& c : combos) {
      for (const auto& v : values[i]) {
        next.push_back(c);
        next.back().emplace_back(label_names_[i], v);
      }
    }
    combos = std::move(next);
  }
  std::lock_guard lk(mu_);
  for (auto& c : combos) series_.try_emplace(std::move(c), zero()).first->second.pinned = true;
}

Family::Cell Family::cell(const Labels& labels) {
  std::lock_guard lk(mu_);
  Series& s = series_.try_emplace(labels, zero()).first->second;
  s.pinned = true;
  return Cell(this, &s);
}

void Family::Cell::inc(double by) const {
  std::lock_guard lk(f_->mu_);
  s_->value += by;
}

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
  for (auto it = series_.begin(); it != series_.end();) {
    if (it->second.pinned) {
      it->second = zero(true);
      ++it;
    } else {
      it = series_.erase(it);
    }
  }
}

void Family::erase(const Labels& labels) {
  std::lock_guard lk(mu_);
  auto it = series_.find(labels);
  if (it == series_.end()) return;
  if (it->second.pinned) {
    it->second = zero(true);
  } else {
    series_.erase(it);
  }
}

void Family::observe(const Labels& labels, double value) {
  std::lock_guard lk(mu_);
  auto& s = series_.try_emplace(labels, zero()).first->second;
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

namespace {

// The label values the code can produce, preset at 0 (docs/metrics.md).
// Methods as the status server counts them (anything else is "other").
const std::vector<std::string> kHttpMethods{"GET", "HEAD", "POST", "DELETE", "other"};
// Every final status the status server's replies can carry (status::
// reason_phrase; tests/deploy/metric_labels_test.cc keeps the two in step).
const std::vector<std::string> kHttpCodes{"200", "201", "400", "403", "404", "405", "408", "409", "411",
                                          "413", "414", "417", "422", "431", "500", "501", "503", "505"};
// NRI events (nri::event_name; checked by the same test).
const std::vector<std::string> kNriEvents{
    "RunPodSandbox",   "StopPodSandbox",      "RemovePodSandbox",    "CreateContainer",    "PostCreateContainer",
    "StartContainer",  "PostStartContainer",  "UpdateContainer",     "PostUpdateContainer", "StopContainer",
    "RemoveContainer", "UpdatePodSandbox",    "PostUpdatePodSandbox", "ValidateContainerAdjustment"};

std::vector<std::string> resize_results() {
  std::vector<std::string> out;
  using O = ResizeOutcome;
  for (O o : {O::Applied, O::AppliedWithOomKill, O::Unchanged, O::Deferred, O::Infeasible, O::RestartRequired,
              O::Error, O::InProgress})
    out.emplace_back(to_string(o));
  out.emplace_back("invalid");  // a request refused before it became a resize
  return out;
}

std::vector<std::string> shrink_whys() {
  std::vector<std::string> out;
  using W = cgroup::ShrinkWhy;
  for (W w : {W::Usage, W::Growth, W::Pressure, W::Timeout}) out.emplace_back(cgroup::shrink_why_name(w));
  return out;
}

}  // namespace

Metrics::Metrics() {
  build_info.set({{"version", PODSHIM_VERSION}, {"commit", PODSHIM_COMMIT}}, 1);
  resize_requests.preset({resize_results()});
  cdi_hook_injected.set({}, 0);  // hooks-only mode and until NRI mode decides
  nri_events.preset({kNriEvents});
  http_requests.preset({kHttpMethods, kHttpCodes});
  watch_dropped.preset({{"backlog", "total"}});
  drift_repairs.preset({{"applied", "failed"}});
  shrink_pressure.preset({{"some", "full"}});
  shrink_refusals.preset({shrink_whys()});
  all_ = {&build_info,     &resize_requests, &resize_latency, &shrinks_refused, &bytes_reclaimed,
          &oom_kills,      &nri_connected,   &nri_events,     &cdi_injections,  &cdi_spec_errors,
          &cdi_hook_injected,
          &containers,     &pods,            &http_requests,  &http_denied,     &watch_dropped,
          &weight_formula, &weight_samples,  &drift_repairs,  &readback_pass,   &readback_passes,
          &shrink_pressure, &shrink_refusals};
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
