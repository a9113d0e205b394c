// podshim-hook: the OCI hook run by CRI-O and podman through hooks.d, and
// injected by podshimd in NRI mode. See shim/hook/hook.h for what it does.
//
// Output contract: the runtime captures stderr into its error message (runc
// libcontainer/configs/config.go Command.Run), so a failure is exactly one
// "<3>podshim-hook: ..." line and exit status 1; a tolerated problem is one
// "<4>" warning line and exit status 0.
#include <fcntl.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/fs.h"
#include "base/log.h"
#include "shim/hook/hook.h"

namespace hook = podshim::hook;
namespace plog = podshim::log;

int main(int argc, char** argv) {
  plog::init(plog::Target::Stderr, plog::Level::Notice, "podshim-hook");
  std::vector<std::string_view> args(argv + 1, argv + argc);
  auto opts = hook::parse_args(args);
  if (!opts) {
    plog::err("podshim-hook: {}", opts.error().message);
    return 2;
  }
  // read_fd fails past the cap, so an oversized state is refused, never truncated.
  auto input = podshim::fs::read_fd(STDIN_FILENO, hook::kMaxStateBytes);
  if (!input) {
    plog::err("podshim-hook {}: reading the OCI state from stdin: {}", hook::to_string(opts->stage),
             input.error().message);
    return 1;
  }
  auto root = podshim::fs::open_dir("/");
  if (!root) {
    plog::err("podshim-hook: {}", root.error().message);
    return 1;
  }
  auto registrar = hook::make_socket_registrar(opts->socket_path, opts->timeout);
  auto labeler = hook::make_selinux_labeler();
  hook::Deps deps{root->get(), registrar.get(), labeler.get()};
  auto out = hook::run(*opts, *input, deps);
  if (!out) {
    plog::err("podshim-hook {}: {}", hook::to_string(opts->stage), out.error().message);
    return 1;
  }
  for (const std::string& w : out->warnings) {
    plog::at(plog::Level::Warning, {{"CONTAINER_ID", out->state.id}}, "podshim-hook {}: {}",
            hook::to_string(opts->stage), w);
  }
  plog::at(plog::Level::Debug, {{"CONTAINER_ID", out->state.id}},
          "podshim-hook {}: done (devices checked {}, mounts labelled {}, registered {})",
          hook::to_string(opts->stage), out->devices_checked, out->mounts_labelled,
          out->registered || out->deregistered);
  return 0;
}
