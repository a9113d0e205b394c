// podshimd: the podshim node agent. Runs in the foreground on one sd-event
// loop: the status socket (shim/status), the model (shim/core), resize
// actuation through the cgroup engine, and — with --nri=on — the NRI plugin.
#include <getopt.h>
#include <signal.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "base/log.h"
#include "shim/core/config.h"
#include "shim/core/engine_actuator.h"
#include "shim/core/metrics.h"
#include "shim/core/readback.h"
#include "shim/core/resize.h"
#include "shim/core/state.h"
#include "shim/security/caps.h"
#include "shim/security/seccomp.h"
#include "shim/status/container_metrics.h"
#include "shim/status/metrics_listener.h"
#include "shim/status/server.h"
#include "shim/daemon/nri_glue.h"
#include "base/guard.h"

namespace {

using namespace podshim;

constexpr const char* kHelp = R"(Usage: podshimd [OPTIONS]

podshim's node agent: in-place pod resize on cgroup v2, CDI device injection,
and the status socket. Runs in the foreground; logs to the journal when started
by systemd (stderr otherwise); signals READY=1 and WATCHDOG=1 via sd_notify.

Options:
  --config PATH        configuration file (default /etc/podshim/config.yaml;
                       a missing default file means built-in defaults, a
                       missing explicit file is an error)
  --nri=on|off         run as an NRI plugin (on, default from nri.enabled) or
                       hooks-only (off: containers are registered by
                       podshim-hook and resizes go straight to the cgroup
                       engine — the CRI-O hooks.d mode)
  --nri-socket PATH    the runtime's NRI socket (overrides nri.socket; default
                       /var/run/nri/nri.sock). Ignored when the runtime
                       started podshimd as a pre-installed plugin
                       (/opt/nri/plugins/NN-podshim): then the socket is the
                       fd in NRI_PLUGIN_SOCKET and name/index come from
                       NRI_PLUGIN_NAME/NRI_PLUGIN_IDX
  --nri-index NN       two-digit plugin index, the order among NRI plugins
                       (overrides nri.plugin_index; default 10)
  --hook-host-path PATH  where the runtime finds podshim-hook on the HOST
                       (absolute; default the built-in path). The runtime
                       runs the hooks NRI mode adds to containers with CDI
                       devices on the host, so they are added only when that
                       file is there as podshimd sees it: in a container,
                       mount the host directory at the same path
  --install-hook DIR   copy this build's podshim-hook to DIR/podshim-hook
                       (atomically, mode 0755) and exit (the DaemonSet's init
                       container; DIR is the host directory, mounted)
  --socket PATH        status socket path (overrides socket.path)
  --state-dir DIR      state directory (overrides state_dir)
  --cgroup-root DIR    cgroup v2 mount (overrides cgroup.root; tests use a
                       fake tree)
  --log-level LEVEL    err|warning|notice|info|debug (overrides log_level)
  --metrics-listen ADDR  serve GET /metrics (and nothing else) on TCP
                       HOST:PORT, e.g. 127.0.0.1:9464 (overrides
                       metrics.listen; default off)
  --check-config       load and validate the configuration (file, then these
                       flags), print every key with its value and where it
                       came from (file:line, flag or default), then exit
  --help-config        list every configuration key: type and range, the
                       flag that overrides it, the built-in default
  --no-seccomp         do not install the syscall allow-list (debugging only;
                       see docs/security.md)
  --version            print the version and exit
  -h, --help           show this help and exit

Signals:
  SIGHUP               reload the configuration; a bad file is logged and the
                       running configuration kept. socket.path, state_dir,
                       cgroup.*, metrics.* and readback.* take effect only
                       after a restart.
  SIGTERM, SIGINT      shut down cleanly (hooks-only registrations are already
                       durable; the socket is removed)

Exit status: 0 clean shutdown, 1 runtime failure, 2 bad usage or configuration.
)";

struct Args {
  std::string config_path = std::string(core::kDefaultConfigPath);
  bool config_explicit = false;
  std::optional<bool> nri;
  std::optional<std::string> socket, state_dir, cgroup_root, log_level, nri_socket, nri_index;
  std::optional<std::string> metrics_listen;
  bool check_only = false;
  bool no_seccomp = false;
  std::optional<std::string> hook_host_path, install_hook;
};

struct Daemon {
  Args args;
  core::Config cfg;
  std::unique_ptr<core::Store> store;
  core::Metrics metrics;
  std::unique_ptr<core::Actuator> actuator;
  std::unique_ptr<core::ReadBack> readback;
  std::unique_ptr<status::ContainerMetrics> container_metrics;
  std::unique_ptr<core::ResizeManager> resize;
  std::unique_ptr<status::MetricsListener> metrics_listener;
  std::unique_ptr<status::Server> server;
  std::unique_ptr<daemon::NriMode> nri;
  sd_event* loop = nullptr;
  bool ready = false;
};

// The file, then the flags through the same checks as the file's keys, then
// the checks between keys (which name where each value came from).
Result<core::Config> load(const Args& a) {
  auto cfg = core::load_config(a.config_path, a.config_explicit);
  if (!cfg) return cfg;
  const std::pair<const char*, const std::optional<std::string>*> flags[] = {
      {"--socket", &a.socket},           {"--state-dir", &a.state_dir},   {"--cgroup-root", &a.cgroup_root},
      {"--log-level", &a.log_level},     {"--nri-socket", &a.nri_socket}, {"--nri-index", &a.nri_index},
      {"--metrics-listen", &a.metrics_listen}};
  if (a.nri) PODSHIM_TRY(core::apply_flag(*cfg, "--nri", *a.nri ? "true" : "false"));
  for (const auto& [flag, value] : flags) {
    if (*value) PODSHIM_TRY(core::apply_flag(*cfg, flag, **value));
  }
  PODSHIM_TRY(core::check_together(*cfg));
  if (!cfg->metrics_listen.empty()) {
    if (auto la = status::parse_listen_address(cfg->metrics_listen); !la) {
      return fail(EINVAL, "{}: {}", cfg->where("metrics.listen"), la.error().message);
    }
  }
  return cfg;
}

Result<core::NodeAllocatable> allocatable(const core::Config& cfg) {
  core::NodeAllocatable a{};
  if (!cfg.allocatable_cpu_milli || !cfg.allocatable_memory_bytes) {
    auto m = core::machine_allocatable();
    if (!m) return wrap(m, "reading the machine's capacity");
    a = *m;
  }
  if (cfg.allocatable_cpu_milli) a.cpu_milli = *cfg.allocatable_cpu_milli;
  if (cfg.allocatable_memory_bytes) a.memory_bytes = *cfg.allocatable_memory_bytes;
  return a;
}

void reload(Daemon& d) {
  auto cfg = load(d.args);
  if (!cfg) {
    log::err("Reloading configuration failed, keeping the running one: {}", cfg.error().message);
    return;
  }
  auto so = status::server_options(*cfg);
  if (!so) {
    log::err("Reloading configuration failed, keeping the running one: {}", so.error().message);
    return;
  }
  auto alloc = allocatable(*cfg);
  if (!alloc) {
    log::err("Reloading configuration failed, keeping the running one: {}", alloc.error().message);
    return;
  }
  if (cfg->socket_path != d.cfg.socket_path || cfg->state_dir != d.cfg.state_dir ||
      cfg->cgroup_root != d.cfg.cgroup_root || cfg->nri_enabled != d.cfg.nri_enabled ||
      cfg->metrics_listen != d.cfg.metrics_listen || cfg->metrics_max_containers != d.cfg.metrics_max_containers ||
      cfg->readback_interval != d.cfg.readback_interval || cfg->readback_slice_budget != d.cfg.readback_slice_budget ||
      cfg->readback_fd_cache != d.cfg.readback_fd_cache || cfg->repair_drift != d.cfg.repair_drift) {
    log::notice("socket.path, state_dir, cgroup.root, nri.enabled, metrics.* and readback.* changes take effect after a restart");
  }
  log::set_level(cfg->log_level);
  d.server->set_policy(std::move(so->policy));
  d.resize->set_allocatable(*alloc);
  d.cfg = std::move(*cfg);
  log::info("Configuration reloaded from {}", d.args.config_path);
  d.resize->retry_deferred();
}

int on_signal(sd_event_source*, const signalfd_siginfo* si, void* userdata) {
  auto* d = static_cast<Daemon*>(userdata);
  if (si->ssi_signo == SIGHUP) {
    sd_notify(0, "RELOADING=1");
    contain("SIGHUP reload", [&] { reload(*d); });
    sd_notify(0, "READY=1");
    return 0;
  }
  log::info("Received {}, shutting down", si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
  sd_notify(0, "STOPPING=1");
  sd_event_exit(d->loop, 0);
  return 0;
}

// --help-config: the schema, with the built-in defaults.
void print_config_keys() {
  const core::Config defaults;
  std::printf("%-34s %-44s %-17s %s\n", "KEY", "TYPE", "FLAG", "DEFAULT");
  for (const auto& k : core::config_keys()) {
    std::string def = core::config_value(defaults, k.key);
    std::printf("%-34s %-44s %-17s %s\n", std::string(k.key).c_str(), std::string(k.type).c_str(),
                k.flag.empty() ? "-" : std::string(k.flag).c_str(), def.empty() ? ("(" + std::string(k.unset) + ")").c_str() : def.c_str());
  }
  std::printf("\nSee docs/config.md for what each key does.\n");
}

int parse_args(int argc, char** argv, Args* a) {
  enum { OptConfig = 256, OptNri, OptSocket, OptState, OptCgroup, OptLog, OptCheck, OptVersion, OptNoSeccomp, OptNriSocket, OptNriIndex, OptMetricsListen, OptHelpConfig };
  enum { OptHookHostPath = 512, OptInstallHook };
  static const option opts[] = {{"config", required_argument, nullptr, OptConfig},
                                {"nri", required_argument, nullptr, OptNri},
                                {"socket", required_argument, nullptr, OptSocket},
                                {"state-dir", required_argument, nullptr, OptState},
                                {"cgroup-root", required_argument, nullptr, OptCgroup},
                                {"log-level", required_argument, nullptr, OptLog},
                                {"check-config", no_argument, nullptr, OptCheck},
                                {"help-config", no_argument, nullptr, OptHelpConfig},
                                {"version", no_argument, nullptr, OptVersion},
                                {"no-seccomp", no_argument, nullptr, OptNoSeccomp},
                                {"nri-socket", required_argument, nullptr, OptNriSocket},
                                {"nri-index", required_argument, nullptr, OptNriIndex},
                                {"metrics-listen", required_argument, nullptr, OptMetricsListen},
                                {"hook-host-path", required_argument, nullptr, OptHookHostPath},
                                {"install-hook", required_argument, nullptr, OptInstallHook},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, nullptr)) != -1) {
    switch (c) {
      case OptConfig: a->config_path = optarg; a->config_explicit = true; break;
      case OptNri:
        if (std::string_view(optarg) == "on") a->nri = true;
        else if (std::string_view(optarg) == "off") a->nri = false;
        else {
          std::fprintf(stderr, "podshimd: --nri must be on or off, not '%s'\n", optarg);
          return 2;
        }
        break;
      case OptSocket: a->socket = optarg; break;
      case OptState: a->state_dir = optarg; break;
      case OptCgroup: a->cgroup_root = optarg; break;
      case OptLog: a->log_level = optarg; break;
      case OptCheck: a->check_only = true; break;
      case OptNoSeccomp: a->no_seccomp = true; break;
      case OptNriSocket: a->nri_socket = optarg; break;
      case OptNriIndex: a->nri_index = optarg; break;
      case OptMetricsListen: a->metrics_listen = optarg; break;
      case OptHookHostPath: a->hook_host_path = optarg; break;
      case OptInstallHook: a->install_hook = optarg; break;
      case OptVersion: std::printf("podshimd 0.1.0\n"); return 0;
      case 'h': std::fputs(kHelp, stdout); return 0;
      case OptHelpConfig: print_config_keys(); return 0;
      default: std::fputs("Try 'podshimd --help'.\n", stderr); return 2;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "podshimd: unexpected argument '%s'\nTry 'podshimd --help'.\n", argv[optind]);
    return 2;
  }
  for (const auto& [flag, value] : {std::pair{"--hook-host-path", &a->hook_host_path},
                                    std::pair{"--install-hook", &a->install_hook}}) {
    if (*value && (value->value().empty() || value->value().front() != '/')) {
      std::fprintf(stderr, "podshimd: %s: '%s' is not an absolute path\n", flag, value->value().c_str());
      return 2;
    }
  }
  return -1;
}

// Runs `fn` once on the loop after `delay` (0: at the next iteration); the
// one scheduler of podshimd (the engine's shrink timers, read-back slices).
// The function is owned by the event source and freed with it.
void schedule_on(sd_event* loop, std::chrono::milliseconds delay, std::function<void()> fn) {
  auto* w = new std::function<void()>(std::move(fn));
  auto run_time = [](sd_event_source* s, uint64_t, void* userdata) -> int {
    contain("scheduled work", *static_cast<std::function<void()>*>(userdata));
    sd_event_source_unref(s);
    return 0;
  };
  auto run_defer = [](sd_event_source* s, void* userdata) -> int {
    contain("deferred work", *static_cast<std::function<void()>*>(userdata));
    sd_event_source_unref(s);
    return 0;
  };
  sd_event_source* src = nullptr;
  int r;
  if (delay.count() == 0) {
    r = sd_event_add_defer(loop, &src, run_defer, w);
  } else {
    uint64_t now = 0;
    // Fails only before the loop's first iteration with no clock read yet
    // (-ENODATA), and then sets `now` from the clock itself (sd_event_now(3)).
    (void)sd_event_now(loop, CLOCK_MONOTONIC, &now);
    // Accuracy 1 ms, not 0: sd-event reads 0 as its default slack of 250 ms
    // (sd_event_add_time(3)), which stretched the shrink's 20 ms ticks and
    // settle windows by up to a quarter of a second each.
    r = sd_event_add_time(loop, &src, CLOCK_MONOTONIC, now + static_cast<uint64_t>(delay.count()) * 1000,
                          1000, run_time, w);
  }
  if (r < 0) {
    // Never dropped: a resize's next step or a clamp release must happen.
    log::warn("Scheduling work on the event loop failed ({}); running it now", errno_string(-r));
    std::unique_ptr<std::function<void()>> f(w);
    (*f)();
    return;
  }
  // Fails only for a null source, and sd_event_add_* gave one.
  (void)sd_event_source_set_destroy_callback(src, [](void* userdata) {
    delete static_cast<std::function<void()>*>(userdata);
  });
  // Owned by the loop from here (floating): one still pending when podshimd
  // stops (a read-back slice, a settle timer) is freed, with its function,
  // by the loop's last unref, instead of holding the loop alive. A floating
  // source takes a reference of its own (sd_event_source_set_floating(3));
  // ours is dropped, and the callback's unref releases the loop's.
  if (sd_event_source_set_floating(src, 1) >= 0) sd_event_source_unref(src);
}

// The loop, the engine on it, the signals podshimd answers and its limits.
// The engine's timers (the shrink's state machine, clamp releases) and the
// systemd driver's D-Bus replies run on this loop, so no resize ever blocks
// it.
Result<core::Scheduler> start_loop(Daemon& d) {
  // A loop of our own, not sd_event_default(): libsystemd checks a default
  // loop's thread with a gettid() system call on every iteration
  // (sd_event_prepare in src/libsystemd/sd-event/sd-event.c), one more
  // syscall on every NRI request. Nothing here asks for the default loop.
  if (int r = sd_event_new(&d.loop); r < 0) return fail(-r, "sd_event_new: {}", errno_string(-r));
  core::Scheduler schedule = [loop = d.loop](std::chrono::milliseconds delay, std::function<void()> fn) {
    schedule_on(loop, delay, std::move(fn));
  };
  auto act = core::EngineActuator::create(d.cfg, schedule, d.loop);
  if (!act) return Unexpected(act.error());
  if (auto r = (*act)->engine().recover(); !r) {
    // A crash mid-shrink left a clamp; failing to undo it is worth knowing
    // but not worth refusing to serve.
    log::warn("Recovering interrupted cgroup changes failed, ignoring: {}", r.error().message);
  }
  d.actuator = std::move(*act);

  sigset_t ss;
  sigemptyset(&ss);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&ss, s);
  sigprocmask(SIG_BLOCK, &ss, nullptr);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) {
    if (int r = sd_event_add_signal(d.loop, nullptr, s, &on_signal, &d); r < 0)
      return fail(-r, "Installing signal handler: {}", errno_string(-r));
  }
  // Pings WATCHDOG=1 at half of WATCHDOG_USEC when systemd asks for it; a
  // failure only means no watchdog, which systemd then does not expect.
  if (int r = sd_event_set_watchdog(d.loop, 1); r < 0)
    log::debug("Enabling the systemd watchdog failed, ignoring: {}", errno_string(-r));

  // The read-back keeps attribute fds open; systemd hands services a soft
  // RLIMIT_NOFILE of 1024 for select()'s sake and expects programs that
  // need more, and use no select(), to raise it to the hard limit
  // themselves (systemd v240 NEWS, DefaultLimitNOFILE). sd-event is epoll.
  if (rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) log::debug("Raising RLIMIT_NOFILE failed, ignoring: {}", errno_string(errno));
  }
  return schedule;
}

// Every container's actual values and drift, read on the loop in slices;
// then NRI mode, when on, and the resize service over whichever actuator the
// mode has.
Result<void> start_resize(Daemon& d, const core::Scheduler& schedule, const core::NodeAllocatable& alloc) {
  auto* ea = static_cast<core::EngineActuator*>(d.actuator.get());
  core::ReadBackOptions ro = core::readback_options(d.cfg);
  ro.formulas = ea->formulas();
  ro.usage_history = ea->usage_history();
  ro.schedule = schedule;
  auto rb = core::ReadBack::create(*d.store, &ea->engine(), &d.metrics, std::move(ro));
  if (!rb) return Unexpected(rb.error());
  d.readback = std::move(*rb);
  d.readback->start();

  core::Actuator* actuator = d.actuator.get();
  if (d.cfg.nri_enabled) {
    auto nri = daemon::NriMode::start(d.loop, d.cfg, *d.store, ea->engine(), d.metrics, ea->formulas(), schedule,
                                      d.readback.get(), d.args.hook_host_path.value_or(""));
    if (!nri) return wrap(nri, "Starting NRI mode failed");
    d.nri = std::move(*nri);
    actuator = &d.nri->actuator();
  }
  d.container_metrics =
      std::make_unique<status::ContainerMetrics>(*d.store, d.cfg.metrics_max_containers, d.cfg.nri_enabled);
  d.resize = std::make_unique<core::ResizeManager>(*d.store, *actuator, alloc, &d.metrics);
  d.container_metrics->observe(*d.resize);
  if (d.nri) d.nri->set_resize(d.resize.get());
  return {};
}

// The status socket and, when configured, the TCP /metrics listener, which
// serves the same families as the socket's /metrics.
Result<void> start_servers(Daemon& d, status::ServerOptions so) {
  status::ServerDeps deps;
  deps.store = d.store.get();
  deps.resize = d.resize.get();
  deps.metrics = &d.metrics;
  deps.ready = [&d] { return d.ready; };
  deps.extra_metrics = [&d](std::string& out) {
    d.container_metrics->render(out);
    out += fmt::format(
        "# HELP podshim_log_messages_suppressed_total Log records dropped by a rate limit (repeated warnings a "
        "client can trigger).\n# TYPE podshim_log_messages_suppressed_total counter\n"
        "podshim_log_messages_suppressed_total {}\n",
        log::suppressed_total());
  };
  if (auto* ea = dynamic_cast<core::EngineActuator*>(d.actuator.get()); ea && ea->formulas()) {
    deps.before_metrics = [&d, f = ea->formulas()] { core::export_weight_formulas(d.metrics, *f); };
  }
  auto before_metrics = deps.before_metrics;
  auto extra_metrics = deps.extra_metrics;
  deps.cgroup_root = d.cfg.cgroup_root;
  deps.cgroup_driver = d.cfg.cgroup_driver;
  auto server = status::Server::start(d.loop, std::move(so), deps);
  if (!server) return wrap(server, "Starting the status socket failed");
  d.server = std::move(*server);
  if (d.cfg.metrics_listen.empty()) return {};
  auto ml = status::MetricsListener::start(d.loop, d.cfg.metrics_listen, [&d, before_metrics, extra_metrics] {
    d.metrics.containers.set({}, static_cast<double>(d.store->container_count()));
    d.metrics.pods.set({}, static_cast<double>(d.store->pods().size()));
    if (before_metrics) before_metrics();
    std::string out = d.metrics.render();
    extra_metrics(out);
    return out;
  });
  if (!ml) return wrap(ml, "Starting the metrics listener failed");
  d.metrics_listener = std::move(*ml);
  log::info("Serving /metrics on {}", d.metrics_listener->address());
  return {};
}

// Everything that needed privilege is done: the socket is bound, chowned
// and in place, state and cgroup directories are open to uid 0 by plain
// owner permissions. Keep no capability at all (docs/security.md), then
// confine the syscalls.
Result<void> confine(const Daemon& d) {
  if (auto r = security::restrict_capabilities({}); !r) return wrap(r, "Dropping capabilities failed");
  if (d.args.no_seccomp) {
    log::warn("--no-seccomp: running without the syscall allow-list");
    return {};
  }
  if (auto r = security::install_seccomp(security::daemon_profile()); !r)
    return wrap(r, "Installing the seccomp filter failed");
  return {};
}

// Runs the loop until a signal ends it, then takes the services down in the
// reverse order of their start.
int serve(Daemon& d) {
  d.ready = true;
  log::info("podshimd ready: socket {}, state {}, {} mode, {} containers known", d.cfg.socket_path,
            d.cfg.state_dir, d.cfg.nri_enabled ? "NRI" : "hooks-only", d.store->container_count());
  sd_notify(0, "READY=1\nSTATUS=serving");
  int r = sd_event_loop(d.loop);
  d.metrics_listener.reset();
  d.server.reset();  // ends watch streams, removes the socket
  d.nri.reset();
  d.readback.reset();
  sd_event_unref(d.loop);
  if (r < 0) {
    log::err("Event loop failed: {}", errno_string(-r));
    return 1;
  }
  log::info("podshimd stopped");
  return 0;
}

// --check-config: what every key holds and where its value came from.
int print_config(const Daemon& d) {
  std::printf("configuration OK (%s)\n", d.args.config_path.c_str());
  for (const auto& k : core::config_keys()) {
    std::string v = core::config_value(d.cfg, k.key);
    if (v.empty()) v = "(" + std::string(k.unset) + ")";
    std::printf("  %-34s %s  [%s]\n", std::string(k.key).c_str(), v.c_str(), d.cfg.where(k.key).c_str());
  }
  return 0;
}

// NRI mode keeps the model in memory only: the runtime resends every pod and
// container in Synchronize (see the rule in shim/core/state.h). Hooks-only
// mode has no runtime to ask again and persists registrations.
Result<void> open_store(Daemon& d) {
  if (d.cfg.nri_enabled) {
    d.store = core::Store::in_memory();
    return {};
  }
  auto store = core::Store::open(d.cfg.state_dir);
  if (!store) return wrap(store, "Opening state failed");
  d.store = std::move(*store);
  for (const auto& w : d.store->load_warnings()) log::warn("{}", w);
  return {};
}

int run(Daemon& d) {
  auto cfg = load(d.args);
  if (!cfg) {
    log::err("Loading configuration failed: {}", cfg.error().message);
    return 2;
  }
  d.cfg = std::move(*cfg);
  log::set_level(d.cfg.log_level);
  auto so = status::server_options(d.cfg);
  if (!so) {
    log::err("Invalid configuration: {}", so.error().message);
    return 2;
  }
  if (d.args.check_only) return print_config(d);
  auto started = [&]() -> Result<void> {
    PODSHIM_TRY(open_store(d));
    auto alloc = allocatable(d.cfg);
    if (!alloc) return Unexpected(alloc.error());
    auto schedule = start_loop(d);
    if (!schedule) return Unexpected(schedule.error());
    PODSHIM_TRY(start_resize(d, *schedule, *alloc));
    PODSHIM_TRY(start_servers(d, std::move(*so)));
    return confine(d);
  }();
  if (!started) {
    log::err("{}", started.error().message);
    return 1;
  }
  return serve(d);
}

}  // namespace

int main(int argc, char** argv) {
  log::init(log::Target::Auto, log::Level::Info, "podshimd");
  Daemon d;
  int rc = parse_args(argc, argv, &d.args);
  if (rc >= 0) return rc;
  if (d.args.install_hook) {
    auto dest = daemon::install_hook(daemon::builtin_hook_path(), *d.args.install_hook);
    if (!dest) {
      log::err("Installing podshim-hook failed: {}", dest.error().message);
      return 1;
    }
    log::info("Installed podshim-hook {} as {}", daemon::builtin_hook_path(), *dest);
    return 0;
  }
  return run(d);
}
