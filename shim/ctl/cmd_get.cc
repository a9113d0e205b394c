// podshimctl get pods|containers [ID]: what podshim allocated, what the
// kernel holds, and where each resize stands.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

using nlohmann::json;

const std::vector<Format> kFormats = {Format::Table, Format::Wide, Format::Json, Format::Yaml};

std::string shorten(const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n) : s; }
std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string str_of(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

const std::vector<std::string> kContainerHeader = {"CONTAINER", "POD", "NAME", "CPU(REQ/LIM)", "MEM(REQ/LIM)",
                                                   "ACTUAL(CPU MEM)", "GEN", "RESIZE", "DRIFT"};
const std::vector<std::string> kContainerWide = {"STATE", "POLICY(CPU/MEM)", "LAST-OUTCOME", "CGROUP"};

std::vector<std::string> container_row(const json& c, bool wide) {
  static const json kNone = json::object();
  const json& a = c.contains("allocated") ? c["allocated"] : kNone;
  const json& act = c.contains("actual") ? c["actual"] : kNone;
  std::vector<std::string> row = {
      wide ? str_of(c, "id") : shorten(str_of(c, "id"), 13),
      or_dash(wide ? str_of(c, "podUid") : shorten(str_of(c, "podUid"), 13)),
      or_dash(str_of(c, "name")),
      fmt_cpu(a, "cpuRequestMilli") + "/" + fmt_cpu(a, "cpuLimitMilli"),
      fmt_mem(a, "memoryRequestBytes") + "/" + fmt_mem(a, "memoryLimitBytes"),
      act.is_object() && !act.empty()
          ? fmt_cpu(act, "cpuRequestMilli") + "/" + fmt_cpu(act, "cpuLimitMilli") + " " +
                fmt_mem(act, "memoryLimitBytes")
          : "-",
      std::to_string(c.value("generation", 0)),
      fmt_conditions(c),
      fmt_drift(c)};
  if (wide) {
    const json& pol = c.contains("resizePolicy") ? c["resizePolicy"] : kNone;
    row.push_back(or_dash(str_of(c, "state")));
    row.push_back(or_dash(str_of(pol, "cpu")) + "/" + or_dash(str_of(pol, "memory")));
    row.push_back(or_dash(str_of(c, "lastResizeOutcome")));
    row.push_back(or_dash(str_of(c, "cgroupPath")));
  }
  return row;
}

Table container_table(const json& items, bool wide) {
  Table t{kContainerHeader, {}};
  if (wide) t.header.insert(t.header.end(), kContainerWide.begin(), kContainerWide.end());
  if (items.is_array())
    for (const auto& c : items) t.rows.push_back(container_row(c, wide));
  return t;
}

Table pod_table(const json& items, bool wide) {
  Table t{{"POD", "NAMESPACE/NAME", "QOS", "CONTAINERS", "SOURCE"}, {}};
  if (wide) t.header.insert(t.header.end(), {"CPU(REQ/LIM)", "MEM(REQ/LIM)", "ACTUAL(CPU MEM)", "CGROUP"});
  if (!items.is_array()) return t;
  for (const auto& p : items) {
    size_t n = p.contains("containerIds") && p["containerIds"].is_array() ? p["containerIds"].size() : 0;
    std::vector<std::string> row = {str_of(p, "uid"), str_of(p, "namespace") + "/" + str_of(p, "name"),
                                    or_dash(str_of(p, "qosClass")), std::to_string(n), or_dash(str_of(p, "source"))};
    if (wide) {
      static const json kNone = json::object();
      const json& r = p.contains("resources") ? p["resources"] : kNone;
      const json& act = p.contains("actual") ? p["actual"] : kNone;
      row.push_back(fmt_cpu(r, "cpuRequestMilli") + "/" + fmt_cpu(r, "cpuLimitMilli"));
      row.push_back(fmt_mem(r, "memoryRequestBytes") + "/" + fmt_mem(r, "memoryLimitBytes"));
      row.push_back(act.is_object() && !act.empty() ? fmt_cpu(act, "cpuRequestMilli") + "/" +
                                                          fmt_cpu(act, "cpuLimitMilli") + " " +
                                                          fmt_mem(act, "memoryLimitBytes")
                                                    : "-");
      row.push_back(or_dash(str_of(p, "cgroupPath")));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

void print_container_detail(const json& c) {
  static const json kNone = json::object();
  auto obj = [&](const char* k) -> const json& { return c.contains(k) && c[k].is_object() ? c[k] : kNone; };
  auto res = [](const json& r) {
    return "cpu " + fmt_cpu(r, "cpuRequestMilli") + "/" + fmt_cpu(r, "cpuLimitMilli") + ", memory " +
           fmt_mem(r, "memoryRequestBytes") + "/" + fmt_mem(r, "memoryLimitBytes");
  };
  std::printf("Container:    %s\n", str_of(c, "id").c_str());
  std::printf("Pod:          %s\n", str_of(c, "podUid").c_str());
  std::printf("Name:         %s\n", str_of(c, "name").c_str());
  std::printf("State:        %s (source %s)\n", str_of(c, "state").c_str(), str_of(c, "source").c_str());
  std::printf("Cgroup:       %s\n", str_of(c, "cgroupPath").c_str());
  std::printf("ResizePolicy: cpu=%s memory=%s\n", str_of(obj("resizePolicy"), "cpu").c_str(),
              str_of(obj("resizePolicy"), "memory").c_str());
  std::printf("Generation:   %lld\n", static_cast<long long>(c.value("generation", 0)));
  std::printf("Desired:      %s\n", res(obj("desired")).c_str());
  std::printf("Allocated:    %s\n", res(obj("allocated")).c_str());
  // The kernel keeps the values before a failed, refused or restart-awaiting
  // resize: shown only when they differ from the allocated ones.
  if (c.contains("actuated") && c["actuated"].is_object() && c["actuated"] != obj("allocated"))
    std::printf("Actuated:     %s (the kernel keeps these until the resize succeeds)\n", res(c["actuated"]).c_str());
  if (c.contains("actual") && c["actual"].is_object()) {
    std::printf("Actual:       %s, usage %s\n", res(c["actual"]).c_str(),
                fmt_mem(c["actual"], "memoryCurrentBytes").c_str());
  } else {
    std::printf("Actual:       (not read yet)\n");
  }
  if (c.contains("drift") && c["drift"].is_array()) {
    for (const auto& d : c["drift"]) {
      if (!d.is_object()) continue;
      std::printf("Drift:        %s is %s in the kernel, podshim gave it %s\n", d.value("file", "").c_str(),
                  d.value("actual", "").c_str(), d.value("allocated", "").c_str());
    }
  }
  if (c.contains("conditions") && c["conditions"].is_array()) {
    for (const auto& k : c["conditions"]) {
      std::printf("Condition:    %s reason=%s observedGeneration=%lld: %s\n", k.value("type", "").c_str(),
                  k.value("reason", "").c_str(), static_cast<long long>(k.value("observedGeneration", 0)),
                  k.value("message", "").c_str());
    }
  }
  if (c.value("restartRequired", false)) std::printf("Restart:      required (podshim never restarts containers)\n");
  if (c.contains("devices") && c["devices"].is_array())
    for (const auto& d : c["devices"]) std::printf("Device:       %s\n", d.value("name", "").c_str());
  if (!str_of(c, "selinuxMountLabel").empty()) std::printf("SELinux:      %s\n", str_of(c, "selinuxMountLabel").c_str());
  if (!str_of(c, "lastError").empty()) std::printf("LastError:    %s\n", str_of(c, "lastError").c_str());
}

int run_get(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  std::vector<std::string> pos;
  int rc = parse_command_line("get", argc, argv, &g, [&](int i) {
    std::string_view a = argv[i];
    if (a.starts_with("-")) {
      std::fprintf(stderr, "podshimctl get: unknown option '%s'\nTry 'podshimctl get --help'.\n", argv[i]);
      return false;
    }
    pos.emplace_back(a);
    return true;
  });
  if (rc != kExitOk) return rc;
  if (pos.empty() || pos.size() > 2) {
    std::fprintf(stderr, "Usage: podshimctl get pods|containers [ID] [flags]\nTry 'podshimctl get --help'.\n");
    return kExitUsage;
  }
  const Subcommand* sub = find_subcommand(registry().at("get"), pos[0]);
  if (!sub) {
    std::fprintf(stderr, "podshimctl get: unknown kind '%s' (want pods or containers)\n", pos[0].c_str());
    return kExitUsage;
  }
  std::string err;
  auto f = resolve_format(g, kFormats, Format::Table, &err);
  if (!f) {
    std::fprintf(stderr, "podshimctl get: %s\n", err.c_str());
    return kExitUsage;
  }
  const std::string kind = sub->name;
  const bool one = pos.size() == 2;
  const bool wide = *f == Format::Wide;
  std::string target = "/v1/" + kind + (one ? "/" + pos[1] : "");
  rc = kExitOk;
  json j;
  if (!call(g, "GET", target, {}, &j, &rc)) return rc;
  if (!one) {
    const json& items = j.is_object() && j.contains("items") ? j["items"] : json::array();
    print_listing(j, *f, kind == "containers" ? container_table(items, wide) : pod_table(items, wide), std::cout,
                  std::cerr);
    return kExitOk;
  }
  if (*f == Format::Json || *f == Format::Yaml) {
    std::cout << render_document(j, *f);
    return kExitOk;
  }
  if (kind == "containers") {
    print_container_detail(j);
    return kExitOk;
  }
  std::printf("Pod:       %s\nName:      %s/%s\nQoS:       %s\nCgroup:    %s\n", str_of(j, "uid").c_str(),
              str_of(j, "namespace").c_str(), str_of(j, "name").c_str(), str_of(j, "qosClass").c_str(),
              str_of(j, "cgroupPath").c_str());
  Table t = container_table(j.contains("containers") ? j["containers"] : json::array(), wide);
  if (t.rows.empty()) {
    std::printf("Containers: none\n");
  } else {
    std::printf("\n");
    std::cout << render_table(t);
  }
  return kExitOk;
}

const CommandRegistrar reg(Command{
    .name = "get",
    .summary = "list or show pods and containers with their resize state",
    .run = run_get,
    .description =
        "Lists pods or containers, or shows one: desired, allocated and actual resources,\n"
        "the resize state (RESIZE: PodResizePending/Deferred|Infeasible, PodResizeInProgress\n"
        "while a resize is applied or /Error after one failed or was refused, RestartRequired),\n"
        "drift (DRIFT: the files whose kernel value differs from the one podshim last gave\n"
        "them, also the PodshimDrift condition; not a resize state), generation, devices.\n"
        "-o wide adds the full ids and, for containers, the state, resize policy, last resize outcome and cgroup; for pods,\n"
        "the pod-level resources, actual values and cgroup. An empty list prints\n"
        "\"No resources found\" on stderr (exit status 0).\n",
    .subcommands = {{.name = "pods", .aliases = {"pod", "po"}, .summary = "list pods, or show pod ID (its uid)",
                     .args = "[ID]"},
                    {.name = "containers", .aliases = {"container", "ctr"},
                     .summary = "list containers, or show container ID", .args = "[ID]"}},
    .flags = {socket_flag()},
    .formats = kFormats,
    .examples = {"podshimctl get containers", "podshimctl get containers -o wide",
                 "podshimctl get containers CONTAINER_ID -o yaml", "podshimctl get pods -ojson",
                 "podshimctl get pods POD_UID"},
});

}  // namespace
}  // namespace podshim::ctl
