// Shared plumbing for podshimctl's status-socket commands (status, get,
// resize, watch): global options, the request helper, exit-code mapping.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "shim/ctl/registry.h"
#include "shim/status/client.h"

namespace podshim::ctl {

// Set by main from --socket / -o before the subcommand runs (environment, so
// subcommands written by others can read them too).
inline constexpr const char* kEnvSocket = "PODSHIMCTL_SOCKET";
inline constexpr const char* kEnvOutput = "PODSHIMCTL_OUTPUT";

inline std::string socket_path() {
  const char* s = std::getenv(kEnvSocket);
  return s && *s ? s : std::string(core::kDefaultSocketPath);
}

inline bool output_json() {
  const char* o = std::getenv(kEnvOutput);
  return o && std::string_view(o) == "json";
}

// Performs a request; on transport failure prints why and sets *exit_code to
// kExitUnavailable. On an HTTP error prints the server's message and maps
// 404 → kExitNotFound, 400 → kExitFailure, others → kExitFailure.
inline bool call(std::string_view method, std::string_view target, std::string_view body,
                 nlohmann::json* out, int* exit_code) {
  status::ClientOptions o;
  o.socket_path = socket_path();
  auto r = status::http_request(o, method, target, body);
  if (!r) {
    std::fprintf(stderr, "podshimctl: podshimd unreachable at %s: %s\n", o.socket_path.c_str(),
                 r.error().message.c_str());
    *exit_code = kExitUnavailable;
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status >= 400) {
    std::string msg = !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()
                          ? j["error"].get<std::string>()
                          : r->body;
    std::fprintf(stderr, "podshimctl: %s (HTTP %d)\n", msg.c_str(), r->status);
    *exit_code = r->status == 404 ? kExitNotFound : kExitFailure;
    return false;
  }
  if (out) *out = j.is_discarded() ? nlohmann::json(r->body) : j;
  return true;
}

}  // namespace podshim::ctl

namespace podshim::ctl {

// Consumes "-o FORMAT"/"--socket PATH" that appear after the subcommand too,
// so `podshimctl get containers -o json` works. Returns false on a bad value.
inline bool take_common_option(int argc, char** argv, int* i) {
  std::string_view a = argv[*i];
  if ((a == "-o" || a == "--output" || a == "--socket") && *i + 1 < argc) {
    std::string_view v = argv[++*i];
    if (a == "--socket") {
      setenv(kEnvSocket, argv[*i], 1);
      return true;
    }
    if (v != "json" && v != "table") return false;
    setenv(kEnvOutput, argv[*i], 1);
    return true;
  }
  return false;
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

// "PodResizeInProgress/Error" etc., or "-".
inline std::string fmt_conditions(const nlohmann::json& c) {
  std::string out;
  if (c.contains("conditions") && c["conditions"].is_array()) {
    for (const auto& k : c["conditions"]) {
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

}  // namespace podshim::ctl
