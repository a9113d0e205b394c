// podshimctl cdi list|validate|inject: the CDI registry as podshimd sees it.
//
//   podshimctl cdi list     [--spec-dir D]... [--any-owner] [-o table|wide|json|yaml]
//   podshimctl cdi validate [--spec-dir D]... [--any-owner] [-o table|wide|json|yaml]
//   podshimctl cdi inject   [--spec-dir D]... [--any-owner] [-o json|yaml] --config FILE|- DEVICE...
//
// Without --spec-dir the defaults are /etc/cdi then /var/run/cdi. Spec files
// must be owned by root, as for podshimd, unless --any-owner is given.
#include <fstream>
#include <map>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/fs.h"
#include "cdi/registry.h"
#include "shim/ctl/cli.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {

namespace {

const std::vector<Format> kListFormats = {Format::Table, Format::Wide, Format::Json, Format::Yaml};
const std::vector<Format> kInjectFormats = {Format::Json, Format::Yaml};

struct Args {
  std::string verb;
  GlobalOptions global = globals();
  Format format = Format::Table;
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
  std::vector<char*> cargv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  for (size_t i = 1; i < argv.size(); i++) {
    const std::string& s = argv[i];
    {
      int at = static_cast<int>(i);
      std::string err;
      auto t = take_output_option(static_cast<int>(cargv.size()), cargv.data(), &at, &a->global, &err);
      if (t == OptionResult::Error) return err;
      if (t == OptionResult::Taken) {
        i = static_cast<size_t>(at);
        continue;
      }
    }
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
  std::string err;
  const bool inject = a->verb == "inject";
  auto f = resolve_format(a->global, inject ? kInjectFormats : kListFormats, inject ? Format::Json : Format::Table,
                          &err);
  if (!f) return err;
  a->format = *f;
  if (a->verb == "inject") {
    if (a->config.empty()) return "inject needs --config FILE (or - for stdin)";
    if (a->devices.empty()) return "inject needs at least one DEVICE";
  } else if (!a->devices.empty() || !a->config.empty()) {
    return a->verb + " takes no devices and no --config";
  }
  return "";
}


// cdi list: every device the registry resolves, with the spec it comes from.
int cdi_list(const cdi::Registry& reg, const Args& a, std::ostream& out, std::ostream& err) {
  // The spec file each resolvable device comes from: the last one in scan
  // order (highest priority) that defines it.
  struct From {
    const cdi::SpecFile* file;
    const cdi::Device* device;
  };
  std::map<std::string, From> from;
  for (const auto& f : reg.specs())
    for (const auto& d : f->spec.devices) from[f->spec.kind + "=" + d.name] = {f.get(), &d};
  nlohmann::json items = nlohmann::json::array();
  Table t{{"DEVICE", "SPEC"}, {}};
  const bool wide = a.format == Format::Wide;
  if (wide) t.header.insert(t.header.end(), {"CDI-VERSION", "NODES"});
  for (const auto& name : reg.devices()) {
    nlohmann::json item = {{"name", name}};
    std::string spec = "-", version = "-", nodes;
    if (auto it = from.find(name); it != from.end()) {
      spec = it->second.file->path;
      version = it->second.file->spec.version;
      nlohmann::json paths = nlohmann::json::array();
      for (const auto& n : it->second.device->edits.device_nodes) {
        paths.push_back(n.path);
        nodes += (nodes.empty() ? "" : ",") + n.path;
      }
      item["spec"] = spec;
      item["cdiVersion"] = version;
      item["deviceNodes"] = std::move(paths);
    }
    items.push_back(std::move(item));
    t.rows.push_back({name, spec});
    if (wide) t.rows.back().insert(t.rows.back().end(), {version, nodes.empty() ? "-" : nodes});
  }
  print_listing(nlohmann::json{{"items", std::move(items)}}, a.format, t, out, err);
  size_t bad = reg.errors().size();
  if (bad) err << "podshimctl cdi: " << bad << " spec file(s) with errors; see `podshimctl cdi validate`\n";
  return kExitOk;
}

// cdi validate: every spec file's verdict.
int cdi_validate(const cdi::Registry& reg, const Args& a, std::ostream& out, std::ostream& err) {
  bool any_invalid = false;
  std::map<std::string, const cdi::SpecFile*> loaded;
  for (const auto& f : reg.specs()) loaded[f->path] = f.get();
  nlohmann::json items = nlohmann::json::array();
  Table t{{"STATUS", "SPEC", "ERRORS"}, {}};
  const bool wide = a.format == Format::Wide;
  if (wide) t.header = {"STATUS", "SPEC", "KIND", "DEVICES", "ERRORS"};
  for (const auto& v : reg.verdicts()) {
    any_invalid |= !v.errors.empty();
    std::string errors;
    for (size_t i = 0; i < v.errors.size(); i++) errors += (i ? "; " : "") + v.errors[i];
    items.push_back({{"path", v.path}, {"valid", v.errors.empty()}, {"errors", v.errors}});
    std::vector<std::string> row = {v.errors.empty() ? "ok" : "invalid", v.path};
    if (wide) {
      auto it = loaded.find(v.path);
      row.push_back(it != loaded.end() ? it->second->spec.kind : "-");
      row.push_back(it != loaded.end() ? std::to_string(it->second->spec.devices.size()) : "-");
    }
    row.push_back(errors.empty() ? "-" : errors);
    t.rows.push_back(std::move(row));
  }
  print_listing(nlohmann::json{{"items", std::move(items)}}, a.format, t, out, err);
  return any_invalid ? kExitFailure : kExitOk;
}

// cdi inject: the config with the devices' edits, on stdout.
int cdi_inject(const cdi::Registry& reg, const Args& a, std::istream& in, std::ostream& out, std::ostream& err) {
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
  if (a.format == Format::Yaml) {
    out << to_yaml(nlohmann::json::parse(*r));
    return kExitOk;
  }
  out << *r << "\n";
  return kExitOk;
}

}  // namespace

// Exposed for the unit test (tests/cdi/cmd_cdi_test.cc); argv[0] is the
// first argument after "cdi".
int run_cdi_command(const std::vector<std::string>& argv, std::istream& in, std::ostream& out,
                    std::ostream& err) {
  {
    std::vector<std::string> full = {"cdi"};
    full.insert(full.end(), argv.begin(), argv.end());
    std::vector<char*> cargv;
    for (auto& s : full) cargv.push_back(s.data());
    if (auto h = handle_help(static_cast<int>(cargv.size()), cargv.data(), out)) return *h;
  }
  Args a;
  if (std::string e = parse_args(argv, &a); !e.empty()) {
    err << "podshimctl cdi: " << e << "\n" << usage_hint("cdi");
    return kExitUsage;
  }
  cdi::Registry reg(a.options);
  reg.refresh();

  if (a.verb == "list") return cdi_list(reg, a, out, err);
  if (a.verb == "validate") return cdi_validate(reg, a, out, err);
  return cdi_inject(reg, a, in, out, err);
}

namespace {

int cdi_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return run_cdi_command(args, std::cin, std::cout, std::cerr);
}

Flag flag(std::string name, std::string value, std::string help, Complete complete = Complete::None) {
  return Flag{.name = std::move(name), .value = std::move(value), .help = std::move(help), .complete = complete};
}

CommandRegistrar reg("cdi", "list, validate and inject CDI devices (list|validate|inject)", cdi_main, Command{
    .description =
        "The CDI registry as podshimd sees it, read from the spec directories (default\n"
        "/etc/cdi, then /var/run/cdi; later wins). Spec files must be owned by root, as for\n"
        "podshimd, unless --any-owner is given. Works offline (no podshimd needed).\n",
    .subcommands =
        {{.name = "list", .summary = "list the resolvable devices and the spec file of each (-o wide: "
                                     "CDI version and device nodes)"},
         {.name = "validate",
          .summary = "check every spec file; exit status 1 when one is invalid (-o wide: kind and device count)"},
         {.name = "inject",
          .summary = "print an OCI config.json with DEVICEs' edits applied (exit status 4 for an unknown device)",
          .args = "--config FILE|- DEVICE...",
          .flags = {flag("--config", "FILE", "the OCI config.json to edit, - for stdin", Complete::File)},
          .formats = kInjectFormats}},
    .flags = {flag("--spec-dir", "DIR", "a spec directory, in increasing priority (repeatable)", Complete::Dir),
              Flag{.name = "--any-owner", .help = "accept spec files not owned by root"}},
    .formats = kListFormats,
    .examples = {"podshimctl cdi list", "podshimctl cdi list --spec-dir /var/run/cdi -o wide",
                 "podshimctl cdi validate -o json",
                 "podshimctl cdi inject --config config.json vendor.com/gpu=gpu0 -o yaml"},
});

}  // namespace

}  // namespace podshim::ctl
