// podshimctl status: is podshimd up, ready, and how many objects it holds.
#include <cstdio>

#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

int run_status(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::puts("Usage: podshimctl status [-o json]\n\nShows whether podshimd is healthy and ready, and how "
                "many pods and containers it tracks.");
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
  nlohmann::json j{{"socket", o.socket_path},
                   {"healthy", health->status == 200},
                   {"ready", is_ready},
                   {"pods", pods["items"].size()},
                   {"containers", containers["items"].size()},
                   {"resizePending", pending},
                   {"resizeInProgress", in_progress},
                   {"restartRequired", restart}};
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
  }
  return health->status == 200 && is_ready ? kExitOk : kExitFailure;
}

const CommandRegistrar reg("status", "show podshimd's health, readiness and counts", run_status);

}  // namespace
}  // namespace podshim::ctl
