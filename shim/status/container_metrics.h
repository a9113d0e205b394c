// Per-container series for a fleet, in the kube-state-metrics style
// (kubernetes/kube-state-metrics docs/metrics/workload/pod-metrics.md: every
// series carries namespace, pod, uid and container — names, the pod's uid —
// the value 1 for a state, units in a label): resize conditions, allocated
// and actual resources, drift, the last resize's outcome and duration, and
// memory shrinks refused. Every per-container series podshimd exports is
// rendered here, so they all carry the same labels. Rendered on demand from
// the model's public read API (core::Store), plus what the resize manager
// reports of each actuation (ResizeManager::on_actuation).
//
// Cardinality: at most kSeriesPerContainer series per container, and at most
// `max_containers` containers (the rest are counted in
// podshim_container_metrics_dropped); label values come from the model only
// (names, and reasons/outcomes from fixed sets). docs/metrics.md lists them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "shim/core/metrics.h"
#include "shim/core/resize.h"
#include "shim/core/state.h"

namespace podshim::status {

// The largest number of series one container contributes (conditions 2,
// allocated 4, actual 3, usage 1, oom 1, outcome 1, timestamp 1, duration 1,
// refused 1, drift 3).
inline constexpr size_t kSeriesPerContainer = 18;

// The labels every per-container series starts with: namespace, pod, uid,
// container (the pod's namespace and name from `pods`, keyed by uid, else the
// CRI annotations; the container's name, else its id).
core::Labels container_labels(const core::Container& c, const std::map<std::string, core::Pod>& pods);

class ContainerMetrics {
 public:
  // Borrows `store` for its lifetime and subscribes to it.
  ContainerMetrics(core::Store& store, size_t max_containers, bool nri_enabled);
  ~ContainerMetrics();
  ContainerMetrics(const ContainerMetrics&) = delete;
  ContainerMetrics& operator=(const ContainerMetrics&) = delete;

  // Records every actuation's duration and shrink refusal per container, as
  // `resize` reports them (ResizeManager::on_actuation). `resize` must not
  // outlive this object, or must be observed by another first.
  void observe(core::ResizeManager& resize);

  // Appends the exposition (HELP/TYPE and series) of every per-container
  // family to `out`.
  void render(std::string& out) const;

  // Called for each actuation observe() sees (public for tests).
  void record_actuation(const std::string& container_id, double seconds, bool shrink_refused);

 private:
  struct Track {
    int64_t generation = -1;
    std::string outcome;          // fixed set, see outcome_of()
    double timestamp_seconds = 0;
    double duration_seconds = 0;  // actuation time of the last resize
    double pending_duration = 0;  // actuation seen since the last outcome
    uint64_t shrinks_refused = 0;
    core::K8sResources allocated;  // at the last event, to tell applied from unchanged
    bool running = false;          // an actuation runs (PodResizeInProgress, no reason)
  };
  void on_event(const core::Event& ev);

  core::Store& store_;
  size_t max_containers_;
  bool nri_enabled_;
  uint64_t sub_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, Track, std::less<>> tracks_;
};

}  // namespace podshim::status
