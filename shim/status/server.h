// podshimd's status socket: HTTP/1.1 + JSON on a unix socket, served by
// libmicrohttpd on the daemon's sd-event loop.
//
// Integration: MHD runs with MHD_USE_EPOLL and no threads of its own. Its
// epoll fd (MHD_DAEMON_INFO_EPOLL_FD) is one sd-event io source; each wake-up
// calls MHD_run(), after which a one-shot CLOCK_MONOTONIC source is re-armed
// from MHD_get_timeout() so idle and slow clients are timed out without a
// poll loop. /v1/watch responses are produced by a content-reader callback
// that suspends its connection (MHD_ALLOW_SUSPEND_RESUME) when it has nothing
// to send; a store event queues a line and resumes it, and MHD's inter-thread
// eventfd (part of the same epoll set) wakes the loop.
//
// Endpoints:
//   GET  /healthz, /readyz, /metrics
//   GET  /v1/pods, /v1/pods/{uid}, /v1/containers, /v1/containers/{id}
//   POST /v1/containers              register (podshim-hook at createRuntime)
//   DELETE /v1/containers/{id}       deregister (podshim-hook at poststop)
//   POST /v1/containers/{id}/resize, /v1/pods/{uid}/resize
//   GET  /v1/watch                   NDJSON events, streamed
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "shim/core/config.h"
#include "shim/core/metrics.h"
#include "shim/core/resize.h"
#include "shim/core/state.h"
#include "shim/status/access.h"

typedef struct sd_event sd_event;

namespace podshim::status {

struct ServerOptions {
  std::string socket_path = std::string(core::kDefaultSocketPath);
  std::optional<gid_t> socket_gid;  // chown the socket to root:<gid>
  mode_t socket_mode = 0660;
  AccessPolicy policy;
  std::chrono::seconds timeout{10};
  size_t max_body_bytes = 1 << 20;
  unsigned max_connections = 256;
  // A watcher that falls this far behind is disconnected (it can re-list).
  size_t max_watch_backlog_bytes = 16 << 20;
};

// Builds ServerOptions from the configuration (resolving group names).
Result<ServerOptions> server_options(const core::Config& cfg);

// What the server serves; all borrowed and outliving the server.
struct ServerDeps {
  core::Store* store = nullptr;
  core::ResizeManager* resize = nullptr;   // null: resize endpoints answer 503
  core::Metrics* metrics = nullptr;        // null: /metrics answers 404
  std::function<bool()> ready;             // /readyz; null means ready
  std::function<void()> before_metrics;    // refresh gauges before /metrics
  std::function<void(std::string&)> extra_metrics;  // appends families to /metrics
};

class Server {
 public:
  // Creates the socket (replacing a stale one, refusing when another server
  // answers on it), starts MHD and attaches it to `loop`.
  static Result<std::unique_ptr<Server>> start(sd_event* loop, ServerOptions opts, ServerDeps deps);
  ~Server();  // ends watch streams, stops MHD, removes the socket

  // Replaces the access rules (SIGHUP reload).
  void set_policy(AccessPolicy p);
  size_t watcher_count() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace podshim::status
