// podshimctl status: is podshimd up, ready, and how many objects it holds.
#include <cstdio>
#include <iostream>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "base/str.h"
#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

const std::vector<Format> kFormats = {Format::Table, Format::Wide, Format::Json, Format::Yaml};

struct Series {
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Every series of the families in `names` in a Prometheus text exposition.
std::multimap<std::string, Series> series_of(const std::string& metrics, const std::regex& names) {
  static const std::regex line_re(R"re(^(\w+)(?:\{([^}]*)\})? (\S+)$)re");
  static const std::regex label(R"re((\w+)="((?:[^"\\]|\\.)*)")re");
  std::multimap<std::string, Series> out;
  for (std::string_view l : str::split(metrics, '\n')) {
    const std::string line(l);  // std::smatch refers into it
    std::smatch m;
    if (line.empty() || line[0] == '#' || !std::regex_match(line, m, line_re)) continue;
    if (!std::regex_match(m[1].str(), names)) continue;
    Series s;
    std::string labels = m[2];
    for (std::sregex_iterator it(labels.begin(), labels.end(), label), e; it != e; ++it) s.labels[(*it)[1]] = (*it)[2];
    try {
      s.value = std::stod(m[3]);
    } catch (...) {
      continue;
    }
    out.emplace(m[1], std::move(s));
  }
  return out;
}

// The cpu.weight formula per runtime, from podshim_cpu_weight_formula and
// _samples in /metrics (weight_formula: auto learns it from the runtime).
nlohmann::json weight_formulas(const std::multimap<std::string, Series>& all) {
  std::map<std::string, nlohmann::json> by_runtime;
  for (const auto& [name, s] : all) {
    if (name != "podshim_cpu_weight_formula" && name != "podshim_cpu_weight_formula_samples") continue;
    auto l = s.labels;
    auto& j = by_runtime[l["runtime"]];
    j["runtime"] = l["runtime"];
    if (name == "podshim_cpu_weight_formula_samples") {
      j["samples"][l["vote"]] = static_cast<uint64_t>(s.value);
    } else {
      j["formula"] = l["formula"];
      j["source"] = l["source"];
      j["current"] = s.value == 1;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [rt, j] : by_runtime)
    if (j.contains("formula")) out.push_back(std::move(j));
  return out;
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

// The table (-o table, -o wide) of what run_status gathered in `j`.
// `not_ready`: why podshimd is not ready, when it is not.
void print_status(const nlohmann::json& j, Format f, const std::string& not_ready) {
  std::printf("socket:             %s\n", j.value("socket", "").c_str());
  std::printf("healthy:            %s\n", yes_no(j.value("healthy", false)).c_str());
  std::printf("ready:              %s\n", yes_no(j.value("ready", false)).c_str());
  if (f == Format::Wide && !not_ready.empty()) std::printf("not ready because:  %s\n", not_ready.c_str());
  std::printf("pods:               %zu\n", j.value("pods", size_t{0}));
  std::printf("containers:         %zu\n", j.value("containers", size_t{0}));
  std::printf("resize pending:     %zu\n", j.value("resizePending", size_t{0}));
  std::printf("resize in progress: %zu\n", j.value("resizeInProgress", size_t{0}));
  std::printf("resize error:       %zu\n", j.value("resizeError", size_t{0}));
  std::printf("restart required:   %zu\n", j.value("restartRequired", size_t{0}));
  std::printf("drifting:           %zu\n", j.value("drifting", size_t{0}));
  for (const auto& fm : j.at("weightFormulas")) {
    std::string rt = fm.value("runtime", "");
    std::string samples;
    if (fm.contains("samples"))
      samples = fmt::format("; containers matching linear {}, quadratic {}, both {}, neither {}",
                            fm["samples"].value("linear", 0), fm["samples"].value("quadratic", 0),
                            fm["samples"].value("both", 0), fm["samples"].value("neither", 0));
    std::printf("cpu.weight formula: %s (%s%s%s)%s\n", fm.value("formula", "").c_str(),
                fm.value("source", "").c_str(), rt.empty() ? "" : ", ", rt.c_str(),
                fm.value("current", false) ? samples.c_str() : "; earlier runtime");
  }
  if (f == Format::Wide) {
    if (j.contains("nri")) {
      bool on = j["nri"]["enabled"];
      std::printf("nri:                %s\n",
                  !on ? "off (hooks-only mode)" : j["nri"].value("connected", false) ? "enabled, connected"
                                                                                     : "enabled, not connected");
    }
    if (j.contains("podshimdBuild")) {
      std::string b;
      for (const auto& [k, v] : j["podshimdBuild"].items()) b += (b.empty() ? "" : " ") + k + "=" + v.get<std::string>();
      std::printf("podshimd build:     %s\n", b.c_str());
    }
    std::printf("podshimctl version: %.*s\n", static_cast<int>(version().size()), version().data());
  }
}

int run_status(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  int rc = parse_command_line("status", argc, argv, &g, [&](int i) {
    usage_error_try_help("status", "unknown argument '" + std::string(argv[i]) + "'");
    return false;
  });
  if (rc != kExitOk) return rc;
  auto f = command_format("status", g, kFormats, Format::Table);
  if (!f) return kExitUsage;
  const status::ClientOptions o = client_options(g);
  auto health = status::http_request(o, "GET", "/healthz");
  if (!health) {
    std::fprintf(stderr, "podshimctl: podshimd unreachable at %s: %s\n", o.socket_path.c_str(),
                 health.error().message.c_str());
    return kExitNoAccess;
  }
  if (health->status == 403) {
    std::fprintf(stderr, "podshimctl: podshimd denied GET /healthz (HTTP 403)\n");
    return kExitNoAccess;
  }
  auto ready = status::http_request(o, "GET", "/readyz");
  nlohmann::json pods, containers;
  if (!call(g, "GET", "/v1/pods", {}, &pods, &rc) || !call(g, "GET", "/v1/containers", {}, &containers, &rc))
    return rc;
  auto items = read_containers(containers["items"]);
  if (!items) {
    std::fprintf(stderr, "podshimctl status: %s\n", items.error().message.c_str());
    return kExitFailure;
  }
  const ContainerStateCounts n = count_container_states(*items);
  bool is_ready = ready && ready->status == 200;
  auto metrics = status::http_request(o, "GET", "/metrics");
  static const std::regex families(
      "podshim_cpu_weight_formula(_samples)?|podshim_nri_enabled|podshim_nri_connected|podshim_build_info");
  auto all = metrics && metrics->status == 200 ? series_of(metrics->body, families)
                                               : std::multimap<std::string, Series>{};
  nlohmann::json formulas = weight_formulas(all);
  nlohmann::json j{{"socket", o.socket_path},
                   {"healthy", health->status == 200},
                   {"ready", is_ready},
                   {"pods", pods["items"].size()},
                   {"containers", containers["items"].size()},
                   {"resizePending", n.resize_pending},
                   {"resizeInProgress", n.resize_in_progress},
                   {"resizeError", n.resize_error},
                   {"restartRequired", n.restart_required},
                   {"drifting", n.drifting},
                   {"weightFormulas", formulas}};
  // Node-level facts from /metrics, when podshimd exports them.
  if (auto e = all.find("podshim_nri_enabled"); e != all.end()) {
    j["nri"]["enabled"] = e->second.value == 1;
    if (auto c = all.find("podshim_nri_connected"); c != all.end()) j["nri"]["connected"] = c->second.value == 1;
  }
  if (auto b = all.find("podshim_build_info"); b != all.end()) j["podshimdBuild"] = b->second.labels;
  if (is_document(*f)) {
    std::cout << render_document(j, *f);
  } else {
    print_status(j, *f, !is_ready && ready ? ready->body.substr(0, ready->body.find('\n')) : std::string());
  }
  return health->status == 200 && is_ready ? kExitOk : kExitFailure;
}

const CommandRegistrar reg("status", "show podshimd's health, readiness and counts", run_status, Command{
    .description =
        "Shows whether podshimd is healthy and ready, how many pods and containers it tracks,\n"
        "how many containers have a resize pending (PodResizePending), one being applied now\n"
        "(PodResizeInProgress without a reason), one that failed or was refused\n"
        "(PodResizeInProgress/Error), a restart required, and how many drift (the kernel\n"
        "holds a value other than the one podshim last gave it; not a resize state),\n"
        "and the cpu.weight formula it reads container cgroups with (per runtime; with\n"
        "weight_formula: auto, learned from the weights the runtime wrote). -o wide adds why\n"
        "podshimd is not ready, NRI's state and the versions. Exit status 1 when podshimd is\n"
        "not healthy or not ready (the DaemonSet's probes run this).\n",
    .flags = {socket_flag()},
    .formats = kFormats,
    .examples = {"podshimctl status", "podshimctl status -o wide", "podshimctl status -o json"},
});

}  // namespace
}  // namespace podshim::ctl
