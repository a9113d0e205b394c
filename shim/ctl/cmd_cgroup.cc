// podshimctl cgroup-values: prints the exact strings podshim writes to
// cpu.weight, cpu.max and memory.max for given Kubernetes quantities, so an
// operator can predict what the kernel will get. Values the kernel would
// refuse are refused here too, naming the kernel's limit.
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <iostream>

#include <nlohmann/json.hpp>

#include "base/quantity.h"
#include "cgroup/engine.h"
#include "shim/ctl/cli.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {
namespace {

// json first: the default, as before -o existed (scripts read it).
const std::vector<Format> kFormats = {Format::Json, Format::Yaml, Format::Table, Format::Wide};

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "podshimctl cgroup-values: %s\n%s", msg.c_str(), usage_hint("cgroup-values").c_str());
  return kExitUsage;
}

int cmd_cgroup_values(int argc, char** argv) {
  cgroup::K8sResources r;
  cgroup::WeightFormula formula = cgroup::WeightFormula::Quadratic;
  bool systemd = false;
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string err;
    if (auto t = take_output_option(argc, argv, &i, &g, &err); t == OptionResult::Taken) continue;
    else if (t == OptionResult::Error) return usage_error(err);
    std::string_view value;
    size_t eq = arg.find('=');
    std::string_view name = arg.substr(0, eq);
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc) return usage_error(std::string(arg) + " needs a value");
      value = argv[++i];
    }
    if (name == "--cpu-request" || name == "--cpu-limit") {
      auto q = quantity::parse_cpu_milli(value);
      if (!q) return usage_error(std::string(name) + ": " + q.error().message);
      (name == "--cpu-request" ? r.cpu_request_milli : r.cpu_limit_milli) = *q;
    } else if (name == "--memory-limit") {
      auto q = quantity::parse_memory_bytes(value);
      if (!q) return usage_error(std::string(name) + ": " + q.error().message);
      r.memory_limit_bytes = *q;
    } else if (name == "--weight-formula") {
      auto f = cgroup::parse_formula(value);
      if (!f) return usage_error(f.error().message);
      formula = *f;
    } else if (name == "--cgroup-driver") {
      auto d = cgroup::parse_driver(value);
      if (!d || *d == cgroup::DriverKind::Auto) return usage_error("--cgroup-driver: expected cgroupfs or systemd");
      systemd = *d == cgroup::DriverKind::Systemd;
    } else {
      return usage_error("unknown option " + std::string(arg));
    }
  }
  std::string err;
  auto f = resolve_format(g, kFormats, Format::Json, &err);
  if (!f) return usage_error(err);
  // A zero quantity is "unset" for limits, as in the kubelet (MilliCPUToQuota(0) = 0 → no quota).
  if (r.cpu_limit_milli == 0) r.cpu_limit_milli.reset();
  if (r.memory_limit_bytes == 0) r.memory_limit_bytes.reset();
  // Refuse what the kernel would refuse (or silently change) instead of
  // printing a value no write could make true (a cpu limit of 10^13 cores
  // printed a cpu.max the kernel answers with EINVAL).
  cgroup::KernelLimitOptions limits;
  limits.systemd_rounding = systemd;
  if (auto k = cgroup::check_kernel_limits(r, limits); !k) {
    std::fprintf(stderr, "podshimctl cgroup-values: %s\n", k.error().message.c_str());
    return kExitUsage;
  }
  cgroup::AttrValues v = cgroup::attr_values(r, formula, systemd);
  nlohmann::json out;
  // With neither request nor limit the kubelet still sends MinShares (2),
  // which every formula maps to weight 1.
  out["cpu.weight"] = v.cpu_weight.value_or(std::to_string(cgroup::milli_cpu_to_weight(0, formula)));
  out["cpu.max"] = v.cpu_max;
  out["memory.max"] = v.memory_max;
  out["weight_formula"] = std::string(cgroup::formula_name(formula));
  out["cgroup_driver"] = systemd ? "systemd" : "cgroupfs";
  if (is_document(*f)) {
    std::cout << render_document(out, *f);
    return kExitOk;
  }
  Table t{{"CPU.WEIGHT", "CPU.MAX", "MEMORY.MAX"}, {}};
  auto str = [&](const char* k) { return out[k].get<std::string>(); };
  t.rows.push_back({str("cpu.weight"), str("cpu.max"), str("memory.max")});
  if (*f == Format::Wide) {
    t.header.insert(t.header.end(), {"WEIGHT-FORMULA", "CGROUP-DRIVER"});
    t.rows.back().insert(t.rows.back().end(), {str("weight_formula"), str("cgroup_driver")});
  }
  std::cout << render_table(t);
  return kExitOk;
}

Flag value_flag(std::string name, std::string value, std::string help, std::vector<std::string> choices = {}) {
  return Flag{.name = std::move(name), .value = std::move(value), .help = std::move(help),
              .choices = std::move(choices)};
}

CommandRegistrar reg("cgroup-values", "print the cpu.weight, cpu.max and memory.max podshim writes for given quantities",
                     cmd_cgroup_values, Command{
    .description =
        "Prints the exact strings podshim writes to cpu.weight, cpu.max and memory.max for\n"
        "these Kubernetes quantities (JSON by default). A quantity the kernel would refuse or\n"
        "silently change is refused with the kernel's limit, exit status 2. Works offline.\n"
        "-o table prints one row; -o wide adds the weight formula and the cgroup driver.\n",
    .flags = {value_flag("--cpu-request", "Q", "cpu request, e.g. 250m"),
              value_flag("--cpu-limit", "Q", "cpu limit, e.g. 1"),
              value_flag("--memory-limit", "Q", "memory limit, e.g. 512Mi"),
              value_flag("--weight-formula", "F", "shares to cpu.weight: linear or quadratic (default quadratic)",
                         {"linear", "quadratic"}),
              value_flag("--cgroup-driver", "D", "cgroupfs or systemd (systemd rounds cpu.max as systemd does)",
                         {"cgroupfs", "systemd"})},
    .formats = kFormats,
    .examples = {"podshimctl cgroup-values --cpu-request 250m --cpu-limit 1 --memory-limit 512Mi",
                 "podshimctl cgroup-values --cpu-limit 125m --cgroup-driver systemd -o wide"},
});

}  // namespace
}  // namespace podshim::ctl
