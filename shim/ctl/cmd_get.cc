// podshimctl get pods|containers [ID]: what podshim allocated, what the
// kernel holds, and where each resize stands.
#include <cstdio>
#include <string>
#include <vector>

#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

using nlohmann::json;

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows) {
    if (w.size() < r.size()) w.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(w[i] - r[i].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

std::string shorten(const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n) : s; }

std::vector<std::string> container_row(const json& c) {
  const json& a = c["allocated"];
  const json& act = c["actual"];
  return {shorten(c.value("id", ""), 13),
          shorten(c.value("podUid", ""), 13),
          c.value("name", ""),
          fmt_cpu(a, "cpuRequestMilli") + "/" + fmt_cpu(a, "cpuLimitMilli"),
          fmt_mem(a, "memoryRequestBytes") + "/" + fmt_mem(a, "memoryLimitBytes"),
          act.is_object() ? fmt_cpu(act, "cpuRequestMilli") + "/" + fmt_cpu(act, "cpuLimitMilli") + " " +
                                fmt_mem(act, "memoryLimitBytes")
                          : "-",
          std::to_string(c.value("generation", 0)),
          fmt_conditions(c)};
}

const std::vector<std::string> kContainerHeader = {"CONTAINER", "POD", "NAME", "CPU(REQ/LIM)", "MEM(REQ/LIM)",
                                                   "ACTUAL(CPU MEM)", "GEN", "RESIZE"};

void print_container_detail(const json& c) {
  auto res = [](const json& r) {
    return "cpu " + fmt_cpu(r, "cpuRequestMilli") + "/" + fmt_cpu(r, "cpuLimitMilli") + ", memory " +
           fmt_mem(r, "memoryRequestBytes") + "/" + fmt_mem(r, "memoryLimitBytes");
  };
  std::printf("Container:    %s\n", c.value("id", "").c_str());
  std::printf("Pod:          %s\n", c.value("podUid", "").c_str());
  std::printf("Name:         %s\n", c.value("name", "").c_str());
  std::printf("State:        %s (source %s)\n", c.value("state", "").c_str(), c.value("source", "").c_str());
  std::printf("Cgroup:       %s\n", c.value("cgroupPath", "").c_str());
  std::printf("ResizePolicy: cpu=%s memory=%s\n", c["resizePolicy"].value("cpu", "").c_str(),
              c["resizePolicy"].value("memory", "").c_str());
  std::printf("Generation:   %lld\n", static_cast<long long>(c.value("generation", 0)));
  std::printf("Desired:      %s\n", res(c["desired"]).c_str());
  std::printf("Allocated:    %s\n", res(c["allocated"]).c_str());
  if (c["actual"].is_object()) {
    std::printf("Actual:       %s, usage %s\n", res(c["actual"]).c_str(),
                fmt_mem(c["actual"], "memoryCurrentBytes").c_str());
  } else {
    std::printf("Actual:       (not read yet)\n");
  }
  for (const auto& k : c["conditions"]) {
    std::printf("Condition:    %s reason=%s observedGeneration=%lld: %s\n", k.value("type", "").c_str(),
                k.value("reason", "").c_str(), static_cast<long long>(k.value("observedGeneration", 0)),
                k.value("message", "").c_str());
  }
  if (c.value("restartRequired", false)) std::printf("Restart:      required (podshim never restarts containers)\n");
  for (const auto& d : c["devices"]) std::printf("Device:       %s\n", d.value("name", "").c_str());
  if (!c.value("selinuxMountLabel", "").empty()) {
    std::printf("SELinux:      %s\n", c.value("selinuxMountLabel", "").c_str());
  }
  if (!c.value("lastError", "").empty()) std::printf("LastError:    %s\n", c.value("lastError", "").c_str());
}

int run_get(int argc, char** argv) {
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::puts("Usage: podshimctl get pods|containers [ID] [-o json]\n\n"
                "Lists pods or containers, or shows one: desired, allocated and actual resources,\n"
                "resize conditions (PodResizePending/PodResizeInProgress), drift from the allocated\n"
                "values (PodshimDrift), generation, devices.");
      return kExitOk;
    }
    if (a.starts_with("-")) {
      if (!take_common_option(argc, argv, &i)) {
        std::fprintf(stderr, "podshimctl get: unknown option '%s'\n", argv[i]);
        return kExitUsage;
      }
      continue;
    }
    pos.emplace_back(a);
  }
  if (pos.empty() || pos.size() > 2) {
    std::fprintf(stderr, "Usage: podshimctl get pods|containers [ID]\n");
    return kExitUsage;
  }
  std::string kind = pos[0];
  if (kind == "pod" || kind == "po") kind = "pods";
  if (kind == "container" || kind == "ctr") kind = "containers";
  if (kind != "pods" && kind != "containers") {
    std::fprintf(stderr, "podshimctl get: unknown kind '%s' (want pods or containers)\n", pos[0].c_str());
    return kExitUsage;
  }
  std::string target = "/v1/" + kind + (pos.size() == 2 ? "/" + pos[1] : "");
  int rc = kExitOk;
  json j;
  if (!call("GET", target, {}, &j, &rc)) return rc;
  if (output_json()) {
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  if (kind == "containers") {
    if (pos.size() == 2) {
      print_container_detail(j);
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows{kContainerHeader};
    for (const auto& c : j["items"]) rows.push_back(container_row(c));
    print_table(rows);
    return kExitOk;
  }
  if (pos.size() == 2) {
    std::printf("Pod:       %s\nName:      %s/%s\nQoS:       %s\nCgroup:    %s\n\n", j.value("uid", "").c_str(),
                j.value("namespace", "").c_str(), j.value("name", "").c_str(), j.value("qosClass", "").c_str(),
                j.value("cgroupPath", "").c_str());
    std::vector<std::vector<std::string>> rows{kContainerHeader};
    for (const auto& c : j["containers"]) rows.push_back(container_row(c));
    print_table(rows);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows{{"POD", "NAMESPACE/NAME", "QOS", "CONTAINERS", "SOURCE"}};
  for (const auto& p : j["items"]) {
    rows.push_back({p.value("uid", ""), p.value("namespace", "") + "/" + p.value("name", ""),
                    p.value("qosClass", ""), std::to_string(p["containerIds"].size()), p.value("source", "")});
  }
  print_table(rows);
  return kExitOk;
}

const CommandRegistrar reg("get", "list or show pods and containers with their resize state", run_get);

}  // namespace
}  // namespace podshim::ctl
