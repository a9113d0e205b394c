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

// The podshim-hook this build installs (the image's copy in the DaemonSet).
const char* builtin_hook_path();

// Whether an executable regular file is at `path` (access(X_OK) alone also
// passes directories).
bool executable_file(const std::string& path);

// --install-hook DIR: copies the built-in podshim-hook to DIR/podshim-hook
// (mode 0755) through a temporary file renamed over the old one, so a
// runtime exec'ing the old copy meanwhile is unaffected and the host always
// holds the hook of the podshimd version that runs (the DaemonSet's init
// container). DIR must be absolute and exist.
Result<std::string> install_hook(const std::string& src, const std::string& dest_dir);

class NriMode {
 public:
  // Loads the CDI registry and starts watching its directories, then
  // connects to the runtime: the pre-installed socket from
  // NRI_PLUGIN_SOCKET when the runtime started us, otherwise
  // cfg.nri_socket (reconnecting with backoff while the runtime is away).
  // `formulas` (may be null) learns the runtime's cpu.weight formula;
  // `readback` (may be null) reads containers back after runtime events.
  // `hook_host_path` (--hook-host-path) is where the runtime finds
  // podshim-hook on the host; empty: the built-in path (a host install).
  // The hook is injected only when that file is there as podshimd sees it
  // (the DaemonSet mounts the host directory at the same path).
  static Result<std::unique_ptr<NriMode>> start(sd_event* loop, const core::Config& cfg,
                                                core::Store& store, cgroup::Engine& engine,
                                                core::Metrics& metrics,
                                                std::shared_ptr<cgroup::WeightFormulaTracker> formulas,
                                                core::Scheduler schedule, core::ReadBack* readback = nullptr,
                                                const std::string& hook_host_path = {});
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
