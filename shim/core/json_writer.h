// The model's JSON, written straight into a string without building an
// nlohmann::json tree first: the one writer of every type, for the
// hooks-only store's persistence, the status socket's answers and /v1/watch
// (its reader is json.h). A tree per answer (one std::map node per field,
// then a second pass to dump it) dominated GET /v1/containers.
//
// The output is nlohmann's canonical form: what dump() gives for the parsed
// output, byte for byte (keys in std::map order; nlohmann's escaping:
// \" \\ \b \f \n \r \t, and \u00xx for other control bytes, everything
// else as is); json_writer_test checks that and that the reader gives back the
// object, on generated objects. Unlike dump(), a string that is not valid
// UTF-8 does not throw: each invalid byte becomes U+FFFD.
#pragma once

#include <functional>
#include <string>

#include "shim/core/state.h"

namespace podshim::core {

void append_json(std::string& out, const K8sResources& r);
void append_json(std::string& out, const Pod& p);
// The pod with one more member, which `extra` writes (",\"key\":value") where
// its key sorts: after "cgroupPath", before "labels" ("containerIds" and
// "containers" for the status socket's pod views).
void append_json(std::string& out, const Pod& p, const std::function<void(std::string&)>& extra);
void append_json(std::string& out, const Container& c);
// One /v1/watch line's object (without the newline).
void append_json(std::string& out, const Event& e);

// A JSON string literal (with the quotes) of `s`.
void append_json_string(std::string& out, std::string_view s);

template <typename T>
std::string json_string(const T& v) {
  std::string out;
  append_json(out, v);
  return out;
}

}  // namespace podshim::core
