// podshimd's NRI mode: the CDI registry (live-refreshed on the loop), the
// event adapter and the plugin stub, wired to the daemon's store, engine and
// metrics. Kept apart from main.cc so hooks-only builds and modes need none
// of it.
#pragma once

#include <systemd/sd-event.h>

#include <memory>

#include "base/result.h"
#include "cdi/registry.h"
#include "cgroup/engine.h"
#include "shim/adapter/nri_adapter.h"
#include "shim/core/config.h"
#include "shim/core/metrics.h"
#include "shim/core/state.h"
#include "shim/nri/plugin.h"

namespace podshim::daemon {

class NriMode {
 public:
  // Loads the CDI registry and starts watching its directories, then
  // connects to the runtime: the pre-installed socket from
  // NRI_PLUGIN_SOCKET when the runtime started us, otherwise
  // cfg.nri_socket (reconnecting with backoff while the runtime is away).
  // `formulas` (may be null) learns the runtime's cpu.weight formula;
  // `readback` (may be null) reads containers back after runtime events.
  static Result<std::unique_ptr<NriMode>> start(sd_event* loop, const core::Config& cfg,
                                                core::Store& store, cgroup::Engine& engine,
                                                core::Metrics& metrics,
                                                std::shared_ptr<cgroup::WeightFormulaTracker> formulas,
                                                core::Scheduler schedule, core::ReadBack* readback = nullptr);
  ~NriMode();

  // The NRI-mode actuator (one writer per value: the runtime).
  core::Actuator& actuator() { return *actuator_; }
  // Routes the runtime's UpdateContainer / UpdatePodSandbox into the
  // resize service.
  void set_resize(core::ResizeManager* resize) { adapter_->set_resize(resize, actuator_.get()); }
  cdi::Registry& registry() { return *registry_; }
  nri::Plugin& plugin() { return *plugin_; }

 private:
  NriMode() = default;
  static int on_inotify(sd_event_source* s, int fd, uint32_t revents, void* userdata);

  core::Metrics* metrics_ = nullptr;
  std::unique_ptr<cdi::Registry> registry_;
  std::function<void()> on_cdi_readable_;
  sd_event_source* cdi_source_ = nullptr;
  std::unique_ptr<adapter::NriAdapter> adapter_;
  std::unique_ptr<nri::Plugin> plugin_;
  std::unique_ptr<adapter::NriActuator> actuator_;
};

}  // namespace podshim::daemon
