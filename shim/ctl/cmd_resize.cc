// podshimctl resize: ask podshimd to resize a container (or a pod's
// pod-level resources with --pod), the same request the API takes.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

#include "base/quantity.h"
#include "base/str.h"
#include "cgroup/convert.h"
#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "Usage: podshimctl resize ID [--cpu Q] [--cpu-limit Q] [--memory Q] [--memory-request Q]\n"
    "                         [--policy cpu=NotRequired,memory=RestartContainer] [--pod] [-o json]\n"
    "\n"
    "Resizes container ID (or, with --pod, pod ID's pod-level resources).\n"
    "  --cpu Q             cpu request (also --cpu-request), e.g. 250m, 0.5, 2\n"
    "  --cpu-limit Q       cpu limit\n"
    "  --memory Q          memory limit (also --memory-limit), e.g. 256Mi, 1Gi\n"
    "  --memory-request Q  memory request\n"
    "  --policy LIST       resizePolicy per resource: NotRequired or RestartContainer\n"
    "  --pod               ID is a pod uid; resize pod-level resources\n"
    "A quantity the kernel cannot take (a cpu limit above 175921860444m, a memory\n"
    "limit below one page) is refused here, exit status 2.\n"
    "Values not given keep their current setting. A resize still running (NRI mode:\n"
    "the runtime applies it) is waited for. Exit status 0 when applied (or\n"
    "allocated pending a restart that podshim never performs itself), 1 when\n"
    "deferred, infeasible or actuation failed, 5 when applied but the kernel\n"
    "OOM-killed in the container during the resize (applied_with_oom_kill).";

// Applied, but memory.events counted an OOM kill during the resize.
constexpr int kExitAppliedWithOomKill = 5;

// Waits for an in-progress resize of container `id` at generation `gen`:
// returns its final outcome and message (or "in_progress" after ~60 s).
std::pair<std::string, std::string> wait_outcome(const std::string& id, int64_t gen, int* rc) {
  for (int i = 0; i < 1200; ++i) {
    json c;
    if (!call("GET", "/v1/containers/" + id, "", &c, rc)) return {"error", "reading the container failed"};
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

int run_resize(int argc, char** argv) {
  std::string id;
  bool pod = false;
  json requests = json::object(), limits = json::object(), policy = json::array();
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::puts(kUsage);
      return kExitOk;
    }
    if (a == "--pod") {
      pod = true;
      continue;
    }
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "podshimctl resize: %s needs a value\n", what);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--cpu" || a == "--cpu-request" || a == "--cpu-limit") {
      const char* v = value(argv[i]);
      if (!v) return kExitUsage;
      auto q = quantity::parse_cpu_milli(v);
      if (!q) {
        std::fprintf(stderr, "podshimctl resize: %s: %s\n", argv[i - 1], q.error().message.c_str());
        return kExitUsage;
      }
      cgroup::K8sResources one;
      (a == "--cpu-limit" ? one.cpu_limit_milli : one.cpu_request_milli) = *q;
      if (auto k = cgroup::check_kernel_limits(one); !k) {
        std::fprintf(stderr, "podshimctl resize: %s %s: %s\n", argv[i - 1], v, k.error().message.c_str());
        return kExitUsage;
      }
      (a == "--cpu-limit" ? limits : requests)["cpu"] = v;
      continue;
    }
    if (a == "--memory" || a == "--memory-limit" || a == "--memory-request") {
      const char* v = value(argv[i]);
      if (!v) return kExitUsage;
      auto q = quantity::parse_memory_bytes(v);
      if (!q) {
        std::fprintf(stderr, "podshimctl resize: %s: %s\n", argv[i - 1], q.error().message.c_str());
        return kExitUsage;
      }
      cgroup::K8sResources one;
      (a == "--memory-request" ? one.memory_request_bytes : one.memory_limit_bytes) = *q;
      if (auto k = cgroup::check_kernel_limits(one); !k) {
        std::fprintf(stderr, "podshimctl resize: %s %s: %s\n", argv[i - 1], v, k.error().message.c_str());
        return kExitUsage;
      }
      (a == "--memory-request" ? requests : limits)["memory"] = v;
      continue;
    }
    if (a == "--policy") {
      const char* v = value("--policy");
      if (!v) return kExitUsage;
      for (auto item : str::split(v, ',')) {
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
      if (!take_common_option(argc, argv, &i)) {
        std::fprintf(stderr, "podshimctl resize: unknown option '%s'\n", argv[i]);
        return kExitUsage;
      }
      continue;
    }
    if (!id.empty()) {
      std::fprintf(stderr, "podshimctl resize: more than one ID given\n");
      return kExitUsage;
    }
    id = std::string(a);
  }
  if (id.empty() || (requests.empty() && limits.empty() && policy.empty())) {
    std::fprintf(stderr, "%s\n", kUsage);
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
  if (!call("POST", target, body.dump(), &j, &rc)) return rc;
  std::string result = j.value("result", "");
  if (result == "in_progress" && j.contains("generations") && j["generations"].is_object()) {
    // The final outcome is the worst of the containers' outcomes.
    std::string final_result = "applied", final_msg;
    for (const auto& [cid, gen] : j["generations"].items()) {
      auto [o, msg] = wait_outcome(cid, gen.get<int64_t>(), &rc);
      if (o != "applied" && o != "unchanged") {
        final_result = o;
        final_msg = msg;
      }
    }
    result = final_result;
    j["result"] = result;
    j["message"] = final_msg;
  }
  if (output_json()) {
    std::printf("%s\n", j.dump(2).c_str());
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
  }
  if (result == "applied_with_oom_kill") return kExitAppliedWithOomKill;
  return result == "applied" || result == "unchanged" || result == "restart_required" ? kExitOk : kExitFailure;
}

const CommandRegistrar reg("resize", "resize a container (or a pod with --pod) through podshimd", run_resize);

}  // namespace
}  // namespace podshim::ctl
