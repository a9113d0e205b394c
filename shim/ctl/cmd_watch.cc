// podshimctl watch: follow podshimd's event stream (GET /v1/watch).
#include <cstdio>
#include <iostream>

#include "shim/ctl/common.h"

namespace podshim::ctl {
namespace {

using nlohmann::json;

const std::vector<Format> kFormats = {Format::Table, Format::Wide, Format::Json, Format::Yaml};

int run_watch(int argc, char** argv) {
  if (auto h = handle_help(argc, argv, std::cout)) return *h;
  GlobalOptions g = globals();
  long max_events = -1;
  int rc = parse_command_line("watch", argc, argv, &g, [&](int& i) {
    std::string_view a = argv[i];
    std::string v;
    if (a == "--count" && i + 1 < argc) {
      v = argv[++i];
    } else if (a.starts_with("--count=")) {
      v = std::string(a.substr(8));
    } else {
      usage_error_try_help("watch", "unknown argument '" + std::string(a) + "'");
      return false;
    }
    char* end = nullptr;
    max_events = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || max_events <= 0) {
      std::fprintf(stderr, "podshimctl watch: --count wants a positive number, not '%s'\n", v.c_str());
      return false;
    }
    return true;
  });
  if (rc != kExitOk) return rc;
  auto f = command_format("watch", g, kFormats, Format::Table);
  if (!f) return kExitUsage;
  const status::ClientOptions o = client_options(g);
  long seen = 0;
  auto r = status::http_stream_lines(o, "/v1/watch", [&](std::string_view line) {
    if (*f == Format::Json) {
      std::printf("%.*s\n", static_cast<int>(line.size()), line.data());
    } else {
      json e = json::parse(line, nullptr, false);
      if (e.is_discarded()) return true;
      if (*f == Format::Yaml) {
        std::printf("---\n%s", to_yaml(e).c_str());
      } else {
        std::string id, extra;
        // Read with the model's reader, as podshimd reads its state; a
        // line it cannot read is shown by its type and sequence only.
        if (e.contains("container")) {
          if (auto c = core::container_from_json(e["container"])) {
            id = c->id;
            extra = " gen=" + std::to_string(c->generation) + " " + fmt_conditions(*c);
            if (*f == Format::Wide)
              extra += " pod=" + c->pod_uid + " outcome=" + c->last_outcome + " cgroup=" + c->cgroup_path;
          }
        } else if (e.contains("pod")) {
          if (auto p = core::pod_from_json(e["pod"])) {
            id = p->uid;
            if (*f == Format::Wide) extra = " " + p->namespace_ + "/" + p->name + " cgroup=" + p->cgroup_path;
          }
        }
        std::printf("%-8llu %-18s %s%s\n", static_cast<unsigned long long>(e.value("seq", 0ULL)),
                    e.value("type", "").c_str(), id.c_str(), extra.c_str());
      }
    }
    std::fflush(stdout);
    return max_events < 0 || ++seen < max_events;
  });
  if (!r) {
    const std::string& m = r.error().message;
    bool unreachable = r.error().code != EPROTO;
    std::fprintf(stderr, "podshimctl: %s%s\n", unreachable ? "podshimd unreachable: " : "", m.c_str());
    if (unreachable) return kExitNoAccess;
    // "HTTP 403: ..." from a non-200 answer.
    if (m.starts_with("HTTP ") && m.size() >= 8) return exit_for_http_status(std::atoi(m.c_str() + 5));
    return kExitFailure;
  }
  return kExitOk;
}

const CommandRegistrar reg("watch", "stream podshimd's events (resizes, registrations) as they happen",
                           run_watch, Command{
    .description =
        "Prints podshimd's events as they happen, in order: one JSON object per line with\n"
        "-o json, one YAML document per event with -o yaml, a summary line otherwise (-o wide\n"
        "adds the pod, last outcome and cgroup). The first event is a Bookmark with the\n"
        "sequence number the stream starts after.\n",
    .flags = {Flag{.name = "--count", .value = "N", .help = "exit after N events"}, socket_flag()},
    .formats = kFormats,
    .examples = {"podshimctl watch", "podshimctl watch --count 1 -o json", "podshimctl watch -o yaml"},
});

}  // namespace
}  // namespace podshim::ctl
