// podshimctl's command registry. Each command lives in its own cmd_<name>.cc
// and registers itself with a static CommandRegistrar, so components add
// commands without touching a central table. The files are compiled straight
// into the podshimctl executable (not a static library), so the registrars
// are never dropped by the linker.
//
// A command's entry is the single description of its command line: the
// parser's help (`podshimctl CMD [SUB] --help`), `podshimctl --help` and the
// shell completion scripts (`podshimctl completion bash|zsh`) are generated
// from it (shim/ctl/cli.cc), and tests walk it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace podshim::ctl {

// The exit codes, shared by every command; kExitCodes is the documented
// table (`podshimctl --help`, podshimctl(8) EXIT STATUS; a test checks both).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the operation failed (resize error, invalid spec, daemon error…)
inline constexpr int kExitUsage = 2;     // bad command line
inline constexpr int kExitNoAccess = 3;  // podshimd unreachable, or it denied the request (HTTP 403)
inline constexpr int kExitNotFound = 4;  // no such pod/container/device (HTTP 404)
inline constexpr int kExitAppliedWithOomKill = 5;  // resize applied, but the kernel OOM-killed during it
inline constexpr int kExitNotAdmitted = 6;  // resize not admitted: deferred or infeasible (HTTP 409 too)

struct ExitCode {
  int code;
  const char* meaning;  // one line
};
inline constexpr ExitCode kExitCodes[] = {
    {kExitOk, "success (a resize applied, unchanged, or allocated pending a restart)"},
    {kExitFailure, "the operation failed: the daemon answered an error, a resize failed to actuate, "
                   "podshimd is not ready (status), a spec or label is invalid"},
    {kExitUsage, "bad command line (unknown command, option or output format; a bad quantity)"},
    {kExitNoAccess, "podshimd could not be reached, or it denied the request (HTTP 403)"},
    {kExitNotFound, "no such pod, container or CDI device (HTTP 404)"},
    {kExitAppliedWithOomKill, "resize applied, but the kernel OOM-killed in the container during it"},
    {kExitNotAdmitted, "resize not admitted: deferred or infeasible (PodResizePending), or a conflict "
                       "(HTTP 409); nothing was changed"},
};

// Output formats (-o). Table is the readable default of most commands.
enum class Format { Table, Wide, Json, Yaml };

// How a shell completes a flag's value.
enum class Complete { None, File, Dir };

struct Flag {
  std::string name = {};        // "--output"
  std::string short_name = {};  // "-o", or empty
  std::string value = {};       // the value's name ("FORMAT"), empty for a switch
  std::string help = {};        // one line
  std::vector<std::string> choices = {};  // completion candidates for the value
  Complete complete = Complete::None;
};

struct Subcommand {
  std::string name = {};
  std::vector<std::string> aliases = {};  // accepted too, not completed ("po" for "pods")
  std::string summary = {};               // one line
  std::string args = {};                  // after "podshimctl CMD SUB", e.g. "[ID]"
  std::vector<Flag> flags = {};           // besides the command's own
  std::vector<Format> formats = {};       // empty: the command's
};

// argv[0] is the command name ("cgroup-values"); the rest are its arguments.
using CommandFn = std::function<int(int argc, char** argv)>;

struct Command {
  std::string name = {};
  std::string summary = {};  // one line for `podshimctl --help`
  CommandFn run = {};
  std::string args = {};         // after "podshimctl CMD" (with subcommands: after SUB)
  std::string description = {};  // paragraphs for CMD --help
  std::vector<Subcommand> subcommands = {};
  std::vector<Flag> flags = {};             // every subcommand takes these
  std::vector<Format> formats = {};         // -o values taken; empty: no -o
  std::vector<std::string> examples = {};   // full command lines
  std::string plain_output = {};            // what is printed without -o, when not formats[0]
};

inline std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> commands;
  return commands;
}

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) {
    std::string key = c.name;
    registry().emplace(std::move(key), std::move(c));
  }
  // What every command has (its name, its --help line and what runs it)
  // first; `details` is the rest of its entry (description, flags, formats…).
  CommandRegistrar(std::string name, std::string summary, CommandFn fn, Command details = {})
      : CommandRegistrar(named(std::move(details), std::move(name), std::move(summary), std::move(fn))) {}

 private:
  static Command named(Command c, std::string name, std::string summary, CommandFn fn) {
    c.name = std::move(name);
    c.summary = std::move(summary);
    c.run = std::move(fn);
    return c;
  }
};

// Flags most commands share.
inline Flag output_flag(const std::vector<Format>& formats) {
  static constexpr const char* names[] = {"table", "wide", "json", "yaml"};
  Flag f{.name = "--output", .short_name = "-o", .value = "FORMAT", .help = "output format:"};
  for (size_t i = 0; i < formats.size(); ++i) {
    f.help += std::string(i ? ", " : " ") + names[static_cast<int>(formats[i])];
    f.choices.emplace_back(names[static_cast<int>(formats[i])]);
  }
  return f;
}
inline Flag socket_flag() {
  return Flag{.name = "--socket", .value = "PATH",
              .help = "podshimd's status socket (default /run/podshim/podshim.sock)",
              .complete = Complete::File};
}

}  // namespace podshim::ctl
