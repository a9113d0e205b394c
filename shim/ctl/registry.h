// podshimctl's subcommand registry. Each subcommand lives in its own
// cmd_<name>.cc and registers itself with a static CommandRegistrar, so
// components add commands without touching a central table. The files are
// compiled straight into the podshimctl executable (not a static library),
// so the registrars are never dropped by the linker.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace podshim::ctl {

// Documented exit codes, shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the operation failed (refused resize, invalid spec…)
inline constexpr int kExitUsage = 2;     // bad command line
inline constexpr int kExitUnavailable = 3;  // podshimd unreachable
inline constexpr int kExitNotFound = 4;  // no such pod/container/device

// argv[0] is the subcommand name ("cgroup-values"); the rest are its arguments.
using CommandFn = std::function<int(int argc, char** argv)>;

struct Command {
  std::string name;
  std::string summary;  // one line for `podshimctl --help`
  CommandFn run;
};

inline std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> commands;
  return commands;
}

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string summary, CommandFn fn) {
    std::string key = name;
    registry().emplace(std::move(key), Command{std::move(name), std::move(summary), std::move(fn)});
  }
};

}  // namespace podshim::ctl
