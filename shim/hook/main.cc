// podshim-hook: the OCI hook run by CRI-O and podman through hooks.d, and
// injected by podshimd in NRI mode. See shim/hook/hook.h for what it does.
//
// Output contract: the runtime captures stderr into its error message (runc
// libcontainer/configs/config.go Command.Run), so a failure is exactly one
// "<3>podshim-hook: ..." line and exit status 1; a tolerated problem is one
// "<4>" warning line and exit status 0.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/fs.h"
#include "base/log.h"
#include "shim/hook/hook.h"
#include "shim/hook/journal_lazy.h"
#include "shim/core/version.h"  // PODSHIM_COMMIT, generated
#include "shim/hook/seccomp_bpf.h"
#include "shim/security/caps.h"

namespace hook = podshim::hook;
namespace plog = podshim::log;

#ifndef PODSHIM_VERSION
#error "PODSHIM_VERSION must be defined (meson's project version, shim/hook/meson.build)"
#endif

namespace {

// Exit statuses, as usage() and podshim-hook(8) list them.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// runc hands a hook a pipe for stderr and quotes it in its error; crun 1.8.1
// gives it /dev/null unless the container carries the run.oci.hooks.stderr
// annotation (crun(1)), so a warning would vanish. Log to journald then.
plog::Target pick_log_target() {
  struct stat sb {};
  if (::fstat(STDERR_FILENO, &sb) == 0 && S_ISCHR(sb.st_mode) && sb.st_rdev == ::makedev(1, 3))
    return ::access("/run/systemd/journal/socket", W_OK) == 0 ? plog::Target::Journal
                                                              : plog::Target::Null;
  // Auto: stderr, or the journal when stderr is closed or already a journal stream.
  return plog::Target::Auto;
}

// Whether logging may reach the journal: then libsystemd must be loaded
// before the seccomp filter is in place (journal_lazy.cc).
bool may_log_to_journal(plog::Target t) {
  if (t == plog::Target::Journal) return true;
  if (t != plog::Target::Auto) return false;
  return ::fcntl(STDERR_FILENO, F_GETFD) < 0 || ::getenv("JOURNAL_STREAM") != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const plog::Target target = pick_log_target();
  // false: no libsystemd; journal writes then fail and fall back to stderr.
  if (may_log_to_journal(target)) (void)hook::preload_journal();
  plog::init(target, plog::Level::Notice, "podshim-hook");
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto opts = hook::parse_args(args);
  if (!opts) {
    plog::err("podshim-hook: {}", opts.error().message);
    return kExitUsage;
  }
  // --help and --version: a failed write to stdout has nowhere left to be
  // reported, and the exit status is what a caller checks.
  if (opts->help) {
    (void)!::write(STDOUT_FILENO, hook::usage().data(), hook::usage().size());
    return kExitOk;
  }
  if (opts->version) {
    std::string v = "podshim-hook " PODSHIM_VERSION;
    if (std::string_view(PODSHIM_COMMIT) != "unknown") v += " (commit " PODSHIM_COMMIT ")";
    v += "\n";
    (void)!::write(STDOUT_FILENO, v.data(), v.size());
    return kExitOk;
  }
  // Least privilege before reading anything a runtime hands us: keep only
  // what relabelling needs (docs/security.md), then confine the syscalls.
  if (auto r = podshim::security::restrict_capabilities_if_held({CAP_FOWNER, CAP_DAC_READ_SEARCH}); !r) {
    plog::err("podshim-hook: dropping capabilities: {}", r.error().message);
    return kExitFailure;
  }
  if (!opts->no_seccomp) {
    // The filter was compiled from security::hook_profile() at build time.
    if (auto r = hook::install_hook_seccomp(); !r) {
      plog::err("podshim-hook: installing the seccomp filter: {}", r.error().message);
      return kExitFailure;
    }
  }
  // read_fd fails past the cap, so an oversized state is refused, never truncated.
  auto input = podshim::fs::read_fd(STDIN_FILENO, hook::kMaxStateBytes);
  if (!input) {
    plog::err("podshim-hook {}: reading the OCI state from stdin: {}", hook::to_string(opts->stage),
             input.error().message);
    return kExitFailure;
  }
  auto root = podshim::fs::open_dir("/");
  if (!root) {
    plog::err("podshim-hook: {}", root.error().message);
    return kExitFailure;
  }
  auto registrar = hook::make_socket_registrar(opts->socket_path, opts->timeout);
  auto labeler = hook::make_selinux_labeler();
  hook::Deps deps{root->get(), registrar.get(), labeler.get()};
  auto out = hook::run(*opts, *input, deps);
  if (!out) {
    plog::err("podshim-hook {}: {}", hook::to_string(opts->stage), out.error().message);
    return kExitFailure;
  }
  for (const std::string& w : out->warnings) {
    plog::at(plog::Level::Warning, {{"CONTAINER_ID", out->state.id}}, "podshim-hook {}: {}",
            hook::to_string(opts->stage), w);
  }
  for (const std::string& n : out->notes) {
    plog::at(plog::Level::Info, {{"CONTAINER_ID", out->state.id}}, "podshim-hook {}: {}",
             hook::to_string(opts->stage), n);
  }
  plog::at(plog::Level::Debug, {{"CONTAINER_ID", out->state.id}},
          "podshim-hook {}: done (devices checked {}, mounts labelled {}, registered {})",
          hook::to_string(opts->stage), out->devices_checked, out->mounts_labelled,
          out->registered || out->deregistered);
  return kExitOk;
}
