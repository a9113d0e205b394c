// podshimctl status: is podshimd up, ready, and how many objects it holds.
#include <cstdio>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

// The cpu.weight formula per runtime, from podshim_cpu_weight_formula and
// _samples in /metrics (weight_formula: auto learns it from the runtime).
nlohmann::json weight_formulas(const std::string& metrics) {
  static const std::regex series(R"re(^podshim_cpu_weight_formula(_samples)?\{([^}]*)\} (\S+)$)re");
  static const std::regex label(R"re((\w+)="((?:[^"\\]|\\.)*)")re");
  std::map<std::string, nlohmann::json> by_runtime;
  size_t start = 0;
  while (start < metrics.size()) {
    size_t end = metrics.find('\n', start);
    if (end == std::string::npos) end = metrics.size();
    std::string line = metrics.substr(start, end - start);
    start = end + 1;
    std::smatch m;
    if (!std::regex_match(line, m, series)) continue;
    std::map<std::string, std::string> l;
    std::string labels = m[2];
    for (std::sregex_iterator it(labels.begin(), labels.end(), label), e; it != e; ++it) l[(*it)[1]] = (*it)[2];
    auto& j = by_runtime[l["runtime"]];
    j["runtime"] = l["runtime"];
    double v = std::stod(m[3]);
    if (m[1].matched)
      j["samples"][l["vote"]] = static_cast<uint64_t>(v);
    else {
      j["formula"] = l["formula"];
      j["source"] = l["source"];
      j["current"] = v == 1;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [rt, j] : by_runtime)
    if (j.contains("formula")) out.push_back(std::move(j));
  return out;
}

int run_status(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::puts("Usage: podshimctl status [-o json]\n\nShows whether podshimd is healthy and ready, and how "
                "many pods and containers it tracks, and the cpu.weight formula it reads container cgroups with\n"
                "(per runtime; with weight_formula: auto, learned from the weights the runtime wrote).");
      return kExitOk;
    }
    if (!take_common_option(argc, argv, &i)) {
      std::fprintf(stderr, "podshimctl status: unknown argument '%s'\n", argv[i]);
      return kExitUsage;
    }
  }
  status::ClientOptions o;
  o.socket_path = socket_path();
  auto health = status::http_request(o, "GET", "/healthz");
  if (!health) {
    std::fprintf(stderr, "podshimctl: podshimd unreachable at %s: %s\n", o.socket_path.c_str(),
                 health.error().message.c_str());
    return kExitUnavailable;
  }
  auto ready = status::http_request(o, "GET", "/readyz");
  int rc = kExitOk;
  nlohmann::json pods, containers;
  if (!call("GET", "/v1/pods", {}, &pods, &rc) || !call("GET", "/v1/containers", {}, &containers, &rc)) return rc;
  size_t pending = 0, in_progress = 0, restart = 0;
  for (const auto& c : containers["items"]) {
    for (const auto& k : c["conditions"]) (k["type"] == "PodResizePending" ? pending : in_progress)++;
    if (c.value("restartRequired", false)) restart++;
  }
  bool is_ready = ready && ready->status == 200;
  auto metrics = status::http_request(o, "GET", "/metrics");
  nlohmann::json formulas = metrics && metrics->status == 200 ? weight_formulas(metrics->body) : nlohmann::json::array();
  nlohmann::json j{{"socket", o.socket_path},
                   {"healthy", health->status == 200},
                   {"ready", is_ready},
                   {"pods", pods["items"].size()},
                   {"containers", containers["items"].size()},
                   {"resizePending", pending},
                   {"resizeInProgress", in_progress},
                   {"restartRequired", restart},
                   {"weightFormulas", formulas}};
  if (output_json()) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("socket:             %s\n", o.socket_path.c_str());
    std::printf("healthy:            %s\n", health->status == 200 ? "yes" : "no");
    std::printf("ready:              %s\n", is_ready ? "yes" : "no");
    std::printf("pods:               %zu\n", pods["items"].size());
    std::printf("containers:         %zu\n", containers["items"].size());
    std::printf("resize pending:     %zu\n", pending);
    std::printf("resize in progress: %zu\n", in_progress);
    std::printf("restart required:   %zu\n", restart);
    for (const auto& f : formulas) {
      std::string rt = f.value("runtime", "");
      std::string samples;
      if (f.contains("samples"))
        samples = fmt::format("; containers matching linear {}, quadratic {}, both {}, neither {}",
                              f["samples"].value("linear", 0), f["samples"].value("quadratic", 0),
                              f["samples"].value("both", 0), f["samples"].value("neither", 0));
      std::printf("cpu.weight formula: %s (%s%s%s)%s\n", f.value("formula", "").c_str(),
                  f.value("source", "").c_str(), rt.empty() ? "" : ", ", rt.c_str(),
                  f.value("current", false) ? samples.c_str() : "; earlier runtime");
    }
  }
  return health->status == 200 && is_ready ? kExitOk : kExitFailure;
}

const CommandRegistrar reg("status", "show podshimd's health, readiness and counts", run_status);

}  // namespace
}  // namespace podshim::ctl
