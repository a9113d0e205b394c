// Registration of a container with podshimd's status socket, so containers
// started by CRI-O or podman (which podshimd does not see through NRI) appear
// in it. The hook talks to the socket with a hard deadline: a hook is on the
// container's start path, and runc kills a hook only at its own configured
// timeout (libcontainer/configs/config.go Command.Run), by which point the
// container start has failed.
//
// The interface is the seam tests plug into; make_socket_registrar() sends
// the requests with shim/status's client (status_client_dep).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "shim/hook/oci.h"
#include "shim/core/defaults.h"

namespace podshim::hook {

using core::kDefaultSocketPath;  // the status socket podshimd listens on by default
inline constexpr std::chrono::milliseconds kDefaultTimeout{500};

// What the hook knows about a container at createRuntime. Field names on the
// wire are those of shim/status's POST /v1/containers (id, podUid, name,
// podName, podNamespace, cgroupPath, pid, annotations, source).
struct Registration {
  std::string id;
  std::string pod_uid;      // "" when the container is not a Kubernetes one (plain podman)
  std::string cgroup_path;  // linux.cgroupsPath verbatim
  std::string name;           // io.kubernetes.container.name, when present
  std::string pod_name;       // io.kubernetes.pod.name, when present
  std::string pod_namespace;  // io.kubernetes.pod.namespace, when present
  int64_t pid = 0;
  std::map<std::string, std::string> annotations;
  // What the kubelet allocated, as the runtime's linux.resources carry it
  // (kube_resources()); podshimd takes it as the allocated values of a first
  // registration: on a hooks.d node nothing else tells it.
  std::optional<int64_t> cpu_request_milli, cpu_limit_milli, memory_limit_bytes;
};

// The Kubernetes resources behind an OCI spec's linux.resources, inverting
// the kubelet's conversions: requests.cpu from cpu.shares (none for the
// kubelet's minimum of 2 shares, what a container without a CPU request
// gets), limits.cpu from quota and period (none when the quota is unset or
// -1), limits.memory from memory.limit (none when unset, 0 or -1). Written
// into `r`.
void kube_resources(const OciResources& oci, Registration* r);

// The JSON body of POST /v1/containers.
std::string registration_body(const Registration& r);

class Registrar {
 public:
  virtual ~Registrar() = default;
  // POST /v1/containers. Registering twice is an upsert on podshimd's side.
  virtual Result<void> register_container(const Registration& r) = 0;
  // DELETE /v1/containers/{id}. "Not found" counts as success (idempotent).
  virtual Result<void> deregister_container(std::string_view id) = 0;
};

// A registrar over the unix socket at `socket_path`; each call completes or
// fails within `timeout` (connect + write + read together). ETIMEDOUT when the
// deadline passes, the connect errno (ENOENT, ECONNREFUSED) when podshimd is
// not there, EPROTO when it answers with a non-2xx status.
std::unique_ptr<Registrar> make_socket_registrar(std::string socket_path,
                                                 std::chrono::milliseconds timeout);

}  // namespace podshim::hook
