// podshimctl watch: follow podshimd's event stream (GET /v1/watch).
#include <cstdio>

#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

using nlohmann::json;

int run_watch(int argc, char** argv) {
  long max_events = -1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::puts("Usage: podshimctl watch [--count N] [-o json]\n\n"
                "Prints podshimd's events as they happen, in order: one JSON object per line\n"
                "with -o json, a summary line otherwise. The first event is a Bookmark with the\n"
                "sequence number the stream starts after. --count N exits after N events.");
      return kExitOk;
    }
    if (a == "--count" && i + 1 < argc) {
      char* end = nullptr;
      max_events = std::strtol(argv[++i], &end, 10);
      if (*end || max_events <= 0) {
        std::fprintf(stderr, "podshimctl watch: --count wants a positive number\n");
        return kExitUsage;
      }
      continue;
    }
    if (!take_common_option(argc, argv, &i)) {
      std::fprintf(stderr, "podshimctl watch: unknown argument '%s'\n", argv[i]);
      return kExitUsage;
    }
  }
  status::ClientOptions o;
  o.socket_path = socket_path();
  bool json_out = output_json();
  long seen = 0;
  auto r = status::http_stream_lines(o, "/v1/watch", [&](std::string_view line) {
    if (json_out) {
      std::printf("%.*s\n", static_cast<int>(line.size()), line.data());
    } else {
      json e = json::parse(line, nullptr, false);
      if (e.is_discarded()) return true;
      std::string id, extra;
      if (e.contains("container")) {
        const auto& c = e["container"];
        id = c.value("id", "");
        extra = " gen=" + std::to_string(c.value("generation", 0)) + " " + fmt_conditions(c);
      } else if (e.contains("pod")) {
        id = e["pod"].value("uid", "");
      }
      std::printf("%-8llu %-18s %s%s\n", static_cast<unsigned long long>(e.value("seq", 0ULL)),
                  e.value("type", "").c_str(), id.c_str(), extra.c_str());
    }
    std::fflush(stdout);
    return max_events < 0 || ++seen < max_events;
  });
  if (!r) {
    bool unreachable = r.error().code != EPROTO;
    std::fprintf(stderr, "podshimctl: %s%s\n", unreachable ? "podshimd unreachable: " : "",
                 r.error().message.c_str());
    return unreachable ? kExitUnavailable : kExitFailure;
  }
  return kExitOk;
}

const CommandRegistrar reg("watch", "stream podshimd's events (resizes, registrations) as they happen", run_watch);

}  // namespace
}  // namespace podshim::ctl
