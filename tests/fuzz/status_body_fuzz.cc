// Fuzzes the status socket's request bodies (shim/status/api.h): resize
// bodies for a container and for a pod, and the registration body that
// podshim-hook POSTs to /v1/containers, through the same Api::handle the
// HTTP server calls. Any body must give a 2xx/4xx reply with a JSON error
// naming what is wrong — never a crash, UB, an uncaught exception or a 5xx
// for a request that is simply malformed.
//
// A container resize body must also read the same through the one-pass
// reader as through the tree (parse_container_resize_tree).
//
// Input: byte 0 picks the entry point (container resize, pod resize,
// registration through Api::handle, or a resize through Api::handle with a
// resize manager over a fake actuator); the rest is the body.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/log.h"
#include "shim/core/resize.h"
#include "shim/core/state.h"
#include "shim/status/api.h"

using namespace podshim;
using namespace podshim::status;

namespace {

// Accepts every resize and reports the kernel as holding nothing special.
class FakeActuator : public core::Actuator {
 public:
  void apply(const core::Actuation&, Done done) override { done(cgroup::ResizeReport{}); }
  Result<cgroup::Actual> read_actual(const std::string&) override { return cgroup::Actual{}; }
};

void check_reply(const Reply& r) {
  if (r.status >= 500) __builtin_trap();
  if (r.status >= 400) {
    auto j = nlohmann::json::parse(r.text(), nullptr, false);
    if (j.is_discarded() || !j.contains("error") || !j["error"].is_string() ||
        j["error"].get<std::string>().empty()) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool once = [] {
    log::init(log::Target::Null, log::Level::Err);
    return true;
  }();
  (void)once;
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto r = parse_container_resize(body);
      if (!r && r.error().message.empty()) __builtin_trap();
      // The one-pass reader takes only what the tree would read the same way.
      auto t = parse_container_resize_tree(body);
      if (r.has_value() != t.has_value()) __builtin_trap();
      if (!r && r.error().message != t.error().message) __builtin_trap();
      if (r) {
        const auto &a = *r, &b = *t;
        if (a.resources != b.resources || a.cpu_policy != b.cpu_policy || a.memory_policy != b.memory_policy ||
            a.remove.cpu_request != b.remove.cpu_request || a.remove.cpu_limit != b.remove.cpu_limit ||
            a.remove.memory_request != b.remove.memory_request || a.remove.memory_limit != b.remove.memory_limit)
          __builtin_trap();
      }
      break;
    }
    case 1: {
      auto r = parse_pod_resize(body);
      if (!r && r.error().message.empty()) __builtin_trap();
      if (r && !r->pod_resources && r->containers.empty()) __builtin_trap();  // "nothing to resize"
      break;
    }
    case 2: {
      auto store = core::Store::in_memory();
      ServerDeps deps;
      deps.store = store.get();
      Api api(deps);
      Reply rep = api.handle("POST", "/v1/containers", body);
      check_reply(rep);
      if (rep.status == 201) {
        // What was registered can be read back and removed by its id.
        auto j = nlohmann::json::parse(rep.text(), nullptr, false);
        if (j.is_discarded() || !j.contains("id") || !j["id"].is_string()) __builtin_trap();
        const std::string id = j["id"].get<std::string>();
        if (!store->container(id)) __builtin_trap();
        check_reply(api.handle("GET", "/v1/containers/" + id, {}));
        check_reply(api.handle("DELETE", "/v1/containers/" + id, {}));
        if (store->container(id)) __builtin_trap();
      }
      break;
    }
    case 3: {
      auto store = core::Store::in_memory();
      core::Pod pod;
      pod.uid = "pod-1";
      pod.cgroup_path = "kubepods/burstable/pod-1";
      if (!store->upsert_pod(pod)) __builtin_trap();
      core::Container c;
      c.id = "ctr-1";
      c.pod_uid = "pod-1";
      c.cgroup_path = "kubepods/burstable/pod-1/ctr-1";
      if (!store->upsert_container(c)) __builtin_trap();
      FakeActuator act;
      core::ResizeManager rm(*store, act, core::NodeAllocatable{8000, int64_t{16} << 30});
      ServerDeps deps;
      deps.store = store.get();
      deps.resize = &rm;
      Api api(deps);
      check_reply(api.handle("POST", "/v1/containers/ctr-1/resize", body));
      check_reply(api.handle("POST", "/v1/pods/pod-1/resize", body));
      break;
    }
  }
  return 0;
}
