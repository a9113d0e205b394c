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

int run_resize(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  std::string id;
  bool pod = false;
  json requests = json::object(), limits = json::object(), policy = json::array();
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    std::string err;
    if (auto t = take_global_option(argc, argv, &i, &g, &err); t == OptionResult::Taken) {
      continue;
    } else if (t == OptionResult::Error) {
      std::fprintf(stderr, "podshimctl resize: %s\n", err.c_str());
      return kExitUsage;
    }
    // --flag VALUE or --flag=VALUE.
    std::string_view name = a;
    std::optional<std::string> inline_value;
    if (a.starts_with("--")) {
      if (size_t eq = a.find('='); eq != std::string_view::npos) {
        name = a.substr(0, eq);
        inline_value = std::string(a.substr(eq + 1));
      }
    }
    if (name == "--pod" && !inline_value) {
      pod = true;
      continue;
    }
    const std::string flag(name);
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 >= argc) {
        std::fprintf(stderr, "podshimctl resize: %s needs a value\n", flag.c_str());
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    if (name == "--cpu" || name == "--cpu-request" || name == "--cpu-limit") {
      auto v = value();
      if (!v) return kExitUsage;
      auto q = quantity::parse_cpu_milli(*v);
      if (!q) {
        std::fprintf(stderr, "podshimctl resize: %s: %s\n", flag.c_str(), q.error().message.c_str());
        return kExitUsage;
      }
      cgroup::K8sResources one;
      (name == "--cpu-limit" ? one.cpu_limit_milli : one.cpu_request_milli) = *q;
      if (auto k = cgroup::check_kernel_limits(one); !k) {
        std::fprintf(stderr, "podshimctl resize: %s %s: %s\n", flag.c_str(), v->c_str(), k.error().message.c_str());
        return kExitUsage;
      }
      (name == "--cpu-limit" ? limits : requests)["cpu"] = *v;
      continue;
    }
    if (name == "--memory" || name == "--memory-limit" || name == "--memory-request") {
      auto v = value();
      if (!v) return kExitUsage;
      auto q = quantity::parse_memory_bytes(*v);
      if (!q) {
        std::fprintf(stderr, "podshimctl resize: %s: %s\n", flag.c_str(), q.error().message.c_str());
        return kExitUsage;
      }
      cgroup::K8sResources one;
      (name == "--memory-request" ? one.memory_request_bytes : one.memory_limit_bytes) = *q;
      if (auto k = cgroup::check_kernel_limits(one); !k) {
        std::fprintf(stderr, "podshimctl resize: %s %s: %s\n", flag.c_str(), v->c_str(), k.error().message.c_str());
        return kExitUsage;
      }
      (name == "--memory-request" ? requests : limits)["memory"] = *v;
      continue;
    }
    if (name == "--policy") {
      auto v = value();
      if (!v) return kExitUsage;
      for (auto item : str::split(*v, ',')) {
        auto kv = str::split(item, '=');
        if (kv.size() != 2 || (kv[0] != "cpu" && kv[0] != "memory") ||
            (kv[1] != "NotRequired" && kv[1] != "RestartContainer")) {
          std::fprintf(stderr,
                       "podshimctl resize: --policy wants cpu|memory=NotRequired|RestartContainer, not '%.*s'\n",
                       static_cast<int>(item.size()), item.data());
          return kExitUsage;
        }
        policy.push_back({{"resourceName", std::string(kv[0])}, {"restartPolicy", std::string(kv[1])}});
      }
      continue;
    }
    if (a.starts_with("-")) {
      std::fprintf(stderr, "podshimctl resize: unknown option '%s'\nTry 'podshimctl resize --help'.\n", argv[i]);
      return kExitUsage;
    }
    if (!id.empty()) {
      std::fprintf(stderr, "podshimctl resize: more than one ID given\n");
      return kExitUsage;
    }
    id = std::string(a);
  }
  if (id.empty() || (requests.empty() && limits.empty() && policy.empty())) {
    std::fprintf(stderr, "podshimctl resize: %s\nTry 'podshimctl resize --help'.\n",
                 id.empty() ? "no ID given" : "nothing to change: give --cpu, --cpu-limit, --memory, --memory-request or --policy");
    return kExitUsage;
  }
  std::string err;
  auto f = resolve_format(g, kFormats, Format::Table, &err);
  if (!f) {
    std::fprintf(stderr, "podshimctl resize: %s\n", err.c_str());
    return kExitUsage;
  }
  json resources = json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;
  json body;
  if (pod) {
    if (!policy.empty()) {
      std::fprintf(stderr, "podshimctl resize: pods have no resizePolicy (KEP-5419); drop --policy\n");
      return kExitUsage;
    }
    body = {{"resources", resources}};
  } else {
    body = json::object();
    if (!resources.empty()) body["resources"] = resources;
    if (!policy.empty()) body["resizePolicy"] = policy;
  }
  std::string target = (pod ? "/v1/pods/" : "/v1/containers/") + id + "/resize";
  int rc = kExitOk;
  json j;
  if (!call(g, "POST", target, body.dump(), &j, &rc)) return rc;
  std::string result = j.value("result", "");
  if (result == "in_progress" && j.contains("generations") && j["generations"].is_object()) {
    // The final outcome is the worst of the containers' outcomes.
    std::string final_result = "applied", final_msg;
    for (const auto& [cid, gen] : j["generations"].items()) {
      auto [o, msg] = wait_outcome(g, cid, gen.get<int64_t>(), &rc);
      if (o != "applied" && o != "unchanged") {
        final_result = o;
        final_msg = msg;
      }
    }
    result = final_result;
    j["result"] = result;
    j["message"] = final_msg;
  }
  if (*f == Format::Json || *f == Format::Yaml) {
    std::cout << render_document(j, *f);
  } else {
    std::printf("%s: %s", id.c_str(), result.c_str());
    if (j.contains("generations") && j["generations"].is_object()) {
      for (const auto& [cid, gen] : j["generations"].items()) {
        if (!pod) std::printf(" (generation %lld)", static_cast<long long>(gen.get<int64_t>()));
      }
    }
    std::string msg = j.value("message", "");
    if (!msg.empty()) std::printf(": %s", msg.c_str());
    std::printf("\n");
    if (*f == Format::Wide && j.contains("report") && j["report"].is_object()) {
      // What the engine saw: reclaimed bytes, duration, memory.events deltas.
      const auto& r = j["report"];
      std::printf("report: duration %lldms, reclaimed %lld bytes, growth %lld bytes/s",
                  static_cast<long long>(r.value("durationMs", int64_t{0})),
                  static_cast<long long>(r.value("bytesReclaimed", int64_t{0})),
                  static_cast<long long>(r.value("growthBytesPerSecond", int64_t{0})));
      if (r.contains("memoryEvents") && r["memoryEvents"].is_object()) {
        for (const auto& [cg, e] : r["memoryEvents"].items())
          std::printf("; %s oom %lld oom_kill %lld high %lld max %lld", cg.c_str(),
                      static_cast<long long>(e.value("oom", int64_t{0})),
                      static_cast<long long>(e.value("oomKill", int64_t{0})),
                      static_cast<long long>(e.value("high", int64_t{0})),
                      static_cast<long long>(e.value("max", int64_t{0})));
      }
      std::printf("\n");
    }
  }
  return exit_for_result(result);
}

Flag quantity_flag(std::string name, std::string help) {
  return Flag{.name = std::move(name), .value = "Q", .help = std::move(help)};
}

const CommandRegistrar reg(Command{
    .name = "resize",
    .summary = "resize a container (or a pod with --pod) through podshimd",
    .run = run_resize,
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
