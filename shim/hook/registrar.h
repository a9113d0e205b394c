// Registration of a container with podshimd's status socket, so containers
// started by CRI-O or podman (which podshimd does not see through NRI) appear
// in it. The hook talks to the socket with a hard deadline: a hook is on the
// container's start path, and runc kills a hook only at its own configured
// timeout (libcontainer/configs/config.go Command.Run), by which point the
// container start has failed.
//
// The interface is the seam tests and a future shared status client plug
// into; make_socket_registrar() is a deliberately tiny HTTP/1.1 client (one
// request per connection, Connection: close) until shim/status ships its own
// client library.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim::hook {

inline constexpr std::string_view kDefaultSocketPath = "/run/podshim/podshim.sock";
inline constexpr std::chrono::milliseconds kDefaultTimeout{500};

// What the hook knows about a container at createRuntime. Field names on the
// wire follow shim/core/json.h (camelCase: id, podUid, cgroupPath, pid,
// annotations, source).
struct Registration {
  std::string id;
  std::string pod_uid;      // "" when the container is not a Kubernetes one (plain podman)
  std::string cgroup_path;  // linux.cgroupsPath verbatim
  int64_t pid = 0;
  std::map<std::string, std::string> annotations;
};

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

// One HTTP exchange over a unix socket within `timeout`; returns the status
// code and body. Exposed for tests of the protocol edge cases.
struct HttpResponse {
  int status = 0;
  std::string body;
};
Result<HttpResponse> unix_http_request(const std::string& socket_path, std::string_view method,
                                       std::string_view target, std::string_view body,
                                       std::chrono::milliseconds timeout);

}  // namespace podshim::hook
