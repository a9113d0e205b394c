// podshimctl selinux mount-label: the label podshim would give a container's
// injected mounts.
//
//   podshimctl selinux mount-label --process-label LABEL [--shared]
//                                  [--file-type TYPE] [--mount-option]
//
// Prints system_u:object_r:<file type>:<level>, where the level is the
// container's MCS level (private, like :Z) or s0 with --shared (like :z).
// --mount-option prints it as the context="…" option a fresh file system
// would get. The label is printed even when SELinux is disabled on this host
// (to plan for other nodes); podshim itself would then apply none, and a note
// on stderr says so.
#include <iostream>
#include <string>
#include <vector>

#include "selinux/label.h"
#include "selinux/mounts.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {
namespace {

constexpr const char* kUsage =
    "usage: podshimctl selinux mount-label --process-label LABEL [--shared]\n"
    "                                      [--file-type TYPE] [--mount-option]\n";

struct Args {
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
  return "";
}

int run(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  Args a;
  if (auto e = parse_args(argc, argv, &a); !e.empty()) {
    std::cerr << "podshimctl selinux: " << e << "\n" << kUsage;
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
  std::cout << (a.mount_option ? selinux::context_option(*l) : l->str()) << "\n";
  if (!selinux::selinux_enabled())
    std::cerr << "note: SELinux is disabled on this host; podshim would apply no label here\n";
  return kExitOk;
}

CommandRegistrar reg("selinux",
                     "print the SELinux label podshim gives a container's injected mounts", run);

}  // namespace
}  // namespace podshim::ctl
