// Compares what the zero-copy reader (shim/nri/pbview.h) exposes with what
// libprotobuf parses from the same bytes, field by field. Each function
// returns the first difference as text, or "" when all agree. Shared by the
// differential unit test and the pbview fuzz target.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "shim/nri/nri_api.pb.h"
#include "shim/nri/pbview.h"
#include "shim/nri/ttrpc.pb.h"

namespace podshim::nri::test {

namespace pbapi = ::nri::pkg::api::v1alpha1;

inline std::map<std::string, std::string> to_map(const pb::StringMapView& v) {
  std::map<std::string, std::string> out;
  v.for_each([&](std::string_view k, std::string_view val) { out.insert_or_assign(std::string(k), std::string(val)); });
  return out;
}

template <typename F>
std::vector<std::string> to_list(const pb::RepeatedView& v, F field) {
  std::vector<std::string> out;
  v.for_each([&](std::string_view b) { out.emplace_back(field(b)); });
  return out;
}

inline std::vector<std::string> to_list(const pb::RepeatedView& v) {
  return to_list(v, [](std::string_view b) { return b; });
}

template <typename A, typename B>
std::string differ(const char* what, const A& ours, const B& theirs) {
  if (ours == theirs) return {};
  return fmt::format("{} differs", what);
}

#define PBCMP(what, a, b)                       \
  do {                                          \
    if (auto d = differ(what, a, b); !d.empty()) \
      return std::string(prefix) + d;           \
  } while (0)

inline std::string compare(const pb::LinuxResourcesView& v, const pbapi::LinuxResources& m, const std::string& prefix) {
  PBCMP("has_memory", v.has_memory, m.has_memory());
  PBCMP("has_cpu", v.has_cpu, m.has_cpu());
  PBCMP("memory.limit presence", v.memory_limit.has, m.memory().has_limit());
  PBCMP("memory.limit", static_cast<int64_t>(v.memory_limit.value), m.memory().limit().value());
  PBCMP("cpu.shares presence", v.cpu_shares.has, m.cpu().has_shares());
  PBCMP("cpu.shares", v.cpu_shares.value, m.cpu().shares().value());
  PBCMP("cpu.quota presence", v.cpu_quota.has, m.cpu().has_quota());
  PBCMP("cpu.quota", static_cast<int64_t>(v.cpu_quota.value), m.cpu().quota().value());
  PBCMP("cpu.period presence", v.cpu_period.has, m.cpu().has_period());
  PBCMP("cpu.period", v.cpu_period.value, m.cpu().period().value());
  PBCMP("cpu.cpus", v.cpu_cpus, m.cpu().cpus());
  PBCMP("cpu.mems", v.cpu_mems, m.cpu().mems());
  PBCMP("unified", to_map(v.unified), (std::map<std::string, std::string>(m.unified().begin(), m.unified().end())));
  return {};
}

inline std::string compare(const pb::PodSandboxView& v, const pbapi::PodSandbox& m, const std::string& prefix) {
  PBCMP("id", v.id, m.id());
  PBCMP("name", v.name, m.name());
  PBCMP("uid", v.uid, m.uid());
  PBCMP("namespace", v.namespace_, m.namespace_());
  PBCMP("runtime_handler", v.runtime_handler, m.runtime_handler());
  PBCMP("pid", v.pid, m.pid());
  PBCMP("labels", to_map(v.labels), (std::map<std::string, std::string>(m.labels().begin(), m.labels().end())));
  PBCMP("annotations", to_map(v.annotations),
        (std::map<std::string, std::string>(m.annotations().begin(), m.annotations().end())));
  PBCMP("has_linux", v.has_linux, m.has_linux());
  PBCMP("linux.cgroup_parent", v.cgroup_parent, m.linux().cgroup_parent());
  PBCMP("linux.cgroups_path", v.cgroups_path, m.linux().cgroups_path());
  PBCMP("linux.has_pod_resources", v.has_pod_resources, m.linux().has_pod_resources());
  PBCMP("linux.has_pod_overhead", v.has_pod_overhead, m.linux().has_pod_overhead());
  if (auto d = compare(v.pod_resources, m.linux().pod_resources(), prefix + "linux.pod_resources."); !d.empty())
    return d;
  if (auto d = compare(v.pod_overhead, m.linux().pod_overhead(), prefix + "linux.pod_overhead."); !d.empty())
    return d;
  return {};
}

inline std::string compare(const pb::ContainerView& v, const pbapi::Container& m, const std::string& prefix) {
  PBCMP("id", v.id, m.id());
  PBCMP("pod_sandbox_id", v.pod_sandbox_id, m.pod_sandbox_id());
  PBCMP("name", v.name, m.name());
  PBCMP("state", v.state, static_cast<int32_t>(m.state()));
  PBCMP("pid", v.pid, m.pid());
  PBCMP("labels", to_map(v.labels), (std::map<std::string, std::string>(m.labels().begin(), m.labels().end())));
  PBCMP("annotations", to_map(v.annotations),
        (std::map<std::string, std::string>(m.annotations().begin(), m.annotations().end())));
  PBCMP("args", to_list(v.args), (std::vector<std::string>(m.args().begin(), m.args().end())));
  PBCMP("env", to_list(v.env), (std::vector<std::string>(m.env().begin(), m.env().end())));
  std::vector<std::string> dests, cdis, devs;
  for (const auto& x : m.mounts()) dests.push_back(x.destination());
  for (const auto& x : m.cdi_devices()) cdis.push_back(x.name());
  for (const auto& x : m.linux().devices()) devs.push_back(x.path());
  PBCMP("mounts[].destination", to_list(v.mounts, pb::mount_destination), dests);
  PBCMP("CDI_devices[].name", to_list(v.cdi_devices, pb::cdi_device_name), cdis);
  PBCMP("has_user", v.has_user, m.has_user());
  PBCMP("user.uid", v.uid, m.user().uid());
  PBCMP("user.gid", v.gid, m.user().gid());
  PBCMP("has_linux", v.has_linux, m.has_linux());
  PBCMP("linux.cgroups_path", v.cgroups_path, m.linux().cgroups_path());
  PBCMP("linux.devices[].path", to_list(v.devices, pb::device_path), devs);
  PBCMP("linux.has_resources", v.has_resources, m.linux().has_resources());
  return compare(v.resources, m.linux().resources(), prefix + "linux.resources.");
}

inline std::string compare(const pb::RequestView& v, const ::ttrpc::Request& m) {
  const char* prefix = "Request.";
  PBCMP("service", v.service, m.service());
  PBCMP("method", v.method, m.method());
  PBCMP("payload", v.payload, m.payload());
  PBCMP("timeout_nano", v.timeout_nano, m.timeout_nano());
  return {};
}

// The bytes of a {pod = 1, container = 2, linux_resources = 3} request.
template <typename M>
std::string compare_pod_container(const pb::PodContainerRequestView& v, const M& m) {
  if (auto d = compare(v.pod, m.pod(), "pod."); !d.empty()) return d;
  if constexpr (requires { m.container(); }) {
    if (auto d = compare(v.container, m.container(), "container."); !d.empty()) return d;
  }
  if constexpr (requires { m.linux_resources(); }) {
    const char* prefix = "";
    PBCMP("has_linux_resources", v.has_linux_resources, m.has_linux_resources());
    if (auto d = compare(v.linux_resources, m.linux_resources(), "linux_resources."); !d.empty()) return d;
  }
  return {};
}

// Each item of `list` (`name` in messages) decoded again into a `View` with
// `decode` and compared with `want(i)`, libprotobuf's item i: the first
// difference, "" when all agree.
template <typename View, typename Decode, typename Want>
std::string compare_items(const pb::RepeatedView& list, const char* name, Decode decode, Want want) {
  int i = 0;
  std::string out;
  list.for_each([&](std::string_view b) {
    View x;
    if (!out.empty()) return;
    if (!decode(b, &x)) out = fmt::format("{}[{}] does not decode again", name, i);
    else out = compare(x, want(i), fmt::format("{}[{}].", name, i));
    ++i;
  });
  return out;
}

inline std::string compare(const pb::SynchronizeView& v, const pbapi::SynchronizeRequest& m) {
  const char* prefix = "Synchronize.";
  PBCMP("more", v.more, m.more());
  PBCMP("pod_count", v.pod_count, static_cast<size_t>(m.pods_size()));
  PBCMP("container_count", v.container_count, static_cast<size_t>(m.containers_size()));
  if (auto d = compare_items<pb::PodSandboxView>(
          v.pods, "pods", [](std::string_view b, pb::PodSandboxView* p) { return pb::decode_pod(b, p); },
          [&](int i) -> const pbapi::PodSandbox& { return m.pods(i); });
      !d.empty())
    return d;
  return compare_items<pb::ContainerView>(
      v.containers, "containers", [](std::string_view b, pb::ContainerView* c) { return pb::decode_container(b, c); },
      [&](int i) -> const pbapi::Container& { return m.containers(i); });
}

#undef PBCMP

}  // namespace podshim::nri::test
