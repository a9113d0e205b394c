// podshimctl completion bash|zsh: a shell completion script generated from
// the command registry (commands, subcommands, flags, their values).
#include <cstdio>
#include <iostream>

#include "shim/ctl/cli.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {
namespace {

int run_completion(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  if (argc != 2)
    return usage_error_try_help("completion", argc < 2 ? "name a shell: bash or zsh" : "one shell only: bash or zsh");
  if (!command_format("completion", globals(), {}, Format::Table)) return kExitUsage;
  std::string_view shell = argv[1];
  if (shell == "bash") {
    std::cout << bash_completion();
  } else if (shell == "zsh") {
    std::cout << zsh_completion();
  } else {
    std::fprintf(stderr, "podshimctl completion: unknown shell '%s' (want bash or zsh)\n", argv[1]);
    return kExitUsage;
  }
  return kExitOk;
}

const CommandRegistrar reg("completion", "print a bash or zsh completion script", run_completion, Command{
    .description =
        "Prints a completion script for commands, subcommands, flags and their values, made\n"
        "from the same command registry podshimctl parses with. Install it:\n"
        "  bash, every user:  podshimctl completion bash > /etc/bash_completion.d/podshimctl\n"
        "  bash, one shell:   source <(podshimctl completion bash)    (e.g. in ~/.bashrc)\n"
        "  zsh, every user:   podshimctl completion zsh > /usr/local/share/zsh/site-functions/_podshimctl\n"
        "  zsh, one shell:    source <(podshimctl completion zsh)     (after compinit, e.g. in ~/.zshrc)\n",
    .subcommands = {{.name = "bash", .summary = "the bash script (bash 4.1 or later)"},
                    {.name = "zsh", .summary = "the zsh script (#compdef podshimctl)"}},
    .examples = {"podshimctl completion bash > /etc/bash_completion.d/podshimctl",
                 "podshimctl completion zsh > /usr/local/share/zsh/site-functions/_podshimctl"},
});

}  // namespace
}  // namespace podshim::ctl
