// podshimctl selinux mount-label: the label podshim would give a container's
// injected mounts.
//
//   podshimctl selinux mount-label --process-label LABEL [--shared]
//                                  [--file-type TYPE] [--mount-option] [-o json|yaml]
//
// Prints system_u:object_r:<file type>:<level>, where the level is the
// container's MCS level (private, like :Z) or s0 with --shared (like :z).
// --mount-option prints it as the context="…" option a fresh file system
// would get. The label is printed even when SELinux is disabled on this host
// (to plan for other nodes); podshim itself would then apply none, and a note
// on stderr says so.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "selinux/label.h"
#include "selinux/mounts.h"
#include "shim/ctl/cli.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {
namespace {

// Default: the label alone, one line (for scripts and mount -o).
const std::vector<Format> kFormats = {Format::Json, Format::Yaml};

struct Args {
  GlobalOptions global = globals();
  Format format = Format::Json;  // with -o
  std::string process_label;
  bool have_label = false;
  bool shared = false;
  bool mount_option = false;
  selinux::FileLabelConfig file;
};

// Returns an error message, or "" on success.
std::string parse_args(int argc, char** argv, Args* a) {
  if (argc < 2) return "missing subcommand";
  std::string verb = argv[1];
  if (verb != "mount-label") return "unknown subcommand \"" + verb + "\"";
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    std::string err;
    if (auto t = take_output_option(argc, argv, &i, &a->global, &err); t == OptionResult::Taken) continue;
    else if (t == OptionResult::Error) return err;
    auto value = [&](const std::string& flag, std::string* out) -> std::string {
      if (i + 1 >= argc) return flag + " needs a value";
      *out = argv[++i];
      return "";
    };
    if (s == "--process-label") {
      if (auto e = value(s, &a->process_label); !e.empty()) return e;
      a->have_label = true;
    } else if (s.rfind("--process-label=", 0) == 0) {
      a->process_label = s.substr(16);
      a->have_label = true;
    } else if (s == "--file-type") {
      if (auto e = value(s, &a->file.file_type); !e.empty()) return e;
    } else if (s.rfind("--file-type=", 0) == 0) {
      a->file.file_type = s.substr(12);
    } else if (s == "--shared") {
      a->shared = true;
    } else if (s == "--mount-option") {
      a->mount_option = true;
    } else {
      return "unknown argument \"" + s + "\"";
    }
  }
  if (!a->have_label) return "mount-label needs --process-label LABEL";
  std::string err;
  auto f = resolve_format(a->global, kFormats, Format::Json, &err);
  if (!f) return err;
  a->format = *f;
  return "";
}

int run(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  Args a;
  if (auto e = parse_args(argc, argv, &a); !e.empty()) {
    std::cerr << "podshimctl selinux: " << e << "\n" << usage_hint("selinux");
    return kExitUsage;
  }
  auto proc = selinux::Label::parse(a.process_label);
  if (!proc) {
    std::cerr << "podshimctl selinux: " << proc.error().message << "\n";
    return kExitFailure;
  }
  auto l = selinux::file_label_for(*proc, a.shared ? selinux::Sharing::Shared
                                                   : selinux::Sharing::Private,
                                   a.file);
  if (!l) {
    std::cerr << "podshimctl selinux: " << l.error().message << "\n";
    return kExitFailure;
  }
  if (a.global.output) {
    nlohmann::json j = {{"label", l->str()},
                        {"mountOption", selinux::context_option(*l)},
                        {"selinuxEnabled", selinux::selinux_enabled()}};
    std::cout << render_document(j, a.format);
  } else {
    std::cout << (a.mount_option ? selinux::context_option(*l) : l->str()) << "\n";
  }
  if (!selinux::selinux_enabled())
    std::cerr << "note: SELinux is disabled on this host; podshim would apply no label here\n";
  return kExitOk;
}

CommandRegistrar reg("selinux", "print the SELinux label podshim gives a container's injected mounts", run, Command{
    .description =
        "Prints system_u:object_r:<file type>:<level>, where the level is the container's MCS\n"
        "level (private, like :Z) or s0 with --shared (like :z). The label is printed even when\n"
        "SELinux is disabled on this host (to plan for other nodes); a note on stderr says\n"
        "podshim would apply none here. -o json|yaml prints the label, the mount option and\n"
        "whether SELinux is enabled here.\n",
    .subcommands = {{.name = "mount-label",
                     .summary = "the label for the injected mounts of a container with process label LABEL",
                     .args = "--process-label LABEL",
                     .flags = {Flag{.name = "--process-label", .value = "LABEL",
                                    .help = "the container's process label, e.g. system_u:system_r:container_t:s0:c1,c2"},
                               Flag{.name = "--shared", .help = "shared between containers (level s0, like :z)"},
                               Flag{.name = "--file-type", .value = "TYPE",
                                    .help = "file type (default container_file_t)"},
                               Flag{.name = "--mount-option", .help = "print it as a context=\"...\" mount option"}}}},
    .formats = kFormats,
    .examples = {"podshimctl selinux mount-label --process-label system_u:system_r:container_t:s0:c1,c2",
                 "podshimctl selinux mount-label --process-label system_u:system_r:container_t:s0:c1,c2 --shared -o json"},
    .plain_output = "the label alone",
});

}  // namespace
}  // namespace podshim::ctl
