// Fuzzes the CDI parsers and what follows a successful parse: any byte string
// must give a spec or a clean error (never a crash, an uncaught exception, UB
// or a hang), and a valid spec must survive resolution and the OCI back end.
//
// The first byte picks the entry point: qualified-name parser, JSON spec,
// YAML spec, or annotation requests.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cdi/edits.h"
#include "cdi/name.h"
#include "cdi/requests.h"
#include "cdi/spec.h"

using namespace podshim;
using namespace podshim::cdi;

namespace {

// A host with one char device at every path: no filesystem access.
Result<HostDevice> fake_host(const std::string& path) {
  if (path.size() % 3 == 0) return fail(ENOENT, "no such device \"{}\"", path);
  return HostDevice{path.size() % 2 ? "c" : "b", 10, static_cast<int64_t>(path.size()), 0660};
}

void exercise_spec(const Result<Spec>& parsed) {
  if (!parsed) {
    if (parsed.error().message.empty()) __builtin_trap();
    return;
  }
  auto valid = validate_spec(*parsed);
  if (!valid) {
    if (valid.error().message.empty()) __builtin_trap();
    return;
  }
  // Every valid spec has a well-formed kind and device names.
  if (!parse_kind(parsed->kind)) __builtin_trap();
  for (const auto& d : parsed->devices) {
    if (!is_qualified_name(parsed->kind + "=" + d.name)) __builtin_trap();
    ContainerEdits merged = parsed->edits;
    merged.append(d.edits);
    auto r = resolve_edits(merged, ProcessIds{1000, 1000}, fake_host);
    if (!r) continue;
    nlohmann::json config = nlohmann::json::object();
    if (!apply_to_oci(*r, config)) __builtin_trap();  // an empty config always accepts edits
    // Mounts come out unique by destination.
    for (size_t i = 0; i < r->mounts.size(); i++)
      for (size_t j = i + 1; j < r->mounts.size(); j++)
        if (r->mounts[i].destination == r->mounts[j].destination) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view s(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto q = parse_qualified_name(s);
      if (q && q->str() != s) __builtin_trap();  // round trip
      if (!q && q.error().message.empty()) __builtin_trap();
      break;
    }
    case 1:
      exercise_spec(parse_spec(s, Format::Json));
      break;
    case 2:
      exercise_spec(parse_spec(s, Format::Yaml));
      break;
    case 3: {
      std::map<std::string, std::string> a{{"cdi.k8s.io/fuzz", std::string(s)}};
      auto r = devices_from_annotations(a);
      if (r)
        for (const auto& n : *r)
          if (!is_qualified_name(n)) __builtin_trap();
      break;
    }
  }
  return 0;
}
