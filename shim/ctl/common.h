// Shared plumbing for podshimctl's status-socket commands (status, get,
// resize, watch): the request helper, the HTTP status → exit code mapping,
// quantity and condition formatting.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

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

// Performs a request; on transport failure prints why and sets *exit_code to
// kExitNoAccess. On an HTTP error prints the server's message and sets
// *exit_code by exit_for_http_status.
inline bool call(const GlobalOptions& g, std::string_view method, std::string_view target, std::string_view body,
                 nlohmann::json* out, int* exit_code) {
  status::ClientOptions o;
  o.socket_path = socket_path(g);
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

inline std::string fmt_cpu(const nlohmann::json& r, const char* key) {
  if (!r.is_object() || !r.contains(key) || !r[key].is_number_integer()) return "-";
  int64_t m = r[key].get<int64_t>();
  return m % 1000 == 0 ? std::to_string(m / 1000) : std::to_string(m) + "m";
}

inline std::string fmt_mem(const nlohmann::json& r, const char* key) {
  if (!r.is_object() || !r.contains(key) || !r[key].is_number_integer()) return "-";
  int64_t b = r[key].get<int64_t>();
  static constexpr struct { const char* s; int shift; } u[] = {{"Gi", 30}, {"Mi", 20}, {"Ki", 10}};
  for (const auto& x : u) {
    if (b > 0 && b % (int64_t{1} << x.shift) == 0) return std::to_string(b >> x.shift) + x.s;
  }
  return std::to_string(b);
}

// The kubelet's two resize condition types (KEP-1287 §Resize Status). A
// container's `conditions` may hold others (PodshimDrift): those are not
// resize state and are never shown or counted as such.
inline bool is_resize_condition(const nlohmann::json& k) {
  if (!k.is_object()) return false;
  const std::string t = k.value("type", "");
  return t == "PodResizePending" || t == "PodResizeInProgress";
}

// Where a container's resize stands: "Pending/Deferred", "InProgress" (an
// actuation runs), "InProgress/Error" (the last one failed or was refused),
// ",RestartRequired", or "-". Drift is not in it (fmt_drift).
inline std::string fmt_conditions(const nlohmann::json& c) {
  std::string out;
  if (c.contains("conditions") && c["conditions"].is_array()) {
    for (const auto& k : c["conditions"]) {
      if (!is_resize_condition(k)) continue;
      if (!out.empty()) out += ",";
      std::string t = k.value("type", "");
      std::string r = k.value("reason", "");
      out += t == "PodResizePending" ? "Pending" : "InProgress";
      if (!r.empty()) out += "/" + r;
    }
  }
  if (c.value("restartRequired", false)) out += out.empty() ? "RestartRequired" : ",RestartRequired";
  return out.empty() ? "-" : out;
}

// The files whose kernel value differs from what podshim last gave them
// ("memory.max,cpu.max"), from the container's `drift` list, or "-".
inline std::string fmt_drift(const nlohmann::json& c) {
  std::string out;
  if (c.contains("drift") && c["drift"].is_array()) {
    for (const auto& d : c["drift"]) {
      if (!d.is_object()) continue;
      if (!out.empty()) out += ",";
      out += d.value("file", d.value("resource", "?"));
    }
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

inline ContainerStateCounts count_container_states(const nlohmann::json& items) {
  ContainerStateCounts n;
  if (!items.is_array()) return n;
  for (const auto& c : items) {
    if (!c.is_object()) continue;
    bool pending = false, running = false, error = false;
    if (c.contains("conditions") && c["conditions"].is_array()) {
      for (const auto& k : c["conditions"]) {
        if (!is_resize_condition(k)) continue;
        if (k.value("type", "") == "PodResizePending") {
          pending = true;
        } else if (k.value("reason", "").empty()) {
          running = true;
        } else {
          error = true;
        }
      }
    }
    n.resize_pending += pending;
    n.resize_in_progress += running;
    n.resize_error += error;
    n.restart_required += c.value("restartRequired", false);
    n.drifting += c.contains("drift") && c["drift"].is_array() && !c["drift"].empty();
  }
  return n;
}

}  // namespace podshim::ctl
