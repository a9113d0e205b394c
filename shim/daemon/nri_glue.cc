#include "shim/daemon/nri_glue.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/fs.h"

#include "base/log.h"
#include "base/guard.h"

#ifndef PODSHIM_HOOK_PATH
#define PODSHIM_HOOK_PATH "/usr/libexec/podshim/podshim-hook"
#endif

namespace podshim::daemon {

const char* builtin_hook_path() { return PODSHIM_HOOK_PATH; }

bool executable_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0 &&
         access(path.c_str(), X_OK) == 0;
}

Result<std::string> install_hook(const std::string& src, const std::string& dest_dir) {
  if (dest_dir.empty() || dest_dir.front() != '/')
    return fail(EINVAL, "--install-hook: '{}' is not an absolute path", dest_dir);
  auto data = fs::read_file(src, size_t{256} << 20);
  if (!data) return wrap(data, fmt::format("reading the hook to install, {}", src));
  auto dir = fs::open_dir(dest_dir);
  if (!dir) return wrap(dir, "--install-hook");
  // A temporary file renamed over the old copy: a runtime exec'ing the old
  // one meanwhile keeps its inode, and nothing ever sees half a binary.
  PODSHIM_TRY(fs::write_file_atomic_at(dir->get(), "podshim-hook", *data, 0755));
  const std::string dest = (dest_dir.back() == '/' ? dest_dir : dest_dir + "/") + "podshim-hook";
  if (!executable_file(dest)) return fail(EACCES, "{} was written but is not executable", dest);
  return dest;
}

int NriMode::on_inotify(sd_event_source*, int, uint32_t, void* userdata) {
  auto* self = static_cast<NriMode*>(userdata);
  if (self->on_cdi_readable_) contain("CDI spec directory watch", self->on_cdi_readable_);
  return 0;
}

Result<std::unique_ptr<NriMode>> NriMode::start(sd_event* loop, const core::Config& cfg,
                                                core::Store& store, cgroup::Engine& engine,
                                                core::Metrics& metrics,
                                                std::shared_ptr<cgroup::WeightFormulaTracker> formulas,
                                                core::Scheduler schedule, core::ReadBack* readback,
                                                const std::string& hook_host_path) {
  std::unique_ptr<NriMode> m(new NriMode());
  m->metrics_ = &metrics;

  cdi::RegistryOptions ro;
  ro.spec_dirs = cfg.cdi_spec_dirs;
  m->registry_ = std::make_unique<cdi::Registry>(ro);
  NriMode* self = m.get();
  auto watched = m->registry_->watch([loop, self](int fd, std::function<void()> on_readable) -> Result<void> {
    self->on_cdi_readable_ = std::move(on_readable);
    int r = sd_event_add_io(loop, &self->cdi_source_, fd, EPOLLIN, &NriMode::on_inotify, self);
    if (r < 0) return fail_code(-r, "watching the CDI spec directories");
    return {};
  });
  if (!watched) {
    // Without inotify podshim still injects what it saw at start; a driver's
    // later spec is then missed, which is worth a loud line but no outage.
    log::warn("CDI live refresh unavailable, ignoring: {}", watched.error().message);
    m->registry_->refresh();
  }
  const auto errors = m->registry_->errors();
  for (const auto& [path, errs] : errors)
    for (const auto& e : errs) log::warn("CDI spec {}: {}", path, e);
  metrics.cdi_spec_errors.inc({}, static_cast<double>(errors.size()));
  log::info("CDI: {} devices from {} spec files", m->registry_->devices().size(),
            m->registry_->specs().size());

  adapter::AdapterOptions ao;
  ao.formulas = std::move(formulas);
  ao.readback = readback;
  // The conf.d drop-in of a pre-installed plugin: the same YAML as
  // config.yaml. It is validated as a whole; what can change on a running
  // daemon (the log level) is applied, the rest needs the file and a restart.
  ao.on_config = [](const std::string& yaml) -> Result<void> {
    auto c = core::parse_config(yaml, "NRI Configure config");
    if (!c) return Unexpected(c.error());
    log::set_level(c->log_level);
    log::info("NRI: applied the runtime-provided configuration (log level)");
    return {};
  };
  ao.on_disconnect = [loop](bool will_retry) {
    // A pre-installed plugin is restarted by its runtime, never reconnects.
    if (!will_retry) sd_event_exit(loop, 0);
  };
  // The runtime execs the hooks of an adjustment on the host, so the path
  // must be the host's. It is checked as podshimd sees it: the same file on
  // a host install, the host directory mounted at the same path in the
  // DaemonSet (never the image's own copy, which the host does not have).
  const std::string host_hook = hook_host_path.empty() ? std::string(PODSHIM_HOOK_PATH) : hook_host_path;
  const adapter::HookDecision hook = adapter::decide_hook(host_hook, host_hook, executable_file);
  ao.adjustment.inject_hook = hook.inject;
  ao.adjustment.hook_path = host_hook;
  metrics.cdi_hook_injected.set({}, hook.inject ? 1 : 0);
  if (hook.inject)
    log::info("CDI: injecting podshim-hook as {}", hook.path);
  else
    log::warn("{}", hook.warning);
  m->adapter_ = std::make_unique<adapter::NriAdapter>(store, &engine, m->registry_.get(), &metrics, ao);

  nri::PluginOptions po;
  po.name = cfg.nri_plugin_name;
  po.index = cfg.nri_plugin_index;
  po.socket_path = cfg.nri_socket;
  auto pre = nri::apply_preinstalled_environment(&po, [](const char* k) { return std::getenv(k); });
  if (!pre) return wrap(pre, "NRI pre-installed plugin environment");
  log::info("NRI: {} mode, plugin {}-{}{}", *pre ? "pre-installed" : "external", po.index, po.name,
            *pre ? "" : fmt::format(", socket {}", po.socket_path));
  m->plugin_ = std::make_unique<nri::Plugin>(loop, *m->adapter_, po);
  m->actuator_ = std::make_unique<adapter::NriActuator>(engine, m->plugin_.get(), std::move(schedule));
  PODSHIM_TRY(m->plugin_->start());
  return m;
}

NriMode::~NriMode() {
  plugin_.reset();
  actuator_.reset();  // restores memory.high clamps still held
  if (cdi_source_) sd_event_source_disable_unref(cdi_source_);
}

}  // namespace podshim::daemon
