// Shared plumbing for podshimctl's status-socket commands (status, get,
// resize, watch): the request helper, the HTTP status → exit code mapping,
// quantity and condition formatting.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/result.h"
#include "shim/core/json.h"
#include "shim/ctl/cli.h"
#include "shim/ctl/registry.h"
#include "shim/status/client.h"

namespace podshim::ctl {

inline std::string socket_path(const GlobalOptions& o) {
  return o.socket.empty() ? std::string(core::kDefaultSocketPath) : o.socket;
}

// The exit code for an HTTP error status from podshimd (registry.h's table).
inline int exit_for_http_status(int status) {
  switch (status) {
    case 403: return kExitNoAccess;
    case 404: return kExitNotFound;
    case 409: return kExitNotAdmitted;
    default: return status >= 400 ? kExitFailure : kExitOk;
  }
}

// Where and how podshimctl reaches podshimd's status socket.
inline status::ClientOptions client_options(const GlobalOptions& g) {
  status::ClientOptions o;
  o.socket_path = socket_path(g);
  return o;
}

// Performs a request; on transport failure prints why and sets *exit_code to
// kExitNoAccess. On an HTTP error prints the server's message and sets
// *exit_code by exit_for_http_status.
inline bool call(const GlobalOptions& g, std::string_view method, std::string_view target, std::string_view body,
                 nlohmann::json* out, int* exit_code) {
  const status::ClientOptions o = client_options(g);
  auto r = status::http_request(o, method, target, body);
  if (!r) {
    std::fprintf(stderr, "podshimctl: podshimd unreachable at %s: %s\n", o.socket_path.c_str(),
                 r.error().message.c_str());
    *exit_code = kExitNoAccess;
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status >= 400) {
    std::string msg = !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()
                          ? j["error"].get<std::string>()
                          : r->body;
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    std::fprintf(stderr, "podshimctl: %s (HTTP %d)\n", msg.c_str(), r->status);
    *exit_code = exit_for_http_status(r->status);
    return false;
  }
  if (out) *out = j.is_discarded() ? nlohmann::json(r->body) : j;
  return true;
}

// Parses a command's arguments after argv[0]: -h/--help is left to
// handle_help, the global options (-o, --socket) go to *g, everything else to
// `other(i)`, which returns false to stop with kExitUsage (it printed why).
// Returns kExitOk or kExitUsage.
template <typename Other>
int parse_command_line(std::string_view who, int argc, char** argv, GlobalOptions* g, Other&& other) {
  for (int i = 1; i < argc; ++i) {
    std::string err;
    switch (take_global_option(argc, argv, &i, g, &err)) {
      case OptionResult::Taken: continue;
      case OptionResult::Error:
        std::fprintf(stderr, "podshimctl %.*s: %s\n", static_cast<int>(who.size()), who.data(), err.c_str());
        return kExitUsage;
      case OptionResult::NotMine: break;
    }
    if (!other(i)) return kExitUsage;
  }
  return kExitOk;
}

inline std::string fmt_cpu(const std::optional<int64_t>& m) {
  if (!m) return "-";
  return *m % 1000 == 0 ? std::to_string(*m / 1000) : std::to_string(*m) + "m";
}

inline std::string fmt_mem(const std::optional<int64_t>& b) {
  if (!b) return "-";
  static constexpr struct { const char* s; int shift; } u[] = {{"Gi", 30}, {"Mi", 20}, {"Ki", 10}};
  for (const auto& x : u) {
    if (*b > 0 && *b % (int64_t{1} << x.shift) == 0) return std::to_string(*b >> x.shift) + x.s;
  }
  return std::to_string(*b);
}

// "cpu REQ/LIM, memory REQ/LIM" and the short form "REQ/LIM" of each.
inline std::string fmt_cpu_pair(const core::K8sResources& r) {
  return fmt_cpu(r.cpu_request_milli) + "/" + fmt_cpu(r.cpu_limit_milli);
}
inline std::string fmt_mem_pair(const core::K8sResources& r) {
  return fmt_mem(r.memory_request_bytes) + "/" + fmt_mem(r.memory_limit_bytes);
}

// The objects of a list answer ({"items": [...]}, or a pod's "containers"),
// read with the model's own reader (shim/core/json.h), as podshimd's store
// reads its state: an item it cannot read is an error naming the item.
template <typename T>
Result<std::vector<T>> read_items(const nlohmann::json& items, Result<T> (*read)(const nlohmann::json&),
                                  std::string_view what) {
  std::vector<T> out;
  if (!items.is_array()) return out;
  out.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    auto x = read(items[i]);
    if (!x) return Unexpected(x.error().wrap(fmt::format("podshimd's answer: {} {}", what, i)));
    out.push_back(std::move(*x));
  }
  return out;
}
inline Result<std::vector<core::Container>> read_containers(const nlohmann::json& items) {
  return read_items<core::Container>(items, &core::container_from_json, "container");
}

// Where a container's resize stands: "Pending/Deferred", "InProgress" (an
// actuation runs), "InProgress/Error" (the last one failed or was refused),
// ",RestartRequired", or "-". Drift is not resize state: fmt_drift.
inline std::string fmt_conditions(const core::Container& c) {
  std::string out;
  if (const auto& p = c.conditions.pending) out = "Pending" + (p->reason.empty() ? "" : "/" + p->reason);
  if (const auto& ip = c.conditions.in_progress)
    out += (out.empty() ? "" : ",") + std::string("InProgress") + (ip->reason.empty() ? "" : "/" + ip->reason);
  if (c.restart_required) out += out.empty() ? "RestartRequired" : ",RestartRequired";
  return out.empty() ? "-" : out;
}

// The files whose kernel value differs from what podshim last gave them
// ("memory.max,cpu.max"), or "-".
inline std::string fmt_drift(const core::Container& c) {
  std::string out;
  for (const auto& d : c.drift) {
    if (!out.empty()) out += ",";
    out += d.file.empty() ? d.resource : d.file;
  }
  return out.empty() ? "-" : out;
}

// What `podshimctl status` counts over GET /v1/containers' items. Each
// container is counted once per state it is in; drift is its own count.
struct ContainerStateCounts {
  size_t resize_pending = 0;      // PodResizePending (Deferred or Infeasible)
  size_t resize_in_progress = 0;  // PodResizeInProgress, no reason: an actuation runs
  size_t resize_error = 0;        // PodResizeInProgress/Error: the last actuation failed or was refused
  size_t restart_required = 0;
  size_t drifting = 0;            // a non-empty `drift` list
};

inline ContainerStateCounts count_container_states(const std::vector<core::Container>& items) {
  ContainerStateCounts n;
  for (const auto& c : items) {
    const auto& ip = c.conditions.in_progress;
    n.resize_pending += c.conditions.pending.has_value();
    n.resize_in_progress += ip && ip->reason.empty();
    n.resize_error += ip && !ip->reason.empty();
    n.restart_required += c.restart_required;
    n.drifting += !c.drift.empty();
  }
  return n;
}

}  // namespace podshim::ctl
