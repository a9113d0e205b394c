// podshimctl resize: ask podshimd to resize a container (or a pod's
// pod-level resources with --pod), the same request the API takes.
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <iostream>
#include <string>
#include <utility>

#include "base/quantity.h"
#include "base/str.h"
#include "cgroup/convert.h"
#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

using nlohmann::json;

const std::vector<Format> kFormats = {Format::Table, Format::Wide, Format::Json, Format::Yaml};

// Waits for an in-progress resize of container `id` at generation `gen`:
// returns its final outcome and message (or "in_progress" after ~60 s).
std::pair<std::string, std::string> wait_outcome(const GlobalOptions& g, const std::string& id, int64_t gen, int* rc) {
  for (int i = 0; i < 1200; ++i) {
    json c;
    if (!call(g, "GET", "/v1/containers/" + id, "", &c, rc)) return {"error", "reading the container failed"};
    const std::string o = c.value("lastResizeOutcome", "");
    if (c.value("generation", int64_t{0}) != gen) return {o, "superseded by a newer resize"};
    if (o != "in_progress") {
      std::string msg = c.value("lastError", "");
      return {o, msg};
    }
    usleep(50'000);
  }
  return {"in_progress", "still in progress after 60 s"};
}

// The exit code for a resize's final result (registry.h's table).
int exit_for_result(const std::string& result) {
  if (result == "applied" || result == "unchanged" || result == "restart_required") return kExitOk;
  if (result == "applied_with_oom_kill") return kExitAppliedWithOomKill;
  if (result == "deferred" || result == "infeasible") return kExitNotAdmitted;
  return kExitFailure;
}

// What the command line asks for.
struct ResizeArgs {
  std::string id;
  bool pod = false;
  json requests = json::object(), limits = json::object(), policy = json::array();
};

// --cpu, --cpu-request, --cpu-limit, --memory, --memory-limit and
// --memory-request: the quantity, checked as the API and the kernel would,
// into the requests or limits of `a`. False (with the reason said) on a bad
// value.
bool take_quantity(std::string_view name, const std::string& v, ResizeArgs* a) {
  const bool cpu = name.starts_with("--cpu");
  const bool limit = name == "--cpu-limit" || name == "--memory" || name == "--memory-limit";
  auto q = cpu ? quantity::parse_cpu_milli(v) : quantity::parse_memory_bytes(v);
  if (!q) {
    std::fprintf(stderr, "podshimctl resize: %.*s: %s\n", static_cast<int>(name.size()), name.data(),
                 q.error().message.c_str());
    return false;
  }
  cgroup::K8sResources one;
  if (cpu)
    (limit ? one.cpu_limit_milli : one.cpu_request_milli) = *q;
  else
    (limit ? one.memory_limit_bytes : one.memory_request_bytes) = *q;
  if (auto k = cgroup::check_kernel_limits(one); !k) {
    std::fprintf(stderr, "podshimctl resize: %.*s %s: %s\n", static_cast<int>(name.size()), name.data(), v.c_str(),
                 k.error().message.c_str());
    return false;
  }
  (limit ? a->limits : a->requests)[cpu ? "cpu" : "memory"] = v;
  return true;
}

// --policy cpu=NotRequired,memory=RestartContainer.
bool take_policy(const std::string& v, ResizeArgs* a) {
  for (auto item : str::split(v, ',')) {
    auto kv = str::split(item, '=');
    if (kv.size() != 2 || (kv[0] != "cpu" && kv[0] != "memory") ||
        (kv[1] != "NotRequired" && kv[1] != "RestartContainer")) {
      std::fprintf(stderr, "podshimctl resize: --policy wants cpu|memory=NotRequired|RestartContainer, not '%.*s'\n",
                   static_cast<int>(item.size()), item.data());
      return false;
    }
    a->policy.push_back({{"resourceName", std::string(kv[0])}, {"restartPolicy", std::string(kv[1])}});
  }
  return true;
}

// The arguments into `a` and `g`; an exit code when they are wrong.
std::optional<int> parse_resize_args(int argc, char** argv, GlobalOptions* g, ResizeArgs* a) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string err;
    if (auto t = take_global_option(argc, argv, &i, g, &err); t == OptionResult::Taken) {
      continue;
    } else if (t == OptionResult::Error) {
      std::fprintf(stderr, "podshimctl resize: %s\n", err.c_str());
      return kExitUsage;
    }
    // --flag VALUE or --flag=VALUE.
    std::string_view name = arg;
    std::optional<std::string> value;
    if (size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    }
    if (name == "--pod" && !value) {
      a->pod = true;
      continue;
    }
    const bool quantity = name == "--cpu" || name == "--cpu-request" || name == "--cpu-limit" || name == "--memory" ||
                          name == "--memory-limit" || name == "--memory-request";
    if (quantity || name == "--policy") {
      if (!value && i + 1 >= argc) {
        std::fprintf(stderr, "podshimctl resize: %.*s needs a value\n", static_cast<int>(name.size()), name.data());
        return kExitUsage;
      }
      if (!value) value = std::string(argv[++i]);
      if (!(quantity ? take_quantity(name, *value, a) : take_policy(*value, a))) return kExitUsage;
      continue;
    }
    if (arg.starts_with("-")) {
      return usage_error_try_help("resize", "unknown option '" + std::string(arg) + "'");
    }
    if (!a->id.empty()) {
      std::fprintf(stderr, "podshimctl resize: more than one ID given\n");
      return kExitUsage;
    }
    a->id = std::string(arg);
  }
  if (a->id.empty() || (a->requests.empty() && a->limits.empty() && a->policy.empty())) {
    return usage_error_try_help(
        "resize", a->id.empty() ? "no ID given"
                                : "nothing to change: give --cpu, --cpu-limit, --memory, --memory-request or --policy");
  }
  if (a->pod && !a->policy.empty()) {
    std::fprintf(stderr, "podshimctl resize: pods have no resizePolicy (KEP-5419); drop --policy\n");
    return kExitUsage;
  }
  return std::nullopt;
}

// The request body the API takes for `a`.
json resize_body(const ResizeArgs& a) {
  json resources = json::object();
  if (!a.requests.empty()) resources["requests"] = a.requests;
  if (!a.limits.empty()) resources["limits"] = a.limits;
  if (a.pod) return {{"resources", resources}};
  json body = json::object();
  if (!resources.empty()) body["resources"] = resources;
  if (!a.policy.empty()) body["resizePolicy"] = a.policy;
  return body;
}

// An "in_progress" answer becomes the final one: the worst of the
// containers' outcomes, waited for.
void wait_final(const GlobalOptions& g, json& j, int* rc) {
  if (j.value("result", "") != "in_progress" || !j.contains("generations") || !j["generations"].is_object()) return;
  std::string final_result = "applied", final_msg;
  for (const auto& [cid, gen] : j["generations"].items()) {
    auto [o, msg] = wait_outcome(g, cid, gen.get<int64_t>(), rc);
    if (o != "applied" && o != "unchanged") {
      final_result = o;
      final_msg = msg;
    }
  }
  j["result"] = final_result;
  j["message"] = final_msg;
}

// -o wide: what the engine saw (reclaimed bytes, duration, memory.events deltas).
void print_report(const json& r) {
  std::printf("report: duration %lldms, reclaimed %lld bytes, growth %lld bytes/s",
              static_cast<long long>(r.value("durationMs", int64_t{0})),
              static_cast<long long>(r.value("bytesReclaimed", int64_t{0})),
              static_cast<long long>(r.value("growthBytesPerSecond", int64_t{0})));
  if (r.contains("memoryEvents") && r["memoryEvents"].is_object()) {
    for (const auto& [cg, e] : r["memoryEvents"].items())
      std::printf("; %s oom %lld oom_kill %lld high %lld max %lld", cg.c_str(),
                  static_cast<long long>(e.value("oom", int64_t{0})),
                  static_cast<long long>(e.value("oomKill", int64_t{0})),
                  static_cast<long long>(e.value("high", int64_t{0})), static_cast<long long>(e.value("max", int64_t{0})));
  }
  std::printf("\n");
}

void print_result(const ResizeArgs& a, const json& j, Format f) {
  if (is_document(f)) {
    std::cout << render_document(j, f);
    return;
  }
  std::printf("%s: %s", a.id.c_str(), j.value("result", "").c_str());
  if (!a.pod && j.contains("generations") && j["generations"].is_object()) {
    for (const auto& [cid, gen] : j["generations"].items())
      std::printf(" (generation %lld)", static_cast<long long>(gen.get<int64_t>()));
  }
  std::string msg = j.value("message", "");
  if (!msg.empty()) std::printf(": %s", msg.c_str());
  std::printf("\n");
  if (f == Format::Wide && j.contains("report") && j["report"].is_object()) print_report(j["report"]);
}

int run_resize(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  ResizeArgs a;
  if (auto rc = parse_resize_args(argc, argv, &g, &a)) return *rc;
  auto f = command_format("resize", g, kFormats, Format::Table);
  if (!f) return kExitUsage;
  std::string target = (a.pod ? "/v1/pods/" : "/v1/containers/") + a.id + "/resize";
  int rc = kExitOk;
  json j;
  if (!call(g, "POST", target, resize_body(a).dump(), &j, &rc)) return rc;
  wait_final(g, j, &rc);
  print_result(a, j, *f);
  return exit_for_result(j.value("result", ""));
}

Flag quantity_flag(std::string name, std::string help) {
  return Flag{.name = std::move(name), .value = "Q", .help = std::move(help)};
}

const CommandRegistrar reg("resize", "resize a container (or a pod with --pod) through podshimd", run_resize, Command{
    .args = "ID",
    .description =
        "Resizes container ID (or, with --pod, pod ID's pod-level resources). Values not\n"
        "given keep their current setting. A quantity the kernel cannot take (a cpu limit\n"
        "above 175921860444m, a memory limit below one page) is refused here, exit status 2.\n"
        "A resize still running (NRI mode: the runtime applies it) is waited for.\n"
        "Exit status: 0 when applied, unchanged or allocated pending a restart (podshim never\n"
        "restarts a container itself); 6 when not admitted (deferred or infeasible, nothing\n"
        "changed); 1 when actuation failed (PodResizeInProgress/Error, e.g. a shrink below\n"
        "usage); 5 when applied but the kernel OOM-killed in the container during the resize\n"
        "(applied_with_oom_kill); 4 for no such container or pod; 3 when denied or podshimd\n"
        "is unreachable. -o wide adds what the engine saw (duration, reclaimed bytes,\n"
        "memory.events deltas).\n",
    .flags = {quantity_flag("--cpu", "cpu request (also --cpu-request), e.g. 250m, 0.5, 2"),
              quantity_flag("--cpu-request", "cpu request"),
              quantity_flag("--cpu-limit", "cpu limit"),
              quantity_flag("--memory", "memory limit (also --memory-limit), e.g. 256Mi, 1Gi"),
              quantity_flag("--memory-limit", "memory limit"),
              quantity_flag("--memory-request", "memory request"),
              Flag{.name = "--policy", .value = "LIST",
                   .help = "resizePolicy per resource: cpu|memory=NotRequired|RestartContainer, comma-separated",
                   .choices = {"cpu=NotRequired", "cpu=RestartContainer", "memory=NotRequired",
                               "memory=RestartContainer"}},
              Flag{.name = "--pod", .help = "ID is a pod uid; resize pod-level resources"},
              socket_flag()},
    .formats = kFormats,
    .examples = {"podshimctl resize CONTAINER_ID --memory 256Mi",
                 "podshimctl resize CONTAINER_ID --cpu 500m --cpu-limit 1 -o json",
                 "podshimctl resize CONTAINER_ID --policy cpu=NotRequired,memory=RestartContainer",
                 "podshimctl resize POD_UID --pod --cpu-limit 2"},
});

}  // namespace
}  // namespace podshim::ctl
