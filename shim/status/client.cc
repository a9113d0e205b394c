#include "shim/status/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/str.h"
#include "base/unique_fd.h"

namespace podshim::status {

namespace {

using Clock = std::chrono::steady_clock;

class Conn {
 public:
  Conn(UniqueFd fd, std::optional<Clock::time_point> deadline) : fd_(std::move(fd)), deadline_(deadline) {}

  void set_deadline(std::optional<Clock::time_point> d) { deadline_ = d; }

  Result<void> wait(short events) {
    for (;;) {
      int ms = -1;
      if (deadline_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - Clock::now()).count();
        if (left <= 0) return fail(ETIMEDOUT, "podshimd did not answer in time");
        ms = static_cast<int>(left);
      }
      struct pollfd p {fd_.get(), events, 0};
      int r = poll(&p, 1, ms);
      if (r > 0) return {};
      if (r == 0) return fail(ETIMEDOUT, "podshimd did not answer in time");
      if (errno != EINTR) return fail_errno("poll");
    }
  }

  Result<void> send_all(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == ENOTCONN) {
          PODSHIM_TRY(wait(POLLOUT));
          continue;
        }
        return fail_errno("sending to podshimd");
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return {};
  }

  // Reads more into buf_ (at least `want` bytes of room); false at EOF. The
  // socket is non-blocking: poll() only when there is nothing to read yet.
  Result<bool> fill(size_t want = 0) {
    size_t room = std::max<size_t>(want, 65536);
    size_t old = buf_.size();
    for (;;) {
      buf_.resize(old + room);
      ssize_t n = recv(fd_.get(), buf_.data() + old, room, MSG_DONTWAIT);
      if (n < 0) {
        buf_.resize(old);
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          PODSHIM_TRY(wait(POLLIN));
          continue;
        }
        return fail_errno("reading from podshimd");
      }
      buf_.resize(old + static_cast<size_t>(n));
      return n > 0;
    }
  }

  bool eof_pending() {
    // Whether the server already closed this (idle) connection.
    char b;
    ssize_t n = recv(fd_.get(), &b, 1, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
  }

  // One CRLF-terminated line (without the CRLF).
  Result<std::string> line(size_t max = 65536) {
    for (;;) {
      auto pos = buf_.find("\r\n");
      if (pos != std::string::npos) {
        std::string l = buf_.substr(0, pos);
        buf_.erase(0, pos + 2);
        return l;
      }
      if (buf_.size() > max) return fail(EPROTO, "response line too long");
      auto more = fill();
      if (!more) return Unexpected(more.error());
      if (!*more) return fail(EPROTO, "podshimd closed the connection mid-response");
    }
  }

  Result<std::string> exactly(size_t n) {
    while (buf_.size() < n) {
      auto more = fill(n - buf_.size());
      if (!more) return Unexpected(more.error());
      if (!*more) return fail(EPROTO, "podshimd closed the connection mid-body");
    }
    if (buf_.size() == n) return std::exchange(buf_, std::string());
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }

  std::string& buffer() { return buf_; }

 private:
  UniqueFd fd_;
  std::optional<Clock::time_point> deadline_;
  std::string buf_;
};

struct Head {
  int status = 0;
  std::string content_type;
  std::optional<size_t> content_length;
  bool chunked = false;
  bool close = false;  // "Connection: close"
};

Result<Conn> connect_to(const ClientOptions& opts, Clock::time_point deadline) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (opts.socket_path.size() >= sizeof(sa.sun_path)) {
    return fail(ENAMETOOLONG, "socket path '{}' too long", opts.socket_path);
  }
  std::memcpy(sa.sun_path, opts.socket_path.c_str(), opts.socket_path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("socket");
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS &&
      errno != EAGAIN) {
    return fail_errno("connecting to podshimd at {}", opts.socket_path);
  }
  Conn c(std::move(fd), deadline);
  return c;
}

Result<Head> read_head(Conn& c) {
  auto status_line = c.line();
  if (!status_line) return Unexpected(status_line.error());
  // "HTTP/1.1 200 OK"
  auto parts = str::split(*status_line, ' ');
  if (parts.size() < 2 || !str::starts_with(parts[0], "HTTP/1.")) {
    return fail(EPROTO, "malformed status line '{}'", *status_line);
  }
  auto code = str::parse_u64(parts[1]);
  if (!code || *code < 100 || *code > 599) return fail(EPROTO, "malformed status line '{}'", *status_line);
  Head h;
  h.status = static_cast<int>(*code);
  for (;;) {
    auto l = c.line();
    if (!l) return Unexpected(l.error());
    if (l->empty()) break;
    auto colon = l->find(':');
    if (colon == std::string::npos) continue;
    std::string name = l->substr(0, colon);
    for (auto& ch : name) ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
    std::string value(str::trim(std::string_view(*l).substr(colon + 1)));
    if (name == "content-length") {
      auto n = str::parse_u64(value);
      if (!n) return fail(EPROTO, "bad Content-Length '{}'", value);
      h.content_length = *n;
    } else if (name == "transfer-encoding") {
      h.chunked = value.find("chunked") != std::string::npos;
    } else if (name == "content-type") {
      h.content_type = value;
    } else if (name == "connection") {
      for (auto& ch : value) ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
      h.close = value.find("close") != std::string::npos;
    }
  }
  return h;
}

// Reads the body, handing each decoded piece to `sink`; `sink` returning
// false stops early.
Result<void> read_body(Conn& c, const Head& h, size_t max,
                       const std::function<bool(std::string_view)>& sink) {
  if (h.chunked) {
    for (;;) {
      auto sz = c.line();
      if (!sz) return Unexpected(sz.error());
      std::string hex = sz->substr(0, sz->find(';'));
      char* end = nullptr;
      unsigned long long n = std::strtoull(hex.c_str(), &end, 16);
      if (hex.empty() || *end != '\0' || n > max) return fail(EPROTO, "bad chunk size '{}'", *sz);
      if (n == 0) return {};  // trailers are ignored
      auto data = c.exactly(n);
      if (!data) return Unexpected(data.error());
      auto crlf = c.exactly(2);
      if (!crlf) return Unexpected(crlf.error());
      if (!sink(*data)) return {};
    }
  }
  if (h.content_length) {
    if (*h.content_length > max) return fail(EFBIG, "response of {} bytes is too large", *h.content_length);
    auto data = c.exactly(*h.content_length);
    if (!data) return Unexpected(data.error());
    sink(*data);
    return {};
  }
  // Until close.
  if (!c.buffer().empty()) {
    std::string first = std::move(c.buffer());
    c.buffer().clear();
    if (!sink(first)) return {};
  }
  for (;;) {
    auto more = c.fill();
    if (!more) return Unexpected(more.error());
    if (!*more) return {};
    std::string piece = std::move(c.buffer());
    c.buffer().clear();
    if (!sink(piece)) return {};
  }
}

std::string request_text(std::string_view method, std::string_view target, std::string_view body,
                         bool keep_alive = false) {
  std::string req = fmt::format("{} {} HTTP/1.1\r\nHost: podshim\r\n{}", method, target,
                                keep_alive ? "" : "Connection: close\r\n");
  if (!body.empty() || method == "POST" || method == "PUT") {
    req += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body.size());
  }
  req += "\r\n";
  req += body;
  return req;
}


Result<HttpResponse> read_response(Conn& c, const ClientOptions& opts, bool* close) {
  auto h = read_head(c);
  if (!h) return Unexpected(h.error());
  if (close) *close = h->close;
  HttpResponse r;
  r.status = h->status;
  r.content_type = h->content_type;
  bool too_big = false;
  PODSHIM_TRY(read_body(c, *h, opts.max_body, [&](std::string_view piece) {
    if (r.body.size() + piece.size() > opts.max_body) {
      too_big = true;
      return false;
    }
    r.body.append(piece);
    return true;
  }));
  if (too_big) return fail(EFBIG, "response larger than {} bytes", opts.max_body);
  return r;
}

}  // namespace

Result<HttpResponse> http_request(const ClientOptions& opts, std::string_view method,
                                  std::string_view target, std::string_view body) {
  auto c = connect_to(opts, Clock::now() + opts.timeout);
  if (!c) return Unexpected(c.error());
  PODSHIM_TRY(c->send_all(request_text(method, target, body)));
  return read_response(*c, opts, nullptr);
}

struct Connection::Impl {
  ClientOptions opts;
  std::optional<Conn> conn;
};

Connection::Connection(ClientOptions opts) : impl_(std::make_unique<Impl>()) { impl_->opts = std::move(opts); }
Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

Result<HttpResponse> Connection::request(std::string_view method, std::string_view target, std::string_view body) {
  auto& im = *impl_;
  auto deadline = Clock::now() + im.opts.timeout;
  // podshimd closes an idle keep-alive connection after its request timeout;
  // a connection it has closed is replaced before the request is sent.
  if (im.conn && im.conn->eof_pending()) im.conn.reset();
  if (!im.conn) {
    auto c = connect_to(im.opts, deadline);
    if (!c) return Unexpected(c.error());
    im.conn.emplace(std::move(*c));
  }
  im.conn->set_deadline(deadline);
  auto sent = im.conn->send_all(request_text(method, target, body, /*keep_alive=*/true));
  if (!sent) {
    im.conn.reset();
    return Unexpected(sent.error());
  }
  bool close = false;
  auto r = read_response(*im.conn, im.opts, &close);
  if (!r || close) im.conn.reset();
  return r;
}

Result<void> http_stream_lines(const ClientOptions& opts, std::string_view target,
                               const std::function<bool(std::string_view line)>& on_line) {
  auto c = connect_to(opts, Clock::now() + opts.timeout);
  if (!c) return Unexpected(c.error());
  PODSHIM_TRY(c->send_all(request_text("GET", target, {})));
  auto h = read_head(*c);
  if (!h) return Unexpected(h.error());
  c->set_deadline(std::nullopt);  // a watch may be quiet for a long time
  if (h->status != 200) {
    c->set_deadline(Clock::now() + opts.timeout);
    std::string body;
    // The status is the error; the body only adds the server's words, so a
    // body that cannot be read in full leaves what arrived.
    (void)read_body(*c, *h, 1 << 20, [&](std::string_view p) { body.append(p); return true; });
    return fail(EPROTO, "HTTP {}: {}", h->status, str::trim(body));
  }
  std::string pending;
  return read_body(*c, *h, opts.max_body, [&](std::string_view piece) {
    pending.append(piece);
    size_t start = 0;
    for (;;) {
      auto nl = pending.find('\n', start);
      if (nl == std::string::npos) break;
      if (!on_line(std::string_view(pending).substr(start, nl - start))) return false;
      start = nl + 1;
    }
    pending.erase(0, start);
    return pending.size() <= opts.max_body;
  });
}

}  // namespace podshim::status
