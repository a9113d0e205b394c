// JSON forms of the model, shared by persistence, the status socket and
// podshimctl. Field names are camelCase like the Kubernetes API; quantities
// are plain integers in explicit units (cpuRequestMilli, memoryLimitBytes),
// absent when unset — "unset" is never 0.
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

nlohmann::json to_json(const K8sResources& r);
nlohmann::json to_json(const Pod& p);
nlohmann::json to_json(const Container& c);
// The one PodshimDrift condition that stands for a container's drift list
// (call only when c.drift is not empty); both JSON writers use it.
Condition drift_condition(const Container& c);
nlohmann::json to_json(const Event& e);

// Parsers for the persisted form; errors name the offending field.
// nlohmann's conversions for StringMap (found by ADL): a JSON object of
// strings, keys sorted as std::map's were. from_json throws
// nlohmann::json::type_error on a non-string value, as get<std::map<...>>()
// did.
void to_json(nlohmann::json& j, const StringMap& m);
void from_json(const nlohmann::json& j, StringMap& m);

Result<K8sResources> resources_from_json(const nlohmann::json& j);
Result<Pod> pod_from_json(const nlohmann::json& j);
Result<Container> container_from_json(const nlohmann::json& j);

}  // namespace podshim::core
