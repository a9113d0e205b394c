// The model's JSON reader (the writer is json_writer.h: one of each per
// type), shared by persistence, the status socket and podshimctl. Field
// names are camelCase like the Kubernetes API; quantities are plain integers
// in explicit units (cpuRequestMilli, memoryLimitBytes), absent when unset —
// "unset" is never 0.
#pragma once

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "shim/core/state.h"

namespace podshim::core {

// nlohmann's dump() that never throws: a string that is not UTF-8 has its
// bad bytes written as U+FFFD instead of raising type_error 316 (text from
// outside is checked where it enters; this is the last line of defence on
// the way out).
std::string dump(const nlohmann::json& j);

// The one PodshimDrift condition that stands for a container's drift list
// (call only when c.drift is not empty).
Condition drift_condition(const Container& c);

// Parsers for the persisted form; errors name the offending field.
// nlohmann's conversion to StringMap (found by ADL): a JSON object of
// strings. It throws nlohmann::json::type_error on a non-string value, as
// get<std::map<...>>() did.
void from_json(const nlohmann::json& j, StringMap& m);

Result<K8sResources> resources_from_json(const nlohmann::json& j);
Result<Pod> pod_from_json(const nlohmann::json& j);
Result<Container> container_from_json(const nlohmann::json& j);

}  // namespace podshim::core
