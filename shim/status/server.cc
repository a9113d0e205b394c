#include "shim/status/server.h"

// Why our own server and not libmicrohttpd 0.9.75 (which served this socket
// before): it cannot bound what a slow or hostile client holds.
//  - MHD_OPTION_CONNECTION_TIMEOUT is an idle timer: every successful recv
//    moves connection->last_activity forward (src/microhttpd/connection.c,
//    MHD_connection_handle_read: read_buffer_offset += bytes_read, then
//    MHD_update_last_activity_), and the timeout compares against it. A
//    client sending one header line per second keeps its slot forever, which
//    the hostile table reproduced against 0.9.75 (a 1.5 s drip held a 3 s
//    timeout's connection for 30 s); 0.9.x has no total deadline for the head
//    or the body.
//  - Connection limits are global (MHD_OPTION_CONNECTION_LIMIT) or per IP
//    address (MHD_OPTION_PER_IP_CONNECTION_LIMIT, meaningless on AF_UNIX);
//    nothing counts by peer uid or keeps slots for root, so seventy slow
//    read-only members locked root and podshim-hook out.
//  - The access handler gets the URL as a NUL-terminated, already
//    percent-decoded C string, so "/v1/containers/c1%00x" reached us as
//    "/v1/containers/c1"; repeated Content-Length headers are resolved by
//    MHD taking the first; an unknown Transfer-Encoding is left waiting for
//    the timeout. None of that can be refused from the handler.
// The server below is small on purpose: HTTP/1.1 over a unix socket only,
// strict request-line and header parsing, Content-Length or chunked bodies,
// one request at a time per connection (pipelined requests are answered in
// order), every phase bounded by a total deadline.

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include <fmt/compile.h>

#include "base/fs.h"
#include "base/guard.h"
#include "base/log.h"
#include "base/str.h"
#include "base/unique_fd.h"
#include "shim/core/json.h"
#include "shim/core/json_writer.h"
#include "shim/status/api.h"
#include "shim/status/http.h"

namespace podshim::status {

using nlohmann::json;

namespace {

constexpr size_t kReadChunk = 16384;

struct Conn;

}  // namespace

namespace {

enum class Phase { Head, Body, Reply, Watch, Closing };

}  // namespace

struct Server::Impl {
  ServerOptions opts;
  ServerDeps deps;
  sd_event* loop = nullptr;
  UniqueFd listen_fd;
  sd_event_source* listen_src = nullptr;
  UniqueFd wake_fd;
  sd_event_source* wake_src = nullptr;
  uint64_t sub = 0;
  std::unique_ptr<Api> api;
  std::list<std::unique_ptr<Conn>> conns;
  std::map<uid_t, unsigned> per_uid;
  unsigned total = 0;
  unsigned per_uid_limit = 1;
  unsigned reserved = 2;

  mutable std::mutex mu;  // watchers' pending lines, last_seq, policy, watcher count
  std::set<Conn*> watchers;
  uint64_t last_seq = 0;
  // Every live watcher's backlog (its pending lines plus its output not yet
  // taken by the socket, as last counted), summed; guarded by mu.
  size_t watch_bytes = 0;
  // podshim_http_requests_total's series by method and status, found once
  // (count_request runs for every request); loop thread only.
  std::unordered_map<int, core::Family::Cell> http_cells;

  ~Impl();
  void count_request(std::string_view method, int status);
  void accept_next();
  bool admit(int fd, const Peer& peer, bool* reserved_slot);
  void serve_accepted(UniqueFd fd, const Peer& peer, bool reserved_slot);
  void close_conn(Conn* c);
  void on_event(const core::Event& ev);
  void drop_watcher(Conn* c, bool over_total);  // with mu held
  void wake();
};

namespace {

using Impl = Server::Impl;

struct Conn {
  explicit Conn(HttpLimits limits) : reader(limits) {}
  Impl* impl = nullptr;
  UniqueFd fd;
  sd_event_source* io = nullptr;
  sd_event_source* timer = nullptr;
  uint32_t armed = EPOLLIN | EPOLLRDHUP;  // the io source's events, as last set
  // The connection's deadline (CLOCK_MONOTONIC µs, 0 none) and the time its
  // timer is armed for (0 off; the timer is added only when the connection
  // has to wait, Impl::accept_next). The timer is moved only when the
  // deadline comes earlier than it: a deadline pushed later, as on every
  // request of a kept-alive connection, costs no timer update, and a timer
  // that fires early is armed again for the deadline (on_conn_timer).
  uint64_t deadline_us = 0;
  uint64_t armed_us = 0;
  Peer peer;
  bool groups_loaded = false;  // peer.groups fetched (only when a rule needs them)
  bool reserved_slot = false;  // counted against root's reserve
  Phase phase = Phase::Head;
  std::string in;
  std::string out;
  size_t out_off = 0;
  // Sent after `out`: a reply's large body (Reply::body), shared.
  std::shared_ptr<const std::string> tail;
  size_t tail_off = 0;
  HttpRequestReader reader;
  HttpRequest& req = reader.request();  // the request being read or answered
  // watch: `pending` (lines not yet moved to `out`), `out_counted` (the
  // unsent part of `out` as last counted in impl->watch_bytes), `dropped`
  // and `drop_why` are guarded by impl->mu; `out` stays the loop thread's.
  std::string pending;
  size_t out_counted = 0;
  bool dropped = false;      // over a limit: the loop closes it at its next wake-up
  std::string drop_why;
  bool watch_chunked = true;  // HTTP/1.1: chunked; HTTP/1.0: unframed, ended by the close
  std::list<std::unique_ptr<Conn>>::iterator self;
  bool dead = false;
};

uint64_t now_us(Impl* impl) {
  uint64_t n = 0;
  sd_event_now(impl->loop, CLOCK_MONOTONIC, &n);
  return n;
}

void arm_timer(Conn* c) {
  c->armed_us = c->deadline_us;
  sd_event_source_set_time(c->timer, c->armed_us);
  sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

void set_deadline(Conn* c, std::optional<std::chrono::milliseconds> d) {
  c->deadline_us = d ? now_us(c->impl) + static_cast<uint64_t>(d->count()) * 1000 : 0;
  // Not on the loop yet (Impl::accept_next arms it), no deadline (a timer
  // still armed fires once and finds none), or a timer that fires first.
  if (!c->timer || c->deadline_us == 0 || (c->armed_us != 0 && c->armed_us <= c->deadline_us)) return;
  arm_timer(c);
}

void update_events(Conn* c) {
  uint32_t ev = 0;
  if (c->out_off < c->out.size() || c->tail) ev |= EPOLLOUT;
  // Reading stops while a reply is pending (pipelined requests wait in the
  // socket); a watch stream reads only to notice the peer hanging up.
  if (c->phase == Phase::Head || c->phase == Phase::Body || c->phase == Phase::Watch) ev |= EPOLLIN | EPOLLRDHUP;
  // Each change is an epoll_ctl: a reply written at once leaves the mask as
  // it was (two epoll_ctl per kept-alive request before).
  if (ev == c->armed) return;
  c->armed = ev;
  if (c->io) sd_event_source_set_io_events(c->io, ev);  // else added with `armed` (Impl::accept_next)
}

// A body up to this size is copied after the head into `out`: one write
// instead of two iovecs.
constexpr size_t kCopiedBody = 4096;

// Queues a complete reply. `close` ends the connection once it is written.
void respond(Conn* c, Reply&& r, bool close) {
  auto* impl = c->impl;
  bool head = c->req.method == "HEAD";
  close = close || !c->req.keep_alive;
  const std::string_view body = r.text();
  if (c->tail) {  // an earlier reply's shared body still unsent: it goes first
    c->out.append(*c->tail, c->tail_off);
    c->tail.reset();
    c->tail_off = 0;
  }
  // The head is written in place, its format parsed at compile time: this
  // runs for every request.
  auto out = std::back_inserter(c->out);
  fmt::format_to(out, FMT_COMPILE("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n"), r.status,
                 reason_phrase(r.status), r.content_type, body.size());
  if (r.status == 405) {
    fmt::format_to(out, "Allow: {}\r\n",
                   allowed_methods(c->req.path.empty() ? std::string_view("/") : c->req.path));
  }
  if (close) c->out += "Connection: close\r\n";
  c->out += "\r\n";
  if (head) {
  } else if (body.size() > kCopiedBody) {
    // A large body (the container list, a scrape) is sent from where it is
    // kept, after the head: no copy of its size per request.
    c->tail = std::move(r.body);
    c->tail_off = 0;
  } else {
    c->out += body;
  }
  impl->count_request(c->req.method, r.status);
  c->phase = close ? Phase::Closing : Phase::Reply;
  set_deadline(c, impl->opts.timeout);
  // No update_events here: every caller ends in flush(), which writes the
  // reply now and asks for EPOLLOUT only for what the socket did not take.
}

void refuse(Conn* c, int status, std::string_view msg) { respond(c, error_reply(status, msg), true); }

void start_watch(Conn* c) {
  auto* impl = c->impl;
  if (c->reserved_slot) {
    refuse(c, 503, "watch streams may not use the connections reserved for root's requests; try again");
    return;
  }
  {
    std::lock_guard lk(impl->mu);
    // The first line says where the stream starts: every later line has a
    // larger seq, with no gaps.
    std::string first = json{{"seq", impl->last_seq}, {"type", "Bookmark"}}.dump() + "\n";
    c->out += "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nCache-Control: no-cache\r\n";
    // HTTP/1.0 has no chunked coding (RFC 9112 §6.1: no Transfer-Encoding
    // unless the request is HTTP/1.1): there the lines go unframed and the
    // stream ends when the connection closes.
    c->watch_chunked = !c->req.http10;
    if (c->watch_chunked) {
      c->out += "Transfer-Encoding: chunked\r\n\r\n";
      c->out += fmt::format("{:x}\r\n{}\r\n", first.size(), first);
    } else {
      c->out += "Connection: close\r\n\r\n";
      c->out += first;
    }
    impl->watchers.insert(c);
  }
  impl->count_request(c->req.method, 200);
  c->phase = Phase::Watch;
  set_deadline(c, std::nullopt);
  update_events(c);
}

void dispatch(Conn* c) {
  auto* impl = c->impl;
  auto& r = c->req;
  if (r.path == "/v1/watch" && r.method == "GET") return start_watch(c);
  Reply reply;
  // The boundary of a handler: whatever it throws (std::bad_alloc
  // included) becomes a 500 for this request, logged once, and the daemon
  // goes on serving.
  try {
    reply = impl->api->handle(r.method, r.path, r.body);
  } catch (const std::exception& e) {
    log::err("status socket: {} {} failed: {}", r.method, shown(r.path), e.what());
    reply = error_reply(500, "internal error while handling the request; see podshimd's log");
  }
  respond(c, std::move(reply), false);
}

// The head is read and checked (shim/status/http.cc): what remains is ours
// to decide before any body is read: the method, access, the body limit per
// method, 100-continue.
void on_head(Conn* c) {
  auto* impl = c->impl;
  auto& r = c->req;
  // Unknown methods: 405 with Allow, before access control (so the answer
  // says what is wrong, not who is asking).
  static const std::set<std::string_view> known{"GET", "HEAD", "POST", "DELETE"};
  if (!known.count(r.method)) {
    return refuse(c, 405, fmt::format("method '{}' is not supported on {} (allowed: {})", shown(r.method),
                                      shown(r.path), allowed_methods(r.path)));
  }
  // Access control on the canonical path.
  bool allowed = false;
  {
    std::lock_guard lk(impl->mu);
    if (!c->groups_loaded && impl->opts.policy.needs_groups(c->peer, r.method, r.path)) {
      load_groups(c->fd.get(), c->peer);
      c->groups_loaded = true;
    }
    allowed = impl->opts.policy.allowed(c->peer, r.method, r.path);
  }
  if (!allowed) {
    // Every denial is logged with who asked (kubelet authz logs the same).
    // Rate-limited: a client that asks in a loop must not flood the journal
    // (every denial is still counted in podshim_http_denied_total).
    static log::RateLimit denied_limit(std::chrono::seconds(10), 10);
    log::limited(denied_limit, log::Level::Warning,
                 {{"PEER_UID", std::to_string(c->peer.uid)}, {"PEER_PID", std::to_string(c->peer.pid)}},
                 "status socket: denied {} {} to uid {} pid {}", r.method, shown(r.path), c->peer.uid, c->peer.pid);
    if (impl->deps.metrics) impl->deps.metrics->http_denied.inc();
    return refuse(c, 403, fmt::format("{} {} is not allowed for uid {}", r.method, r.path, c->peer.uid));
  }
  // Only POST carries a body (the reader already bounds its size).
  if (r.has_body && r.method != "POST") return refuse(c, 413, fmt::format("{} requests take no body", r.method));
  c->phase = Phase::Body;
  if (!r.has_body) return;  // process() reads it as complete at once
  if (r.expect_continue) c->out += "HTTP/1.1 100 Continue\r\n\r\n";
  set_deadline(c, impl->opts.timeout);
  update_events(c);
}

// Consumes what it can of c->in; returns after a reply is queued or when it
// needs more bytes.
void process(Conn* c) {
  while (c->phase == Phase::Head || c->phase == Phase::Body) {
    switch (c->reader.feed(c->in)) {
      case HttpRequestReader::Step::More:
        return;
      case HttpRequestReader::Step::Refused:
        return refuse(c, c->reader.refusal().status, c->reader.refusal().message);
      case HttpRequestReader::Step::Head:
        on_head(c);
        break;
      case HttpRequestReader::Step::Done:
        return dispatch(c);
    }
  }
}

void reset_request(Conn* c) {
  c->reader.reset();
  c->phase = Phase::Head;
  // The next request's head must arrive within the deadline too (keep-alive
  // idle time counts against it).
  set_deadline(c, c->impl->opts.timeout);
}

// Sends what the socket takes of `out` and then `tail`, in one sendmsg
// each time; false when the connection failed.
bool send_some(Conn* c) {
  for (;;) {
    iovec iov[2];
    size_t n_iov = 0;
    if (c->out_off < c->out.size()) iov[n_iov++] = {c->out.data() + c->out_off, c->out.size() - c->out_off};
    if (c->tail && c->tail_off < c->tail->size())
      iov[n_iov++] = {const_cast<char*>(c->tail->data()) + c->tail_off, c->tail->size() - c->tail_off};
    if (n_iov == 0) return true;
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = n_iov;
    ssize_t n = sendmsg(c->fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN;
    }
    auto sent = static_cast<size_t>(n);
    const size_t from_out = std::min(sent, c->out.size() - c->out_off);
    c->out_off += from_out;
    c->tail_off += sent - from_out;
  }
}

bool all_sent(const Conn* c) {
  return c->out_off == c->out.size() && (!c->tail || c->tail_off == c->tail->size());
}

void flush(Conn* c) {
  for (;;) {
    if (!send_some(c)) {
      c->dead = true;
      return;
    }
    if (!all_sent(c)) break;
    c->out.clear();
    c->out_off = 0;
    c->tail.reset();
    c->tail_off = 0;
    if (c->phase == Phase::Closing) {
      c->dead = true;
      return;
    }
    if (c->phase != Phase::Reply) break;
    reset_request(c);
    process(c);  // a pipelined request may already be buffered
    if (c->dead || c->out.empty()) break;
  }
  update_events(c);
}

// A watch stream's buffers keep at most this much capacity once empty: the
// peak of a burst is given back, not held for the life of the stream.
constexpr size_t kWatchKeepCapacity = 64 << 10;

void release_if_large(std::string& s) {
  if (s.capacity() > kWatchKeepCapacity) std::string().swap(s);
  else s.clear();
}

// flush() for a watch stream, then its backlog counted again.
void flush_watch(Conn* c) {
  flush(c);
  if (c->dead) return;
  if (c->out.empty()) release_if_large(c->out);
  size_t unsent = c->out.size() - c->out_off;
  std::lock_guard lk(c->impl->mu);
  if (c->dropped) return;  // already taken out of the total
  c->impl->watch_bytes = c->impl->watch_bytes - c->out_counted + unsent;
  c->out_counted = unsent;
}

void read_some(Conn* c) {
  char buf[kReadChunk];
  for (int rounds = 0; rounds < 4; ++rounds) {
    ssize_t n = recv(c->fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      c->dead = true;
      return;
    }
    if (n == 0) {
      // The peer is gone (or half-closed): whatever was half-sent is dropped.
      if (c->phase == Phase::Head || c->phase == Phase::Body || c->phase == Phase::Watch) c->dead = true;
      return;
    }
    if (c->phase == Phase::Watch) continue;  // nothing to read on a stream
    c->in.append(buf, static_cast<size_t>(n));
    if (c->phase == Phase::Head || c->phase == Phase::Body) process(c);
    if (c->phase != Phase::Head && c->phase != Phase::Body) return;
    if (static_cast<size_t>(n) < sizeof(buf)) return;
  }
}

int on_conn_io_body(sd_event_source*, int, uint32_t revents, void* userdata) {
  auto* c = static_cast<Conn*>(userdata);
  if (revents & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    if (c->phase == Phase::Head || c->phase == Phase::Body || c->phase == Phase::Watch) read_some(c);
    else if (revents & (EPOLLHUP | EPOLLERR)) c->dead = true;
  }
  if (!c->dead) {
    if (c->phase == Phase::Watch) flush_watch(c);
    else flush(c);
  }
  if (c->dead) c->impl->close_conn(c);
  return 0;
}

int on_conn_timer_body(sd_event_source*, uint64_t, void* userdata) {
  auto* c = static_cast<Conn*>(userdata);
  c->armed_us = 0;
  if (c->deadline_us == 0) return 0;  // the deadline was lifted (a watch stream)
  if (now_us(c->impl) < c->deadline_us) {  // pushed later since the timer was armed
    arm_timer(c);
    return 0;
  }
  if (c->phase == Phase::Head && c->in.empty() && !c->reader.started()) {
    c->impl->close_conn(c);  // an idle keep-alive connection: nothing to answer
    return 0;
  }
  if (c->phase == Phase::Head || c->phase == Phase::Body) {
    bool body = c->phase == Phase::Body;
    c->in.clear();
    refuse(c, 408, fmt::format("request {} not complete within {} ms", body ? "body" : "head",
                               c->impl->opts.timeout.count()));
    // No second chance: the reply gets a short deadline of its own.
    set_deadline(c, std::chrono::milliseconds(std::min<int64_t>(c->impl->opts.timeout.count(), 1000)));
    flush(c);
    if (c->dead) c->impl->close_conn(c);
    return 0;
  }
  c->impl->close_conn(c);  // a reply the client did not read in time
  return 0;
}

int on_listen_body(sd_event_source*, int, uint32_t, void* userdata) {
  static_cast<Impl*>(userdata)->accept_next();
  return 0;
}

int on_wake_body(sd_event_source*, int fd, uint32_t, void* userdata) {
  auto* impl = static_cast<Impl*>(userdata);
  uint64_t v;
  // Drains the eventfd; the count is not needed, and EAGAIN means an
  // earlier wake already drained it.
  (void)!read(fd, &v, sizeof(v));
  std::vector<Conn*> ws;
  {
    std::lock_guard lk(impl->mu);
    for (auto* c : impl->watchers) {
      if (c->dropped) {
        // Over a limit (Impl::on_event): closed now, which frees its output.
        c->dead = true;
      } else if (!c->pending.empty()) {
        // What was sent is cut off first (a reader that keeps up but never
        // quite empties `out` would otherwise grow it without end); the
        // memmove is of the unsent part, at most as long as what is cut.
        if (c->out_off > 0 && c->out_off >= c->out.size() - c->out_off) {
          c->out.erase(0, c->out_off);
          c->out_off = 0;
        }
        size_t before = c->out.size();
        if (c->watch_chunked) c->out += fmt::format("{:x}\r\n", c->pending.size());
        c->out += c->pending;
        if (c->watch_chunked) c->out += "\r\n";
        size_t added = c->out.size() - before;
        // The lines move from `pending` to `out`: the backlog grows only by
        // the chunk framing.
        impl->watch_bytes += added - c->pending.size();
        c->out_counted += added;
        release_if_large(c->pending);
      }
      ws.push_back(c);
    }
  }
  for (auto* c : ws) {
    if (c->dead) {
      // drop_why was written before `dropped`, under mu, and never again.
      log::warn("status socket: closing the /v1/watch stream of uid {} pid {}: {}; it can re-list", c->peer.uid,
                c->peer.pid, c->drop_why);
    }
    if (!c->dead) flush_watch(c);
    if (c->dead) impl->close_conn(c);
  }
  return 0;
}

// The loop's entry points into the server, each an exception boundary
// (base/guard.h): a connection whose handling threw is answered 500 if it
// was still reading its request, else closed; the server goes on.
void after_throw(Conn* c) {
  if (c->phase == Phase::Head || c->phase == Phase::Body) {
    c->in.clear();
    contain("status socket: answering 500", [&] {
      refuse(c, 500, "internal error while reading the request; see podshimd's log");
      flush(c);
    });
    if (!c->dead && c->phase == Phase::Closing) return;
  }
  c->impl->close_conn(c);
}

int on_conn_io(sd_event_source* s, int fd, uint32_t revents, void* userdata) {
  auto* c = static_cast<Conn*>(userdata);
  if (!contain("status socket: connection", [&] { on_conn_io_body(s, fd, revents, userdata); })) after_throw(c);
  return 0;
}

int on_conn_timer(sd_event_source* s, uint64_t usec, void* userdata) {
  auto* c = static_cast<Conn*>(userdata);
  if (!contain("status socket: connection deadline", [&] { on_conn_timer_body(s, usec, userdata); })) {
    c->impl->close_conn(c);
  }
  return 0;
}

int on_listen(sd_event_source* s, int fd, uint32_t revents, void* userdata) {
  contain("status socket: accept", [&] { on_listen_body(s, fd, revents, userdata); });
  return 0;
}

int on_wake(sd_event_source* s, int fd, uint32_t revents, void* userdata) {
  contain("status socket: watch streams", [&] { on_wake_body(s, fd, revents, userdata); });
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
  if (listen(fd.get(), 512) != 0) {
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

// Best effort: one short reply on a connection we will not serve.
void refuse_at_accept(int fd, std::string_view msg) {
  std::string body = core::dump(json{{"error", msg}}) + "\n";
  std::string r = fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n{}",
      body.size(), body);
  // Best effort on a connection closed next: a peer that cannot take the
  // answer sees the close.
  (void)!send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

Impl::~Impl() {
  if (sub && deps.store) deps.store->unsubscribe(sub);
  {
    std::lock_guard lk(mu);
    watchers.clear();
  }
  for (auto& c : conns) {
    if (c->io) sd_event_source_disable_unref(c->io);
    if (c->timer) sd_event_source_disable_unref(c->timer);
  }
  conns.clear();
  if (listen_src) sd_event_source_disable_unref(listen_src);
  if (wake_src) sd_event_source_disable_unref(wake_src);
  if (!opts.socket_path.empty()) unlink(opts.socket_path.c_str());
}

void Impl::count_request(std::string_view method, int status) {
  if (!deps.metrics) return;
  static constexpr std::string_view kKnown[] = {"GET", "HEAD", "POST", "DELETE"};
  const int m = static_cast<int>(std::find(std::begin(kKnown), std::end(kKnown), method) - std::begin(kKnown));
  const int key = m * 1000 + status;
  auto it = http_cells.find(key);
  if (it == http_cells.end()) {
    const std::string name(m < 4 ? kKnown[m] : "other");
    it = http_cells.emplace(key, deps.metrics->http_requests.cell({{"method", name}, {"code", std::to_string(status)}}))
             .first;
  }
  it->second.inc();
}

void Impl::wake() {
  uint64_t one = 1;
  // An eventfd write fails only when the counter would overflow, and then
  // a wake is pending anyway.
  (void)!write(wake_fd.get(), &one, sizeof(one));
}

void Impl::on_event(const core::Event& ev) {
  {
    // Most events have no watcher: serialize only for those who listen (perf showed the JSON
    // of every store event at about 4% of podshimd's CPU on the NRI path).
    std::lock_guard lk(mu);
    last_seq = std::max(last_seq, ev.seq);
    if (watchers.empty()) return;
  }
  std::string line;
  core::append_json(line, ev);
  line += '\n';
  const size_t n = line.size();
  std::lock_guard lk(mu);
  // A watcher's backlog is what it has not taken yet: its pending lines and
  // the unsent part of its output (as counted after the loop's last write
  // to it). Over its own limit it is dropped.
  size_t live = 0;
  for (auto* c : watchers) {
    if (c->dropped) continue;
    if (c->pending.size() + c->out_counted + n > opts.max_watch_backlog_bytes) {
      c->drop_why = fmt::format("{} bytes behind, over http.max_watch_backlog_bytes ({})",
                                c->pending.size() + c->out_counted + n, opts.max_watch_backlog_bytes);
      drop_watcher(c, false);
    } else {
      ++live;
    }
  }
  // Over the ceiling across watchers: the ones furthest behind go first,
  // so those that keep up go on streaming.
  while (live > 0 && watch_bytes + live * n > opts.max_watch_total_bytes) {
    Conn* worst = nullptr;
    for (auto* c : watchers) {
      if (!c->dropped && (!worst || c->pending.size() + c->out_counted > worst->pending.size() + worst->out_counted)) {
        worst = c;
      }
    }
    worst->drop_why = fmt::format(
        "{} bytes behind, the furthest of {} watchers whose backlogs would pass http.max_watch_total_bytes ({})",
        worst->pending.size() + worst->out_counted, live, opts.max_watch_total_bytes);
    drop_watcher(worst, true);
    --live;
  }
  for (auto* c : watchers) {
    if (c->dropped) continue;
    c->pending += line;
    watch_bytes += n;
  }
  wake();
}

void Impl::drop_watcher(Conn* c, bool over_total) {
  watch_bytes -= c->pending.size() + c->out_counted;
  std::string().swap(c->pending);  // its memory goes now; `out` goes when the loop closes it
  c->out_counted = 0;
  c->dropped = true;
  if (deps.metrics) deps.metrics->watch_dropped.inc({{"reason", over_total ? "total" : "backlog"}});
}

void Impl::close_conn(Conn* c) {
  {
    std::lock_guard lk(mu);
    if (watchers.erase(c) && !c->dropped) {
      watch_bytes -= c->pending.size() + c->out_counted;
      c->out_counted = 0;
    }
  }
  if (c->io) sd_event_source_disable_unref(c->io);
  if (c->timer) sd_event_source_disable_unref(c->timer);
  c->io = c->timer = nullptr;
  --total;
  if (c->peer.uid != 0) {
    if (--per_uid[c->peer.uid] == 0) per_uid.erase(c->peer.uid);
  }
  conns.erase(c->self);
}

// Accepts until one connection is added (refused ones do not count, up to 64
// tries): the listener is level-triggered, so another pending connection
// wakes the loop again, after the connections already ready have had their
// turn. Looping to EAGAIN cost every one-request client a second accept4.
void Impl::accept_next() {
  for (int i = 0; i < 64; ++i) {
    UniqueFd fd(accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN) log::warn("status socket: accept: {}", strerror(errno));
      return;
    }
    auto peer = peer_of(fd.get(), /*with_groups=*/false);  // fetched when a rule asks (needs_groups)
    if (!peer) {
      log::warn("status socket: dropping a connection without credentials: {}", peer.error().message);
      continue;
    }
    bool reserved_slot = false;
    if (!admit(fd.get(), *peer, &reserved_slot)) continue;
    serve_accepted(std::move(fd), *peer, reserved_slot);
    return;
  }
}

// The connection limits: root may use every slot (a shared one while there
// are any, else one of the reserved), anyone else the shared ones, at most
// per_uid_limit at once. A connection over them is answered 503 and closed.
bool Impl::admit(int fd, const Peer& peer, bool* reserved_slot) {
  if (peer.uid == 0) {
    if (total >= opts.max_connections) {
      refuse_at_accept(fd, fmt::format("too many connections ({})", opts.max_connections));
      return false;
    }
    *reserved_slot = total >= opts.max_connections - reserved;
    return true;
  }
  unsigned mine = per_uid.count(peer.uid) ? per_uid[peer.uid] : 0;
  if (mine >= per_uid_limit) {
    refuse_at_accept(fd, fmt::format("too many connections from uid {} (limit {})", peer.uid, per_uid_limit));
    count_request("", 503);
    return false;
  }
  if (total >= opts.max_connections - reserved) {
    refuse_at_accept(fd, fmt::format("too many connections ({} in use; the rest are reserved for root)", total));
    count_request("", 503);
    return false;
  }
  return true;
}

void Impl::serve_accepted(UniqueFd fd, const Peer& peer, bool reserved_slot) {
  auto c = std::make_unique<Conn>(HttpLimits{opts.max_header_bytes, opts.max_body_bytes});
  c->impl = this;
  c->peer = peer;
  c->reserved_slot = reserved_slot;
  int cfd = fd.get();
  c->fd = std::move(fd);
  Conn* cp = c.get();
  conns.push_back(std::move(c));
  cp->self = std::prev(conns.end());
  ++total;
  if (peer.uid != 0) ++per_uid[peer.uid];
  set_deadline(cp, opts.timeout);
  // A client connects and sends at once (podshimctl, podshim-hook, with
  // "Connection: close"), so the request is usually there already: read
  // and answer it now. The connection joins the loop (an io source, which
  // is an epoll_ctl ADD, and its timer) only when it has to wait: for
  // the rest of its request, for the socket to take the reply, for the
  // next request on a kept-alive connection, or as a watch stream. A
  // one-request connection costs no epoll_ctl at all (an ADD and a DEL
  // before).
  if (!contain("status socket: connection", [&] {
        read_some(cp);
        if (!cp->dead) flush(cp);
      })) {
    cp->dead = true;
  }
  if (cp->dead) {
    close_conn(cp);
    return;
  }
  int r = sd_event_add_io(loop, &cp->io, cfd, cp->armed, &on_conn_io, cp);
  if (r < 0) {
    log::warn("status socket: adding a connection to the loop: {}", strerror(-r));
    close_conn(cp);
    return;
  }
  r = sd_event_add_time(loop, &cp->timer, CLOCK_MONOTONIC, cp->deadline_us, 1000, &on_conn_timer, cp);
  if (r < 0) {
    log::warn("status socket: adding a connection timer: {}", strerror(-r));
    close_conn(cp);
    return;
  }
  cp->armed_us = cp->deadline_us;
  if (cp->deadline_us == 0) sd_event_source_set_enabled(cp->timer, SD_EVENT_OFF);
}

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
  o.max_watch_backlog_bytes = cfg.max_watch_backlog_bytes;
  o.max_watch_total_bytes = cfg.max_watch_total_bytes;
  return o;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;

void Server::set_policy(AccessPolicy p) {
  std::lock_guard lk(impl_->mu);
  impl_->opts.policy = std::move(p);
}

size_t Server::watch_backlog_bytes() const {
  std::lock_guard lk(impl_->mu);
  return impl_->watch_bytes;
}

Result<std::unique_ptr<Server>> Server::start(sd_event* loop, ServerOptions opts, ServerDeps deps) {
  if (!deps.store) return fail(EINVAL, "status server needs a store");
  if (opts.max_connections < 2) return fail(EINVAL, "max_connections {} is below 2", opts.max_connections);
  if (opts.timeout.count() <= 0) return fail(EINVAL, "the request timeout must be positive");
  auto impl = std::make_unique<Impl>();
  impl->loop = loop;
  impl->deps = deps;
  impl->api = std::make_unique<Api>(deps);
  auto fd = make_listener(opts);
  if (!fd) return Unexpected(fd.error());
  impl->listen_fd = std::move(*fd);
  impl->opts = std::move(opts);
  auto& o = impl->opts;
  unsigned reserved = o.reserved_root_connections ? o.reserved_root_connections : std::max(2u, o.max_connections / 8);
  impl->reserved = std::min(reserved, o.max_connections / 2);
  unsigned shared = o.max_connections - impl->reserved;
  impl->per_uid_limit = o.max_connections_per_uid ? std::min(o.max_connections_per_uid, shared)
                                                  : std::max(1u, shared / 4);
  impl->wake_fd = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->wake_fd) return fail_errno("eventfd");
  int r = sd_event_add_io(loop, &impl->listen_src, impl->listen_fd.get(), EPOLLIN, &on_listen, impl.get());
  if (r < 0) return fail_code(-r, "adding the status socket to the event loop");
  r = sd_event_add_io(loop, &impl->wake_src, impl->wake_fd.get(), EPOLLIN, &on_wake, impl.get());
  if (r < 0) return fail_code(-r, "adding the status socket's wake-up to the event loop");
  impl->sub = deps.store->subscribe([p = impl.get()](const core::Event& ev) { p->on_event(ev); });
  {
    std::lock_guard lk(impl->mu);
    impl->last_seq = std::max(impl->last_seq, deps.store->last_seq());
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace podshim::status
