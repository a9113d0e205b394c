// The status API's request handling, independent of the HTTP transport so it
// can be tested directly: (method, path, body) → reply.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.h"
#include "shim/core/resize.h"
#include "shim/status/access.h"
#include "shim/status/server.h"

namespace podshim::status {

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  // Shared, not copied: the cached container list goes out to every
  // connection that asked for it from where it is kept.
  std::shared_ptr<const std::string> body = empty_body();

  Reply() = default;
  Reply(int status, std::string content_type, std::string body)
      : status(status), content_type(std::move(content_type)),
        body(std::make_shared<const std::string>(std::move(body))) {}
  Reply(int status, std::string content_type, std::shared_ptr<const std::string> body)
      : status(status), content_type(std::move(content_type)), body(std::move(body)) {}
  std::string_view text() const { return *body; }

  // One empty body for every reply that has none (and every default-built
  // Reply), instead of an allocation each.
  static const std::shared_ptr<const std::string>& empty_body() {
    static const auto kEmpty = std::make_shared<const std::string>();
    return kEmpty;
  }
};

// {"error": message} with the given status.
Reply error_reply(int status, std::string_view message);

// The methods `path` answers to, for a 405's Allow header ("GET, HEAD").
std::string allowed_methods(std::string_view path);

// canonical_path: shim/status/http.h.

// Parses a request body as one JSON object; a key that appears twice in any
// object is an error naming it (nlohmann::json keeps the last one silently).
Result<nlohmann::json> parse_json_object(std::string_view body);

// Parses a resize body for one container:
//   {"resources": {"requests": {"cpu": "500m", "memory": "128Mi"},
//                  "limits":   {"cpu": "1", "memory": null}},
//    "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]}
// A null quantity asks to remove that request/limit. Unknown fields are
// errors naming the field.
Result<core::ContainerResize> parse_container_resize(std::string_view body);
// The same from a parsed tree: what parse_container_resize answers with for
// every body its one-pass reader does not take (all errors). Exposed so that
// tests can compare the two.
Result<core::ContainerResize> parse_container_resize_tree(std::string_view body);

// Parses a pod resize body: {"resources": {...pod-level...},
// "containers": [{"id": "...", "resources": {...}, "resizePolicy": [...]}]}.
Result<core::PodResize> parse_pod_resize(std::string_view body);

// A resize report as JSON: as a value (the pod answer embeds it), and
// appended to a string (the container answer, written without building
// nlohmann nodes); the two are byte-identical (api tests compare them).
nlohmann::json report_json(const cgroup::ResizeReport& rep);
void append_report_json(std::string& out, const cgroup::ResizeReport& rep);

class Api {
 public:
  explicit Api(const ServerDeps& deps) : deps_(deps) {}
  // Access was decided before (the server checks the peer against the
  // rules first): this only answers.
  Reply handle(std::string_view method, std::string_view path, std::string_view body);

 private:
  Reply get_pods(std::string_view uid);
  Reply get_containers(std::string_view id);
  Reply register_container(std::string_view body);
  Reply deregister_container(std::string_view id);
  Reply resize_container(std::string_view id, std::string_view body);
  Reply resize_pod(std::string_view uid, std::string_view body);
  Reply metrics();
  Result<std::string> check_cgroup_path(std::string_view field, std::string_view path);
  static Result<void> take_annotations(const nlohmann::json& a, core::Container* c);
  Result<core::Pod> pod_of_registration(const nlohmann::json& j, const core::Container& c);
  void derive_hook_pod_qos(const std::string& uid);

  ServerDeps deps_;
  // The last full container list and the store's event sequence it was
  // built at: every change to the store emits an event (Store::emit), so
  // while last_seq() is unchanged the list is byte-for-byte what a rebuild
  // would give. Loop thread only.
  std::shared_ptr<const std::string> list_body_;
  uint64_t list_seq_ = 0;
  bool list_valid_ = false;
};

}  // namespace podshim::status
