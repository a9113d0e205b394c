// podshimd's status socket: HTTP/1.1 + JSON on a unix socket, served by a
// small bounded HTTP/1.1 server of our own on the daemon's sd-event loop
// (server.cc says why not libmicrohttpd).
//
// Bounds a client cannot stretch: the request head must be complete within
// `timeout` of the connection's start (or of the previous response), the
// body within `timeout` of the end of the head, and a response must be read
// within `timeout`; these are totals, not idle timers. Connections are
// counted per peer uid (SO_PEERCRED): a non-root uid may hold at most
// `max_connections_per_uid`, and `reserved_root_connections` of
// `max_connections` are only ever given to uid 0 (podshimctl as root and
// podshim-hook, which the runtime runs as root) and never to a /v1/watch
// stream, so they turn over within one deadline. A connection over a limit
// is answered 503 at once and closed. A /v1/watch stream whose client does
// not keep up is closed once its queued lines pass `max_watch_backlog_bytes`,
// or, when all streams' queues together would pass `max_watch_total_bytes`,
// the streams furthest behind are closed first.
//
// Endpoints:
//   GET  /healthz, /readyz, /metrics
//   GET  /v1/pods, /v1/pods/{uid}, /v1/containers, /v1/containers/{id}
//   POST /v1/containers              register (podshim-hook at createRuntime)
//   DELETE /v1/containers/{id}       deregister (podshim-hook at poststop)
//   POST /v1/containers/{id}/resize, /v1/pods/{uid}/resize
//   GET  /v1/watch                   NDJSON events, streamed (chunked; over
//                                    HTTP/1.0 unframed, ended by the close)
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "cgroup/path.h"
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
  mode_t socket_mode = core::kDefaultSocketMode;
  AccessPolicy policy;
  std::chrono::milliseconds timeout = core::kDefaultHttpTimeout;  // total for the head, for the body, for a reply
  size_t max_header_bytes = 16 << 10;         // request line + headers; over it: 431
  size_t max_body_bytes = core::kDefaultMaxBodyBytes;  // POST bodies; GET/HEAD/DELETE take none
  unsigned max_connections = core::kDefaultMaxConnections;
  unsigned max_connections_per_uid = 0;       // non-root uids; 0: (max - reserved) / 4, at least 1
  unsigned reserved_root_connections = 0;     // 0: max / 8, at least 2 (at most max / 2)
  // /v1/watch memory: a watcher's backlog is the event lines queued for it
  // and not yet taken by its socket. A watcher whose backlog would pass
  // max_watch_backlog_bytes is disconnected (it can re-list); when all
  // backlogs together would pass max_watch_total_bytes, the watchers furthest
  // behind are disconnected first, so the others keep streaming.
  size_t max_watch_backlog_bytes = core::kDefaultMaxWatchBacklogBytes;
  size_t max_watch_total_bytes = core::kDefaultMaxWatchTotalBytes;
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
  // Registration checks a cgroup path beneath this root (a real directory,
  // reached without symlinks). Empty: only the path's form is checked.
  std::string cgroup_root;
  cgroup::DriverKind cgroup_driver = cgroup::DriverKind::Auto;
};

class Server {
 public:
  // Creates the socket (replacing a stale one, refusing when another server
  // answers on it) and serves it on `loop`.
  static Result<std::unique_ptr<Server>> start(sd_event* loop, ServerOptions opts, ServerDeps deps);
  ~Server();  // ends watch streams, closes every connection, removes the socket

  // Replaces the access rules (SIGHUP reload).
  void set_policy(AccessPolicy p);
  // Bytes queued for all watchers now (pending lines and unsent output).
  size_t watch_backlog_bytes() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace podshim::status
