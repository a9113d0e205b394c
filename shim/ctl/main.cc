// podshimctl: podshim's command-line client. Commands register themselves
// (registry.h); this file parses the global options, prints --help (commands,
// flags, examples, exit codes; shim/ctl/cli.cc) and --version, and
// dispatches.
#include <cstdio>
#include <iostream>
#include <string_view>

#include "shim/ctl/cli.h"
#include "shim/ctl/registry.h"

using namespace podshim::ctl;

int main(int argc, char** argv) {
  GlobalOptions& g = globals();
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << main_help();
      return kExitOk;
    }
    if (a == "--version") {
      std::cout << version_line() << "\n";
      return kExitOk;
    }
    std::string err;
    auto t = take_global_option(argc, argv, &i, &g, &err);
    if (t == OptionResult::Taken) continue;
    if (t == OptionResult::Error) {
      std::fprintf(stderr, "podshimctl: %s\n", err.c_str());
      return kExitUsage;
    }
    if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "podshimctl: unknown option '%s'\nTry 'podshimctl --help'.\n", argv[i]);
      return kExitUsage;
    }
    break;
  }
  if (i >= argc) {
    std::cerr << main_help();
    return kExitUsage;
  }
  auto it = registry().find(argv[i]);
  if (it == registry().end()) {
    std::fprintf(stderr, "podshimctl: unknown command '%s'\nTry 'podshimctl --help'.\n", argv[i]);
    return kExitUsage;
  }
  // -h/--help anywhere after the command: that command's (or subcommand's) help.
  if (auto h = handle_help(argc - i, argv + i, std::cout)) return *h;
  return it->second.run(argc - i, argv + i);
}
