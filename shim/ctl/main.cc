// podshimctl: podshim's command-line client. Subcommands register themselves
// (registry.h); this file parses the global options, prints --help with every
// registered command and the exit codes, and dispatches.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "shim/ctl/common.h"
#include "shim/ctl/registry.h"

namespace {

using namespace podshim::ctl;

void usage(FILE* f) {
  std::fputs(
      "Usage: podshimctl [--socket PATH] [-o table|json] COMMAND [ARGS...]\n"
      "\n"
      "Talks to podshimd's status socket and runs podshim's offline helpers.\n"
      "\n"
      "Global options:\n"
      "  --socket PATH   podshimd's status socket (default /run/podshim/podshim.sock)\n"
      "  -o FORMAT       output: table (readable, default) or json (for scripts)\n"
      "  -h, --help      show this help; COMMAND --help shows a command's options\n"
      "\n"
      "Commands:\n",
      f);
  size_t w = 0;
  for (const auto& [name, cmd] : registry()) w = std::max(w, name.size());
  for (const auto& [name, cmd] : registry()) {
    std::fprintf(f, "  %-*s  %s\n", static_cast<int>(w), name.c_str(), cmd.summary.c_str());
  }
  std::fprintf(f,
               "\n"
               "Exit status:\n"
               "  %d  success\n"
               "  %d  the operation failed (resize refused, deferred or not actuated; invalid request)\n"
               "  %d  bad command line\n"
               "  %d  podshimd unreachable\n"
               "  %d  no such pod, container or device\n",
               kExitOk, kExitFailure, kExitUsage, kExitUnavailable, kExitNotFound);
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return kExitOk;
    }
    if (a == "--socket" || a == "-o" || a == "--output") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "podshimctl: %s needs a value\n", argv[i]);
        return kExitUsage;
      }
      std::string_view v = argv[++i];
      if (a == "--socket") {
        setenv(kEnvSocket, argv[i], 1);
      } else {
        if (v != "json" && v != "table") {
          std::fprintf(stderr, "podshimctl: -o must be table or json, not '%s'\n", argv[i]);
          return kExitUsage;
        }
        setenv(kEnvOutput, argv[i], 1);
      }
      continue;
    }
    if (a.starts_with("--socket=")) {
      setenv(kEnvSocket, argv[i] + std::strlen("--socket="), 1);
      continue;
    }
    if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "podshimctl: unknown option '%s'\nTry 'podshimctl --help'.\n", argv[i]);
      return kExitUsage;
    }
    break;
  }
  if (i >= argc) {
    usage(stderr);
    return kExitUsage;
  }
  auto it = registry().find(argv[i]);
  if (it == registry().end()) {
    std::fprintf(stderr, "podshimctl: unknown command '%s'\nTry 'podshimctl --help'.\n", argv[i]);
    return kExitUsage;
  }
  return it->second.run(argc - i, argv + i);
}
