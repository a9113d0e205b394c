#include "shim/status/server.h"

#include <microhttpd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "shim/core/json.h"
#include "shim/status/api.h"

namespace podshim::status {

using nlohmann::json;

namespace {

struct Watcher;

// Per-request state, kept in MHD's con_cls between calls of the handler.
struct RequestState {
  Peer peer;
  bool peer_ok = false;
  std::string body;
  bool responded = false;
  bool too_large = false;
  size_t discarded = 0;
};

struct Watcher {
  struct Server::Impl* impl = nullptr;
  MHD_Connection* conn = nullptr;
  std::string buf;
  size_t off = 0;
  bool suspended = false;
  bool overflow = false;
};

}  // namespace

struct Server::Impl {
  ServerOptions opts;
  ServerDeps deps;
  sd_event* loop = nullptr;
  MHD_Daemon* mhd = nullptr;
  sd_event_source* io = nullptr;
  sd_event_source* timer = nullptr;
  uint64_t sub = 0;
  std::unique_ptr<Api> api;

  mutable std::mutex mu;  // watchers, last_seq, stopping, policy
  std::set<Watcher*> watchers;
  uint64_t last_seq = 0;
  bool stopping = false;

  ~Impl() {
    if (sub && deps.store) deps.store->unsubscribe(sub);
    {
      std::lock_guard lk(mu);
      stopping = true;
      // MHD must not be stopped with suspended connections.
      for (auto* w : watchers) {
        if (w->suspended) {
          w->suspended = false;
          MHD_resume_connection(w->conn);
        }
      }
    }
    if (mhd) {
      MHD_run(mhd);  // let resumed watchers see `stopping`
      MHD_stop_daemon(mhd);
    }
    if (io) sd_event_source_disable_unref(io);
    if (timer) sd_event_source_disable_unref(timer);
    if (!opts.socket_path.empty()) unlink(opts.socket_path.c_str());
  }

  void rearm() {
    MHD_UNSIGNED_LONG_LONG to = 0;
    if (MHD_get_timeout(mhd, &to) != MHD_YES) {
      sd_event_source_set_enabled(timer, SD_EVENT_OFF);
      return;
    }
    uint64_t now = 0;
    sd_event_now(loop, CLOCK_MONOTONIC, &now);
    sd_event_source_set_time(timer, now + to * 1000);
    sd_event_source_set_enabled(timer, SD_EVENT_ONESHOT);
  }

  void drive() {
    MHD_run(mhd);
    rearm();
  }

  void on_event(const core::Event& ev) {
    {
      // Most events have no watcher: serialize only for those who listen.
      std::lock_guard lk(mu);
      last_seq = std::max(last_seq, ev.seq);
      if (watchers.empty()) return;
    }
    std::string line = core::to_json(ev).dump();
    line += '\n';
    std::lock_guard lk(mu);
    for (auto* w : watchers) {
      if (w->overflow) continue;
      if (w->buf.size() - w->off + line.size() > opts.max_watch_backlog_bytes) {
        w->overflow = true;
      } else {
        w->buf += line;
      }
      if (w->suspended) {
        w->suspended = false;
        MHD_resume_connection(w->conn);
      }
    }
  }
};

namespace {

using Impl = Server::Impl;

void log_mhd(void*, const char* fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  log::debug("microhttpd: {}", str::trim(buf));
}

MHD_Result queue(MHD_Connection* conn, Impl* impl, const char* method, const Reply& r) {
  MHD_Response* resp = MHD_create_response_from_buffer(r.body.size(), const_cast<char*>(r.body.data()),
                                                       MHD_RESPMEM_MUST_COPY);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", r.content_type.c_str());
  if (r.status == 413 || r.status == 408) MHD_add_response_header(resp, "Connection", "close");
  MHD_Result ret = MHD_queue_response(conn, static_cast<unsigned>(r.status), resp);
  MHD_destroy_response(resp);
  if (impl->deps.metrics) {
    impl->deps.metrics->http_requests.inc({{"method", method}, {"code", std::to_string(r.status)}});
  }
  return ret;
}

ssize_t watch_reader(void* cls, uint64_t, char* buf, size_t max) {
  auto* w = static_cast<Watcher*>(cls);
  std::lock_guard lk(w->impl->mu);
  if (w->off < w->buf.size()) {
    size_t n = std::min(max, w->buf.size() - w->off);
    std::memcpy(buf, w->buf.data() + w->off, n);
    w->off += n;
    if (w->off == w->buf.size()) {
      w->buf.clear();
      w->off = 0;
    }
    return static_cast<ssize_t>(n);
  }
  if (w->overflow) return MHD_CONTENT_READER_END_WITH_ERROR;
  if (w->impl->stopping) return MHD_CONTENT_READER_END_OF_STREAM;
  w->suspended = true;
  MHD_suspend_connection(w->conn);
  return 0;
}

void watch_free(void* cls) {
  auto* w = static_cast<Watcher*>(cls);
  {
    std::lock_guard lk(w->impl->mu);
    w->impl->watchers.erase(w);
  }
  delete w;
}

MHD_Result start_watch(Impl* impl, MHD_Connection* conn) {
  auto* w = new Watcher;
  w->impl = impl;
  w->conn = conn;
  {
    std::lock_guard lk(impl->mu);
    // The first line says where the stream starts: every later line has a
    // larger seq, with no gaps.
    w->buf = json{{"seq", impl->last_seq}, {"type", "Bookmark"}}.dump() + "\n";
    impl->watchers.insert(w);
  }
  MHD_Response* resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, watch_reader, w, watch_free);
  if (!resp) {
    watch_free(w);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
  MHD_add_response_header(resp, "Cache-Control", "no-cache");
  MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
  MHD_destroy_response(resp);
  if (impl->deps.metrics) impl->deps.metrics->http_requests.inc({{"method", "GET"}, {"code", "200"}});
  return ret;
}

MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*,
                      const char* upload_data, size_t* upload_data_size, void** con_cls) {
  auto* impl = static_cast<Impl*>(cls);
  auto* st = static_cast<RequestState*>(*con_cls);
  if (!st) {
    st = new RequestState;
    *con_cls = st;
    const MHD_ConnectionInfo* ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    auto peer = ci ? peer_of(ci->connect_fd) : Result<Peer>(fail(EBADF, "no connection fd"));
    bool allowed = false;
    if (peer) {
      st->peer = *peer;
      st->peer_ok = true;
      std::lock_guard lk(impl->mu);
      allowed = impl->opts.policy.allowed(*peer, method, url);
    }
    if (!allowed) {
      // Every denial is logged with who asked (kubelet authz logs the same).
      log::at(log::Level::Warning,
              {{"PEER_UID", std::to_string(st->peer.uid)}, {"PEER_PID", std::to_string(st->peer.pid)}},
              "status socket: denied {} {} to uid {} pid {}{}", method, url, st->peer.uid, st->peer.pid,
              peer ? "" : fmt::format(" ({})", peer.error().message));
      if (impl->deps.metrics) impl->deps.metrics->http_denied.inc();
      st->responded = true;
      return queue(conn, impl, method, error_reply(403, fmt::format("{} {} is not allowed for uid {}", method,
                                                                  url, st->peer.uid)));
    }
    if (const char* cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
      auto n = str::parse_u64(cl);
      if (!n || *n > impl->opts.max_body_bytes) {
        st->responded = true;
        return queue(conn, impl, method,
                     error_reply(413, fmt::format("request body larger than {} bytes", impl->opts.max_body_bytes)));
      }
      st->body.reserve(*n);
    }
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    if (st->too_large || st->body.size() + *upload_data_size > impl->opts.max_body_bytes) {
      // Chunked uploads have no Content-Length to check up front. Stop
      // buffering at the cap and discard the rest (MHD cannot answer before
      // the upload ends); a client that keeps sending far past the cap is
      // dropped instead.
      st->too_large = true;
      st->discarded += *upload_data_size;
      st->body.clear();
      *upload_data_size = 0;
      return st->discarded > 16 * impl->opts.max_body_bytes ? MHD_NO : MHD_YES;
    }
    st->body.append(upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (st->too_large && !st->responded) {
    st->responded = true;
    return queue(conn, impl, method,
                 error_reply(413, fmt::format("request body larger than {} bytes", impl->opts.max_body_bytes)));
  }
  if (st->responded) return MHD_YES;
  st->responded = true;
  std::string_view m(method), path(url);
  if (path == "/v1/watch") {
    if (m != "GET") return queue(conn, impl, method, error_reply(405, "use GET"));
    return start_watch(impl, conn);
  }
  Reply r = impl->api->handle(m, path, st->body, st->peer);
  return queue(conn, impl, method, r);
}

void on_completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
  delete static_cast<RequestState*>(*con_cls);
  *con_cls = nullptr;
}

int on_io(sd_event_source*, int, uint32_t, void* userdata) {
  static_cast<Impl*>(userdata)->drive();
  return 0;
}

int on_timer(sd_event_source*, uint64_t, void* userdata) {
  static_cast<Impl*>(userdata)->drive();
  return 0;
}

Result<UniqueFd> make_listener(const ServerOptions& o) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string tmp = fmt::format("{}.{}.tmp", o.socket_path, getpid());
  if (tmp.size() >= sizeof(sa.sun_path)) return fail(ENAMETOOLONG, "socket path '{}' too long", o.socket_path);
  auto slash = o.socket_path.rfind('/');
  if (slash == std::string::npos || o.socket_path.size() == 1) {
    return fail(EINVAL, "socket path '{}' must be absolute", o.socket_path);
  }
  if (slash > 0) PODSHIM_TRY(fs::mkdir_p(o.socket_path.substr(0, slash), 0755));
  struct stat st {};
  if (lstat(o.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail(EEXIST, "{} exists and is not a socket", o.socket_path);
    // A socket that still answers belongs to a running podshimd.
    UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    std::memcpy(sa.sun_path, o.socket_path.c_str(), o.socket_path.size() + 1);
    if (probe && connect(probe.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      return fail(EADDRINUSE, "another server is listening on {}", o.socket_path);
    }
    unlink(o.socket_path.c_str());
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("socket");
  // Bind under a temporary name, set owner and mode, then rename into place:
  // the socket is never reachable with wider permissions than configured.
  unlink(tmp.c_str());
  std::memcpy(sa.sun_path, tmp.c_str(), tmp.size() + 1);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return fail_errno("binding {}", tmp);
  auto cleanup = [&] { unlink(tmp.c_str()); };
  if (o.socket_gid && lchown(tmp.c_str(), static_cast<uid_t>(-1), *o.socket_gid) != 0) {
    auto e = fail_errno("chown {} to gid {}", o.socket_path, *o.socket_gid);
    cleanup();
    return e;
  }
  if (chmod(tmp.c_str(), o.socket_mode) != 0) {
    auto e = fail_errno("chmod {}", o.socket_path);
    cleanup();
    return e;
  }
  if (listen(fd.get(), 128) != 0) {
    auto e = fail_errno("listen on {}", o.socket_path);
    cleanup();
    return e;
  }
  if (rename(tmp.c_str(), o.socket_path.c_str()) != 0) {
    auto e = fail_errno("renaming {} into place", o.socket_path);
    cleanup();
    return e;
  }
  return fd;
}

}  // namespace

Result<ServerOptions> server_options(const core::Config& cfg) {
  ServerOptions o;
  o.socket_path = cfg.socket_path;
  o.socket_mode = cfg.socket_mode;
  if (!cfg.socket_group.empty()) {
    auto g = resolve_group(cfg.socket_group);
    if (!g) return wrap(g, "socket.group");
    o.socket_gid = *g;
  }
  auto p = AccessPolicy::create(cfg.access, cfg.socket_group, cfg.admin_group);
  if (!p) return Unexpected(p.error());
  o.policy = std::move(*p);
  o.timeout = cfg.http_timeout;
  o.max_body_bytes = cfg.max_body_bytes;
  o.max_connections = cfg.max_connections;
  return o;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;

void Server::set_policy(AccessPolicy p) {
  std::lock_guard lk(impl_->mu);
  impl_->opts.policy = std::move(p);
}

size_t Server::watcher_count() const {
  std::lock_guard lk(impl_->mu);
  return impl_->watchers.size();
}

Result<std::unique_ptr<Server>> Server::start(sd_event* loop, ServerOptions opts, ServerDeps deps) {
  if (!deps.store) return fail(EINVAL, "status server needs a store");
  auto impl = std::make_unique<Impl>();
  impl->loop = loop;
  impl->deps = deps;
  impl->api = std::make_unique<Api>(deps);
  auto fd = make_listener(opts);
  if (!fd) return Unexpected(fd.error());
  impl->opts = std::move(opts);
  impl->sub = deps.store->subscribe([p = impl.get()](const core::Event& ev) { p->on_event(ev); });
  {
    std::lock_guard lk(impl->mu);
    impl->last_seq = std::max(impl->last_seq, deps.store->last_seq());
  }
  int lfd = fd->release();  // MHD closes it in MHD_stop_daemon
  impl->mhd = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &on_request,
      impl.get(), MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned>(impl->opts.timeout.count()), MHD_OPTION_CONNECTION_LIMIT,
      impl->opts.max_connections, MHD_OPTION_NOTIFY_COMPLETED, &on_completed, nullptr,
      MHD_OPTION_EXTERNAL_LOGGER, &log_mhd, nullptr, MHD_OPTION_END);
  if (!impl->mhd) {
    close(lfd);
    unlink(impl->opts.socket_path.c_str());
    impl->opts.socket_path.clear();
    return fail(EIO, "starting libmicrohttpd on {} failed", impl->opts.socket_path);
  }
  const MHD_DaemonInfo* di = MHD_get_daemon_info(impl->mhd, MHD_DAEMON_INFO_EPOLL_FD);
  if (!di) return fail(EIO, "libmicrohttpd has no epoll fd");
  int r = sd_event_add_io(loop, &impl->io, di->epoll_fd, EPOLLIN, &on_io, impl.get());
  if (r < 0) return fail_code(-r, "adding the status socket to the event loop");
  r = sd_event_add_time(loop, &impl->timer, CLOCK_MONOTONIC, 0, 1000, &on_timer, impl.get());
  if (r < 0) return fail_code(-r, "adding the status socket timer");
  impl->rearm();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace podshim::status
