#include "shim/status/metrics_listener.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>

#include "base/log.h"
#include "base/str.h"
#include "base/unique_fd.h"
#include "shim/status/http.h"

namespace podshim::status {

namespace {

// The host part of an IPv4 or IPv6 address, without brackets or port.
std::string peer_host(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof(host));
  } else if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof(host));
  }
  return host;
}

std::string format_address(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET6)
    return fmt::format("[{}]:{}", peer_host(ss), ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port));
  return fmt::format("{}:{}", peer_host(ss), ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port));
}

}  // namespace

// A scraper needs one connection at a time, sends no body, and reconnects
// freely; so each connection carries one request and is closed after the
// answer ("Connection: close"). The request is read by the same strict
// reader as the status socket's (shim/status/http.h), with an 8 KiB head and
// no body. A client must complete its head within 2 s of connecting and read
// the answer within 10 s. When all 16 slots are taken, a new connection
// takes the slot of the one that has waited longest for its head, chosen
// among the peer address that holds the most waiting connections: clients
// that dribble bytes and reconnect cannot keep a scraper out, neither by
// making it the oldest (each eviction makes room for one of them, which
// evicts the next) nor while it is still being scheduled to send its
// request. This used to be libmicrohttpd,
// whose Debian build pulls GnuTLS and its eight libraries (about 2.4 MiB of
// resident mappings in podshimd) into every node's daemon for a listener
// that is off by default.
struct MetricsListener::Impl {
  static constexpr size_t kMaxConnections = 16;
  static constexpr size_t kMaxHeadBytes = 8 << 10;
  static constexpr uint64_t kHeadDeadlineUs = 2'000'000;   // connect to complete head
  static constexpr uint64_t kReplyDeadlineUs = 10'000'000;  // the answer written

  struct Conn {
    Conn() : reader(HttpLimits{kMaxHeadBytes, 0}) {}
    Impl* owner = nullptr;
    std::list<Conn>::iterator self;
    UniqueFd fd;
    sd_event_source* io = nullptr;
    sd_event_source* timer = nullptr;
    uint64_t accepted_us = 0;
    std::string peer;  // the client's address without its port
    HttpRequestReader reader;
    std::string in;
    std::string out;
    size_t sent = 0;
    ~Conn() {
      if (io) sd_event_source_disable_unref(io);
      if (timer) sd_event_source_disable_unref(timer);
    }
  };

  sd_event* loop = nullptr;
  UniqueFd listen_fd;
  sd_event_source* accept_src = nullptr;
  std::function<std::string()> render;
  std::string address;
  std::list<Conn> conns;

  ~Impl() {
    conns.clear();
    if (accept_src) sd_event_source_disable_unref(accept_src);
  }

  void close_conn(Conn& c) { conns.erase(c.self); }

  static std::string response(int status, std::string_view type, std::string_view body, bool head_only,
                              std::string_view extra = {}) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
                                  status, reason_phrase(status), type, body.size(), extra);
    if (!head_only) out.append(body);
    return out;
  }

  // The answer to a complete, well-formed request.
  std::string answer(const HttpRequest& r) {
    const bool head_only = r.method == "HEAD";
    if (r.path != "/metrics")
      return response(404, "text/plain", "not found: only /metrics is served here\n", head_only);
    if (r.method != "GET" && !head_only)
      return response(405, "text/plain", "use GET\n", false, "Allow: GET, HEAD\r\n");
    // The boundary of the renderer: a throw is a 500 for this scrape, not
    // the end of the daemon.
    try {
      return response(200, "text/plain; version=0.0.4; charset=utf-8", render(), head_only);
    } catch (const std::exception& e) {
      log::err("metrics listener: rendering the metrics failed: {}", e.what());
      return response(500, "text/plain", "rendering the metrics failed; see podshimd's log\n", false);
    }
  }

  // Writes what it can; false when the connection is done (sent or failed).
  bool flush(Conn& c) {
    while (c.sent < c.out.size()) {
      ssize_t n = send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        sd_event_source_set_io_events(c.io, EPOLLOUT);
        return true;
      }
      return false;
    }
    return false;
  }

  // Queues the answer once the request is complete or refused; true when
  // an answer is queued.
  bool decide(Conn& c) {
    HttpRequestReader::Step step = c.reader.feed(c.in);
    if (step == HttpRequestReader::Step::Head) {
      // The method and path are known before any body: a POST is told 405
      // (with Allow), not 413 for the body it may carry.
      const HttpRequest& r = c.reader.request();
      const bool served = r.path == "/metrics" && (r.method == "GET" || r.method == "HEAD");
      step = served ? c.reader.feed(c.in) : HttpRequestReader::Step::Done;  // no body: Done
    }
    if (step == HttpRequestReader::Step::More) return false;
    if (step == HttpRequestReader::Step::Refused) {
      const auto& f = c.reader.refusal();
      c.out = response(f.status, "text/plain", f.message + "\n", false);
    } else {
      c.out = answer(c.reader.request());
    }
    c.in.clear();
    c.in.shrink_to_fit();
    uint64_t now = 0;
    sd_event_now(loop, CLOCK_MONOTONIC, &now);
    sd_event_source_set_time(c.timer, now + kReplyDeadlineUs);
    return true;
  }

  void on_conn_io(Conn& c, uint32_t events) {
    if (!c.out.empty()) {
      if (!flush(c)) close_conn(c);
      return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
      char buf[4096];
      for (;;) {
        ssize_t n = recv(c.fd.get(), buf, sizeof(buf), 0);
        if (n > 0) {
          c.in.append(buf, static_cast<size_t>(n));
          // Decide as bytes come: a request followed by a half-close
          // (shutdown(SHUT_WR)) is answered, not dropped with the EOF.
          if (decide(c)) {
            if (!flush(c)) close_conn(c);
            return;
          }
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        close_conn(c);  // closed (or failed) before a complete request
        return;
      }
    }
  }

  // Before anyone loses a slot, reads what has already arrived on every
  // unanswered connection. Under reconnect churn (each evicted client
  // reconnects at once) accepts can outrun the dispatch of a read event, and
  // a scraper whose whole request sits in its socket buffer would become the
  // oldest and be cut off unanswered. Reading first answers it instead, and
  // frees the slots of clients that have already gone.
  void catch_up_unanswered() {
    for (auto it = conns.begin(); it != conns.end();) {
      Conn& c = *it++;  // c may be closed (erased) below
      if (c.out.empty()) guarded_io(c, EPOLLIN);
    }
  }

  // The connection that has waited longest for its head, from the peer
  // address that holds the most such connections; null if every slot is
  // answering. conns is in accept order, and holds at most 16.
  Conn* oldest_unanswered() {
    Conn* victim = nullptr;
    size_t victim_count = 0;
    for (auto& c : conns) {
      if (!c.out.empty()) continue;
      size_t count = 0;
      for (const auto& o : conns) count += o.out.empty() && o.peer == c.peer;
      if (count > victim_count) victim = &c, victim_count = count;
    }
    return victim;
  }

  void on_accept() {
    for (;;) {
      sockaddr_storage peer{};
      socklen_t peer_len = sizeof(peer);
      UniqueFd fd(accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) log::debug("metrics listener: accept: {}", std::strerror(errno));
        return;
      }
      if (conns.size() >= kMaxConnections) catch_up_unanswered();
      if (conns.size() >= kMaxConnections) {
        if (Conn* victim = oldest_unanswered()) {
          close_conn(*victim);
        } else {
          // Every slot is writing an answer. Best effort, never blocking.
          const std::string busy = response(503, "text/plain", "too many connections\n", false);
          (void)send(fd.get(), busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          continue;
        }
      }
      conns.emplace_back();
      Conn& c = conns.back();
      c.owner = this;
      c.self = std::prev(conns.end());
      c.fd = std::move(fd);
      c.peer = peer_host(peer);
      sd_event_now(loop, CLOCK_MONOTONIC, &c.accepted_us);
      if (sd_event_add_io(loop, &c.io, c.fd.get(), EPOLLIN, &conn_io_cb, &c) < 0 ||
          sd_event_add_time(loop, &c.timer, CLOCK_MONOTONIC, c.accepted_us + kHeadDeadlineUs, 100'000,
                            &conn_timer_cb, &c) < 0) {
        conns.pop_back();
        continue;
      }
    }
  }

  // Each callback is a boundary: nothing a client sends may end the daemon.
  void guarded_io(Conn& c, uint32_t events) {
    try {
      on_conn_io(c, events);
    } catch (const std::exception& e) {
      log::err("metrics listener: dropping a connection after an error: {}", e.what());
      close_conn(c);
    }
  }
  static int conn_io_cb(sd_event_source*, int, uint32_t events, void* userdata) {
    auto* c = static_cast<Conn*>(userdata);
    c->owner->guarded_io(*c, events);
    return 0;
  }
  static int conn_timer_cb(sd_event_source*, uint64_t, void* userdata) {
    auto* c = static_cast<Conn*>(userdata);
    c->owner->close_conn(*c);
    return 0;
  }
  static int accept_cb(sd_event_source*, int, uint32_t, void* userdata) {
    try {
      static_cast<Impl*>(userdata)->on_accept();
    } catch (const std::exception& e) {
      log::err("metrics listener: accepting a connection failed: {}", e.what());
    }
    return 0;
  }
};

Result<ListenAddress> parse_listen_address(std::string_view s) {
  auto bad = [&](std::string_view why) {
    return fail(EINVAL, "metrics.listen: '{}' is not HOST:PORT ({})", s, why);
  };
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string_view host = s.substr(0, colon), port_text = s.substr(colon + 1);
  auto port = str::parse_u64(port_text);
  if (!port || *port > 65535) return bad("port must be 0..65535");
  ListenAddress la;
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad("unterminated IPv6 literal");
    std::string h(host.substr(1, host.size() - 2));
    auto* a = reinterpret_cast<sockaddr_in6*>(&la.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(*port));
    if (inet_pton(AF_INET6, h.c_str(), &a->sin6_addr) != 1) return bad("bad IPv6 address");
    la.len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&la.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(*port));
    if (host.empty()) {
      a->sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET, std::string(host).c_str(), &a->sin_addr) != 1) {
      return bad("HOST must be an IPv4 address, [IPv6] or empty; names are not resolved");
    }
    la.len = sizeof(sockaddr_in);
  }
  la.text = std::string(s);
  return la;
}

MetricsListener::MetricsListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsListener::~MetricsListener() = default;
const std::string& MetricsListener::address() const { return impl_->address; }

Result<std::unique_ptr<MetricsListener>> MetricsListener::start(sd_event* loop, std::string_view address,
                                                                std::function<std::string()> render) {
  auto la = parse_listen_address(address);
  if (!la) return Unexpected(la.error());
  UniqueFd fd(socket(la->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("metrics listener socket");
  int one = 1;
  // Without it a restart may find the port in TIME_WAIT: bind() below then
  // fails and says so.
  (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&la->addr), la->len) != 0) {
    return fail_errno("binding the metrics listener to {}", la->text);
  }
  if (listen(fd.get(), 64) != 0) return fail_errno("listen on {}", la->text);
  sockaddr_storage bound{};
  socklen_t blen = sizeof(bound);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &blen) != 0) {
    return fail_errno("getsockname on {}", la->text);
  }
  auto impl = std::make_unique<Impl>();
  impl->loop = loop;
  impl->render = std::move(render);
  impl->address = format_address(bound);
  impl->listen_fd = std::move(fd);
  int r = sd_event_add_io(loop, &impl->accept_src, impl->listen_fd.get(), EPOLLIN, &Impl::accept_cb, impl.get());
  if (r < 0) return fail_code(-r, "adding the metrics listener to the event loop");
  return std::unique_ptr<MetricsListener>(new MetricsListener(std::move(impl)));
}

}  // namespace podshim::status
