// podshimd's NRI event handlers: keeps the model in step with the runtime,
// injects CDI devices at CreateContainer, and makes UpdateContainer and
// UpdatePodSandbox safe — a memory shrink is checked, reclaimed for and
// written by podshim at the moment the runtime asks, before the runtime's
// own write (the runtime-side check kubernetes#135670 asks for). A refusal
// goes back to the runtime as an error, which it surfaces to the kubelet;
// the kubelet then reports PodResizeInProgress/Error and retries.
#pragma once

#include <functional>
#include <memory>

#include "cdi/registry.h"
#include "cgroup/engine.h"
#include "shim/adapter/nri_map.h"
#include "shim/core/metrics.h"
#include "shim/core/readback.h"
#include "shim/core/resize.h"
#include "shim/core/state.h"
#include "shim/nri/plugin.h"

namespace podshim::adapter {

struct AdapterOptions {
  AdjustmentOptions adjustment;
  // The shares→weight formula the runtime uses for containers, to report
  // the allocated request as actual when cpu.weight matches it exactly
  // (the weight → milliCPU inverse is not unique).
  cgroup::WeightFormula formula = cgroup::WeightFormula::Quadratic;
  // When set (weight_formula: auto), the formula comes from here, and the
  // handlers feed it the (shares, cpu.weight) pairs they see per runtime.
  std::shared_ptr<cgroup::WeightFormulaTracker> formulas;
  // When set, reads the kernel's values back (and judges drift) instead of
  // read_back_container: touch() after PostStart/PostUpdateContainer,
  // touch_all() after Synchronize.
  core::ReadBack* readback = nullptr;
  // Runs work after the current event has been answered (the daemon's
  // loop); null runs it at once. Keeps cgroup read-backs out of the
  // runtime's 2 s Synchronize budget.
  std::function<void(std::function<void()>)> defer;
  // A pre-installed plugin's configuration arrives in Configure's `config`
  // (the conf.d drop-in); an error here fails Configure.
  std::function<Result<void>(const std::string& config)> on_config;
  // The connection ended; will_retry is false for a pre-installed plugin,
  // whose runtime starts a new process instead of reconnecting.
  std::function<void(bool will_retry)> on_disconnect;
  // Events podshim subscribes to (the stub keeps those the runtime knows).
  uint32_t events = 0;  // 0 → kDefaultEvents
};

// Every lifecycle event podshim models (1..13: all but
// ValidateContainerAdjustment, which podshim has no opinion on).
inline constexpr uint32_t kDefaultEvents = 0x1FFF;

// Containers whose cpu.weight a Synchronize reads at most to learn the
// runtime's formula (weight_formula: auto); later starts and updates add more.
inline constexpr size_t kMaxFormulaProbes = 32;

class NriAdapter : public nri::Handlers {
 public:
  // Borrows everything; engine and registry may be null (no cgroup access /
  // no CDI), metrics may be null.
  NriAdapter(core::Store& store, cgroup::Engine* engine, cdi::Registry* registry,
             core::Metrics* metrics, AdapterOptions opts);

  Result<uint32_t> configure(const api::ConfigureRequest& req, const nri::RuntimeInfo& rt) override;
  Result<void> synchronize(const api::SynchronizeRequest& all,
                           api::SynchronizeResponse* reply) override;

  Result<void> create_container(const api::PodSandbox& pod, const api::Container& ctr,
                                api::CreateContainerResponse* reply) override;
  Result<void> update_container(const api::PodSandbox& pod, const api::Container& ctr,
                                const api::LinuxResources& resources,
                                api::UpdateContainerResponse* reply) override;
  Result<void> stop_container(const api::PodSandbox& pod, const api::Container& ctr,
                              api::StopContainerResponse* reply) override;
  Result<void> update_pod_sandbox(const api::UpdatePodSandboxRequest& req) override;

  void run_pod_sandbox(const api::PodSandbox& pod) override;
  void stop_pod_sandbox(const api::PodSandbox& pod) override;
  void remove_pod_sandbox(const api::PodSandbox& pod) override;
  void post_update_pod_sandbox(const api::PodSandbox& pod) override;
  void post_create_container(const api::PodSandbox& pod, const api::Container& ctr) override;
  void start_container(const api::PodSandbox& pod, const api::Container& ctr) override;
  void post_start_container(const api::PodSandbox& pod, const api::Container& ctr) override;
  void post_update_container(const api::PodSandbox& pod, const api::Container& ctr) override;
  void remove_container(const api::PodSandbox& pod, const api::Container& ctr) override;

  void on_ready() override;
  void on_connection_error(const Error& why, bool will_retry) override;

  const nri::RuntimeInfo& runtime() const { return runtime_; }

 private:
  void count(api::Event e);
  // Upserts the container, keeping what podshim knows that NRI does not
  // (conditions, generation, devices, labels).
  void remember(const api::PodSandbox& pod, const api::Container& ctr, bool take_resources);
  void remember_pod(const api::PodSandbox& pod);
  // Reads the kernel's values into the container's actual; `shares` (0:
  // unknown) is what the runtime was asked for, a sample for `formulas`.
  void read_back_container(const std::string& id, uint64_t shares = 0);
  cgroup::WeightFormula formula() const;
  // Feeds the formula tracker the weight the runtime wrote for `ctr`.
  void learn_formula(const api::Container& ctr, const cgroup::Actual& a);
  // Applies `next` to one cgroup through the engine when memory shrinks,
  // so the shrink is safe; records the outcome.
  Result<void> guard(const std::string& id, const std::string& cgroup_path,
                     const cgroup::K8sResources& next, bool is_pod);

  core::Store& store_;
  cgroup::Engine* engine_;
  cdi::Registry* registry_;
  core::Metrics* metrics_;
  AdapterOptions opts_;
  nri::RuntimeInfo runtime_;
};

// The actuator for resizes requested through podshim's own API in NRI mode:
// the engine applies them safely first, then Runtime.UpdateContainers tells
// the runtime, whose stored spec stays the source of truth (it rewrites the
// same values through runc).
class NriActuator : public core::Actuator {
 public:
  NriActuator(cgroup::Engine& engine, nri::Plugin* plugin);
  Result<cgroup::ResizeReport> apply(const cgroup::PodResizeRequest& req) override;
  Result<cgroup::Actual> read_actual(const std::string& cgroup_path) override;
  void set_plugin(nri::Plugin* p) { plugin_ = p; }

 private:
  cgroup::Engine& engine_;
  nri::Plugin* plugin_;
};

}  // namespace podshim::adapter
