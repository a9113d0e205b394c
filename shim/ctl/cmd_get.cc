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

const std::vector<std::string> kContainerHeader = {"CONTAINER", "POD", "NAME", "CPU(REQ/LIM)", "MEM(REQ/LIM)",
                                                   "ACTUAL(CPU MEM)", "GEN", "RESIZE", "DRIFT"};
const std::vector<std::string> kContainerWide = {"STATE", "POLICY(CPU/MEM)", "LAST-OUTCOME", "CGROUP"};

std::string fmt_actual(const std::optional<core::ActualResources>& a) {
  if (!a) return "-";
  return fmt_cpu_pair(a->resources) + " " + fmt_mem(a->resources.memory_limit_bytes);
}

std::vector<std::string> container_row(const core::Container& c, bool wide) {
  std::vector<std::string> row = {wide ? c.id : shorten(c.id, 13),
                                  or_dash(wide ? c.pod_uid : shorten(c.pod_uid, 13)),
                                  or_dash(c.name),
                                  fmt_cpu_pair(c.allocated),
                                  fmt_mem_pair(c.allocated),
                                  fmt_actual(c.actual),
                                  std::to_string(c.generation),
                                  fmt_conditions(c),
                                  fmt_drift(c)};
  if (wide) {
    row.push_back(or_dash(c.state));
    row.push_back(std::string(core::to_string(c.cpu_policy)) + "/" + std::string(core::to_string(c.memory_policy)));
    row.push_back(or_dash(c.last_outcome));
    row.push_back(or_dash(c.cgroup_path));
  }
  return row;
}

Table container_table(const std::vector<core::Container>& items, bool wide) {
  Table t{kContainerHeader, {}};
  if (wide) t.header.insert(t.header.end(), kContainerWide.begin(), kContainerWide.end());
  for (const auto& c : items) t.rows.push_back(container_row(c, wide));
  return t;
}

// `items` as read (the pods), and each one's JSON for what the pod view
// adds to a pod ("containerIds").
Table pod_table(const std::vector<core::Pod>& pods, const json& items, bool wide) {
  Table t{{"POD", "NAMESPACE/NAME", "QOS", "CONTAINERS", "SOURCE"}, {}};
  if (wide) t.header.insert(t.header.end(), {"CPU(REQ/LIM)", "MEM(REQ/LIM)", "ACTUAL(CPU MEM)", "CGROUP"});
  for (size_t i = 0; i < pods.size(); ++i) {
    const core::Pod& p = pods[i];
    const json& ids = items[i].contains("containerIds") ? items[i]["containerIds"] : json();
    std::vector<std::string> row = {p.uid, p.namespace_ + "/" + p.name, std::string(core::to_string(p.qos)),
                                    std::to_string(ids.is_array() ? ids.size() : 0),
                                    std::string(core::to_string(p.source))};
    if (wide) {
      row.push_back(fmt_cpu_pair(p.resources));
      row.push_back(fmt_mem_pair(p.resources));
      row.push_back(fmt_actual(p.actual));
      row.push_back(or_dash(p.cgroup_path));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

void print_container_detail(const core::Container& c) {
  auto res = [](const core::K8sResources& r) { return "cpu " + fmt_cpu_pair(r) + ", memory " + fmt_mem_pair(r); };
  std::printf("Container:    %s\n", c.id.c_str());
  std::printf("Pod:          %s\n", c.pod_uid.c_str());
  std::printf("Name:         %s\n", c.name.c_str());
  std::printf("State:        %s (source %s)\n", c.state.c_str(), std::string(core::to_string(c.source)).c_str());
  std::printf("Cgroup:       %s\n", c.cgroup_path.c_str());
  std::printf("ResizePolicy: cpu=%s memory=%s\n", std::string(core::to_string(c.cpu_policy)).c_str(),
              std::string(core::to_string(c.memory_policy)).c_str());
  std::printf("Generation:   %lld\n", static_cast<long long>(c.generation));
  std::printf("Desired:      %s\n", res(c.desired).c_str());
  std::printf("Allocated:    %s\n", res(c.allocated).c_str());
  // The kernel keeps the values before a failed, refused or restart-awaiting
  // resize: shown only when they differ from the allocated ones.
  if (c.kernel_target() != c.allocated)
    std::printf("Actuated:     %s (the kernel keeps these until the resize succeeds)\n", res(c.kernel_target()).c_str());
  if (c.actual) {
    std::printf("Actual:       %s, usage %s\n", res(c.actual->resources).c_str(),
                fmt_mem(static_cast<int64_t>(c.actual->memory_current)).c_str());
  } else {
    std::printf("Actual:       (not read yet)\n");
  }
  for (const auto& d : c.drift)
    std::printf("Drift:        %s is %s in the kernel, podshim gave it %s\n", d.file.c_str(), d.actual.c_str(),
                d.allocated.c_str());
  auto condition = [](std::string_view type, const core::Condition& k) {
    std::printf("Condition:    %.*s reason=%s observedGeneration=%lld: %s\n", static_cast<int>(type.size()), type.data(),
                k.reason.c_str(), static_cast<long long>(k.observed_generation), k.message.c_str());
  };
  if (c.conditions.pending) condition(core::kPodResizePending, *c.conditions.pending);
  if (c.conditions.in_progress) condition(core::kPodResizeInProgress, *c.conditions.in_progress);
  if (!c.drift.empty()) condition(core::kPodshimDrift, core::drift_condition(c));
  if (c.restart_required) std::printf("Restart:      required (podshim never restarts containers)\n");
  for (const auto& d : c.devices) std::printf("Device:       %s\n", d.cdi_name.c_str());
  if (!c.selinux_mount_label.empty()) std::printf("SELinux:      %s\n", c.selinux_mount_label.c_str());
  if (!c.last_error.empty()) std::printf("LastError:    %s\n", c.last_error.c_str());
}

// An answer the model's reader refused: named, exit status 1.
int unreadable(const Error& e) {
  std::fprintf(stderr, "podshimctl get: %s\n", e.message.c_str());
  return kExitFailure;
}

int run_get(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  std::vector<std::string> pos;
  int rc = parse_command_line("get", argc, argv, &g, [&](int i) {
    std::string_view a = argv[i];
    if (a.starts_with("-")) {
      usage_error_try_help("get", "unknown option '" + std::string(a) + "'");
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
  auto f = command_format("get", g, kFormats, Format::Table);
  if (!f) return kExitUsage;
  const std::string kind = sub->name;
  const bool one = pos.size() == 2;
  const bool wide = *f == Format::Wide;
  std::string target = "/v1/" + kind + (one ? "/" + pos[1] : "");
  rc = kExitOk;
  json j;
  if (!call(g, "GET", target, {}, &j, &rc)) return rc;
  if (!one) {
    const json& items = j.is_object() && j.contains("items") ? j["items"] : json::array();
    if (kind == "containers") {
      auto cs = read_containers(items);
      if (!cs) return unreadable(cs.error());
      print_listing(j, *f, container_table(*cs, wide), std::cout, std::cerr);
    } else {
      auto ps = read_items<core::Pod>(items, &core::pod_from_json, "pod");
      if (!ps) return unreadable(ps.error());
      print_listing(j, *f, pod_table(*ps, items, wide), std::cout, std::cerr);
    }
    return kExitOk;
  }
  if (is_document(*f)) {
    std::cout << render_document(j, *f);
    return kExitOk;
  }
  if (kind == "containers") {
    auto c = core::container_from_json(j);
    if (!c) return unreadable(c.error().wrap("podshimd's answer"));
    print_container_detail(*c);
    return kExitOk;
  }
  auto p = core::pod_from_json(j);
  if (!p) return unreadable(p.error().wrap("podshimd's answer"));
  auto cs = read_containers(j.contains("containers") ? j["containers"] : json::array());
  if (!cs) return unreadable(cs.error());
  std::printf("Pod:       %s\nName:      %s/%s\nQoS:       %s\nCgroup:    %s\n", p->uid.c_str(), p->namespace_.c_str(),
              p->name.c_str(), std::string(core::to_string(p->qos)).c_str(), p->cgroup_path.c_str());
  Table t = container_table(*cs, wide);
  if (t.rows.empty()) {
    std::printf("Containers: none\n");
  } else {
    std::printf("\n");
    std::cout << render_table(t);
  }
  return kExitOk;
}

const CommandRegistrar reg("get", "list or show pods and containers with their resize state", run_get, Command{
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
