// podshimctl cdi list|validate|inject: the CDI registry as podshimd sees it.
//
//   podshimctl cdi list     [--spec-dir D]... [--any-owner]
//   podshimctl cdi validate [--spec-dir D]... [--any-owner]
//   podshimctl cdi inject   [--spec-dir D]... [--any-owner] --config FILE|- DEVICE...
//
// Without --spec-dir the defaults are /etc/cdi then /var/run/cdi. Spec files
// must be owned by root, as for podshimd, unless --any-owner is given.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/fs.h"
#include "cdi/registry.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {

namespace {

constexpr const char* kUsage =
    "usage: podshimctl cdi list     [--spec-dir DIR]... [--any-owner]\n"
    "       podshimctl cdi validate [--spec-dir DIR]... [--any-owner]\n"
    "       podshimctl cdi inject   [--spec-dir DIR]... [--any-owner] --config FILE|- DEVICE...\n";

struct Args {
  std::string verb;
  cdi::RegistryOptions options;
  std::string config;
  std::vector<std::string> devices;
};

bool str_starts_impl(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Returns an error message, or "" on success.
std::string parse_args(const std::vector<std::string>& argv, Args* a) {
  if (argv.empty()) return "missing subcommand";
  a->verb = argv[0];
  if (a->verb != "list" && a->verb != "validate" && a->verb != "inject")
    return "unknown subcommand \"" + a->verb + "\"";
  std::vector<std::string> dirs;
  for (size_t i = 1; i < argv.size(); i++) {
    const std::string& s = argv[i];
    auto value = [&](const char* flag, std::string* out) -> std::string {
      if (i + 1 >= argv.size()) return std::string(flag) + " needs a value";
      *out = argv[++i];
      return "";
    };
    if (s == "--spec-dir") {
      std::string d;
      if (auto e = value("--spec-dir", &d); !e.empty()) return e;
      if (d.empty()) return "--spec-dir must not be empty";
      dirs.push_back(d);
    } else if (str_starts_impl(s, "--spec-dir=")) {
      dirs.push_back(s.substr(11));
    } else if (s == "--config") {
      if (auto e = value("--config", &a->config); !e.empty()) return e;
    } else if (str_starts_impl(s, "--config=")) {
      a->config = s.substr(9);
    } else if (s == "--any-owner") {
      a->options.required_owner = std::nullopt;
    } else if (s == "--") {
      a->devices.insert(a->devices.end(), argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
      break;
    } else if (s.size() > 1 && s[0] == '-') {
      return "unknown option \"" + s + "\"";
    } else {
      a->devices.push_back(s);
    }
  }
  if (!dirs.empty()) a->options.spec_dirs = dirs;
  if (a->verb == "inject") {
    if (a->config.empty()) return "inject needs --config FILE (or - for stdin)";
    if (a->devices.empty()) return "inject needs at least one DEVICE";
  } else if (!a->devices.empty() || !a->config.empty()) {
    return a->verb + " takes no devices and no --config";
  }
  return "";
}


}  // namespace

// Exposed for the unit test (tests/cdi/cmd_cdi_test.cc); argv[0] is the
// first argument after "cdi".
int run_cdi_command(const std::vector<std::string>& argv, std::istream& in, std::ostream& out,
                    std::ostream& err) {
  Args a;
  if (std::string e = parse_args(argv, &a); !e.empty()) {
    err << "podshimctl cdi: " << e << "\n" << kUsage;
    return kExitUsage;
  }
  cdi::Registry reg(a.options);
  reg.refresh();

  if (a.verb == "list") {
    for (const auto& d : reg.devices()) out << d << "\n";
    size_t bad = reg.errors().size();
    if (bad) err << "podshimctl cdi: " << bad << " spec file(s) with errors; see `podshimctl cdi validate`\n";
    return kExitOk;
  }
  if (a.verb == "validate") {
    bool any_invalid = false;
    for (const auto& v : reg.verdicts()) {
      if (v.errors.empty()) {
        out << "ok      " << v.path << "\n";
        continue;
      }
      any_invalid = true;
      out << "invalid " << v.path << ": ";
      for (size_t i = 0; i < v.errors.size(); i++) out << (i ? "; " : "") << v.errors[i];
      out << "\n";
    }
    if (reg.verdicts().empty()) err << "podshimctl cdi: no spec files found\n";
    return any_invalid ? kExitFailure : kExitOk;
  }

  // inject
  std::string text;
  if (a.config == "-") {
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else {
    auto data = fs::read_file(a.config);
    if (!data) {
      err << "podshimctl cdi: reading config: " << data.error().message << "\n";
      return kExitFailure;
    }
    text = std::move(*data);
  }
  nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    err << "podshimctl cdi: " << a.config << ": not a JSON object (an OCI config.json)\n";
    return kExitFailure;
  }
  auto r = cdi::inject_oci_text(reg, std::move(config), a.devices, /*indent=*/2);
  if (!r) {
    err << "podshimctl cdi: " << r.error().message << "\n";
    return r.error().code == ENOENT ? kExitNotFound : kExitFailure;
  }
  out << *r << "\n";
  return kExitOk;
}

namespace {

int cdi_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return run_cdi_command(args, std::cin, std::cout, std::cerr);
}

CommandRegistrar reg("cdi", "list, validate and inject CDI devices (list|validate|inject)", cdi_main);

}  // namespace

}  // namespace podshim::ctl
