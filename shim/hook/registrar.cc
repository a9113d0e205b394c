#include "shim/hook/registrar.h"

#include <nlohmann/json.hpp>

#include "base/str.h"
#include "cgroup/convert.h"
#include "shim/status/client.h"

namespace podshim::hook {
namespace {

// podshimd answers with a small JSON object; a larger body is not podshimd.
constexpr size_t kMaxResponseBytes = 64 << 10;

class SocketRegistrar final : public Registrar {
 public:
  SocketRegistrar(std::string path, std::chrono::milliseconds timeout) {
    opts_.socket_path = std::move(path);
    opts_.timeout = timeout;
    opts_.max_body = kMaxResponseBytes;
  }

  Result<void> register_container(const Registration& r) override {
    auto resp = status::http_request(opts_, "POST", "/v1/containers", registration_body(r));
    if (!resp) return wrap(resp, fmt::format("registering with podshimd at '{}'", opts_.socket_path));
    // 201 first registration, 200 re-registration (shim/status/api.cc).
    if (resp->status < 200 || resp->status > 299)
      return fail(EPROTO, "registering with podshimd: HTTP {}: {}", resp->status,
                  str::trim(std::string_view(resp->body).substr(0, 200)));
    return {};
  }

  Result<void> deregister_container(std::string_view id) override {
    auto resp = status::http_request(opts_, "DELETE", fmt::format("/v1/containers/{}", id));
    if (!resp)
      return wrap(resp, fmt::format("deregistering from podshimd at '{}'", opts_.socket_path));
    // 404: already gone (a second poststop, or podshimd restarted): the goal is reached.
    if (resp->status == 404) return {};
    if (resp->status < 200 || resp->status > 299)
      return fail(EPROTO, "deregistering from podshimd: HTTP {}: {}", resp->status,
                  str::trim(std::string_view(resp->body).substr(0, 200)));
    return {};
  }

 private:
  status::ClientOptions opts_;
};

}  // namespace

std::string registration_body(const Registration& r) {
  // Field names as shim/status/api.cc register_container() accepts them.
  nlohmann::json j = {
      {"id", r.id},
      {"cgroupPath", r.cgroup_path},
      {"pid", r.pid},
      {"annotations", r.annotations},
      {"source", "hook"},
  };
  if (!r.pod_uid.empty()) j["podUid"] = r.pod_uid;
  if (!r.name.empty()) j["name"] = r.name;
  if (!r.pod_name.empty()) j["podName"] = r.pod_name;
  if (!r.pod_namespace.empty()) j["podNamespace"] = r.pod_namespace;
  // Quantities as the API's "resources" takes them (strings, as in a pod spec).
  nlohmann::json res;
  if (r.cpu_request_milli) res["requests"]["cpu"] = fmt::format("{}m", *r.cpu_request_milli);
  if (r.cpu_limit_milli) res["limits"]["cpu"] = fmt::format("{}m", *r.cpu_limit_milli);
  if (r.memory_limit_bytes) res["limits"]["memory"] = std::to_string(*r.memory_limit_bytes);
  if (!res.is_null()) j["resources"] = std::move(res);
  // error_handler replace: an annotation value with invalid UTF-8 must not
  // throw out of the hook; podshimd sees U+FFFD instead.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void kube_resources(const OciResources& oci, Registration* r) {
  // kubelet MilliCPUToShares: shares = milli * 1024 / 1000, at least 2, so 2
  // is also what a container without a CPU request gets.
  if (oci.cpu_shares && *oci.cpu_shares > cgroup::kMinShares)
    r->cpu_request_milli = cgroup::shares_to_milli_cpu(*oci.cpu_shares);
  // kubelet MilliCPUToQuota: quota = milli * period / 1000; no limit leaves
  // the quota unset (or -1, "max").
  if (oci.cpu_quota && *oci.cpu_quota > 0)
    r->cpu_limit_milli = cgroup::quota_us_to_milli_cpu(static_cast<uint64_t>(*oci.cpu_quota),
                                                       oci.cpu_period.value_or(cgroup::kQuotaPeriodUs));
  if (oci.memory_limit && *oci.memory_limit > 0) r->memory_limit_bytes = *oci.memory_limit;
}

std::unique_ptr<Registrar> make_socket_registrar(std::string socket_path,
                                                 std::chrono::milliseconds timeout) {
  return std::make_unique<SocketRegistrar>(std::move(socket_path), timeout);
}

}  // namespace podshim::hook
