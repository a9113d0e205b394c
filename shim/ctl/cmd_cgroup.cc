// podshimctl cgroup-values: prints the exact strings podshim writes to
// cpu.weight, cpu.max and memory.max for given Kubernetes quantities, so an
// operator can predict what the kernel will get. Values the kernel would
// refuse are refused here too, naming the kernel's limit.
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/quantity.h"
#include "cgroup/engine.h"
#include "shim/ctl/registry.h"

namespace podshim::ctl {
namespace {

constexpr std::string_view kUsage =
    "usage: podshimctl cgroup-values [--cpu-request Q] [--cpu-limit Q] [--memory-limit Q]\n"
    "                                [--weight-formula linear|quadratic] [--cgroup-driver cgroupfs|systemd]\n";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "podshimctl cgroup-values: %s\n%s", msg.c_str(), std::string(kUsage).c_str());
  return kExitUsage;
}

int cmd_cgroup_values(int argc, char** argv) {
  cgroup::K8sResources r;
  cgroup::WeightFormula formula = cgroup::WeightFormula::Quadratic;
  bool systemd = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(std::string(kUsage).c_str(), stdout);
      return kExitOk;
    }
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
  // A zero quantity is "unset" for limits, as in the kubelet (MilliCPUToQuota(0) = 0 → no quota).
  if (r.cpu_limit_milli == 0) r.cpu_limit_milli.reset();
  if (r.memory_limit_bytes == 0) r.memory_limit_bytes.reset();
  // Refuse what the kernel would refuse (or silently change) instead of
  // printing a value no write could make true (issue 17: a cpu limit of 10^13
  // cores printed a cpu.max the kernel answers with EINVAL).
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
  std::fputs((out.dump(2) + "\n").c_str(), stdout);
  return kExitOk;
}

CommandRegistrar reg("cgroup-values",
                     "print the cpu.weight, cpu.max and memory.max podshim writes for given quantities",
                     cmd_cgroup_values);

}  // namespace
}  // namespace podshim::ctl
