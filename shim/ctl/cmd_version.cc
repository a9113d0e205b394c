// podshimctl version (and podshimctl --version): the program and the
// project version it was built from.
#include <iostream>

#include "shim/ctl/cli.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {
namespace {

const std::vector<Format> kFormats = {Format::Json, Format::Yaml};

int run_version(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  for (int i = 1; i < argc; ++i) {
    std::string err;
    auto t = take_output_option(argc, argv, &i, &g, &err);
    if (t == OptionResult::Taken) continue;
    if (t == OptionResult::NotMine) err = "unknown argument '" + std::string(argv[i]) + "'";
    return usage_error_try_help("version", err);
  }
  auto f = command_format("version", g, kFormats, Format::Json);
  if (!f) return kExitUsage;
  if (!g.output) {
    std::cout << version_line() << "\n";
    return kExitOk;
  }
  std::cout << render_document(
      {{"program", "podshimctl"}, {"version", std::string(version())}, {"commit", std::string(build_commit())}}, *f);
  return kExitOk;
}

const CommandRegistrar reg("version", "print podshimctl's version (as --version does)", run_version, Command{
    .description = "Prints the program name, the podshim version and the git commit it was built from\n"
                   "(`git describe --always --dirty`; \"unknown\" outside a git checkout).\n",
    .formats = kFormats,
    .examples = {"podshimctl version", "podshimctl version -o json"},
    .plain_output = "'podshimctl VERSION (commit COMMIT)'",
});

}  // namespace
}  // namespace podshim::ctl
